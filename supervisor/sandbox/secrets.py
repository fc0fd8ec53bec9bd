"""Credentials a confined run never sees: the usual places under a home
directory (the real one and the one the run's environment names)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

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
)


def homes(env: Mapping[str, str]) -> list[Path]:
    out: list[Path] = []
    for raw in (os.path.expanduser("~"), env.get("HOME", "")):
        if raw and os.path.isabs(raw):
            home = Path(os.path.realpath(raw))
            if home not in out and home != Path("/"):
                out.append(home)
    return out


def hidden_paths(env: Mapping[str, str], extra: Iterable[Path] = ()) -> list[Path]:
    """Existing credential paths to cover, resolved, without duplicates."""
    out: list[Path] = []
    candidates = [home / rel for home in homes(env) for rel in CREDENTIAL_PATHS]
    for path in [*candidates, *extra]:
        if not os.path.lexists(path):
            continue  # most are absent: skip resolving them (this runs before every check)
        real = Path(os.path.realpath(path))
        if real not in out and os.path.lexists(real):
            out.append(real)
    return out
