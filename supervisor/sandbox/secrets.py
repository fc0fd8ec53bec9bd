"""Credentials a confined run never sees: the usual places under a home
directory (the passwd entry's, this process's and the run's `$HOME`).

The second layer: homes are empty in the sandbox (`allowlist`), so these
matter only where an allowed or granted dir holds one (`~/.cargo` as a PATH
prefix holds `credentials.toml`; an operator's `writable = ["~"]`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from . import witness as fs
from .allowlist import homes

CREDENTIAL_PATHS = (
    ".ssh",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".config/gh",
    ".config/hub",
    ".docker",
    ".gnupg",
    ".kube",
    ".password-store",
    ".local/share/keyrings",
    ".netrc",
    ".git-credentials",
    ".pypirc",
    ".npmrc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".config/git/credentials",
    ".pgpass",
    ".my.cnf",
    ".vault-token",
    ".terraform.d",
    ".bash_history",
    ".zsh_history",
    ".python_history",
    ".psql_history",
    ".mysql_history",
    ".node_repl_history",
)


def hidden_paths(env: Mapping[str, str], extra: Iterable[Path] = ()) -> list[Path]:
    """Existing credential paths to cover, resolved, without duplicates."""
    out: list[Path] = []
    candidates = [f"{home}/{rel}" for home in homes(env) for rel in CREDENTIAL_PATHS]
    for path in [*candidates, *map(str, extra)]:
        if not fs.lexists(path):
            continue  # most are absent: skip resolving them
        real = Path(fs.real(path))
        if real not in out and fs.lexists(real):
            out.append(real)
    return out
