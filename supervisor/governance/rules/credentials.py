"""No reads of credentials: the well-known credential files in any home,
the system's secret files and `.env` files outside the worktree. The engine's
environment is scrubbed on purpose; a task that needs a secret asks the
operator instead."""

from __future__ import annotations

import re
from pathlib import Path

from ..confinement import is_inside
from ..shell_scan import ShellScan

CREDENTIAL_HOME_PATHS = (
    ".ssh",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".config/gh",
    ".config/hub",
    ".netrc",
    ".git-credentials",
    ".docker/config.json",
    ".pypirc",
    ".npmrc",
    ".yarnrc.yml",
    ".kube/config",
    ".gnupg",
    ".password-store",
    ".vault-token",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".terraform.d/credentials.tfrc.json",
)
_OTHER_HOMES = re.compile(
    r"^/(?:root|home/[^/]+|Users/[^/]+)/("
    + "|".join(re.escape(p) for p in CREDENTIAL_HOME_PATHS)
    + r")(?:/|$)"
)
_SYSTEM_SECRETS = re.compile(r"^/(?:etc/(?:shadow|gshadow|sudoers)|proc/\d+/environ)(?:/|$)")
_DOTENV = re.compile(r"^\.env(?:\.[\w.-]+)?$")
NO_CREDENTIALS = (
    "the engine never reads credentials (its environment is scrubbed on purpose); if the task "
    "needs a secret, ask the operator with ask_user"
)


def credential_path(path: Path, home: Path, worktree: Path) -> str | None:
    """Why reading `path` would read a credential (None when it would not)."""
    if is_inside(path, worktree):
        return None
    for rel in CREDENTIAL_HOME_PATHS:
        if is_inside(path, home / rel):
            return f"~/{rel}"
    text = path.as_posix()
    match = _OTHER_HOMES.match(text)
    if match:
        return text
    if _SYSTEM_SECRETS.match(text):
        return text
    if _DOTENV.match(path.name):
        return f"{path} (an .env file outside the worktree)"
    return None


def deny_credential_word(word: str, scan: ShellScan) -> str | None:
    """Why a shell word (or the value after its `=` or `:`) names a credential."""
    candidates = {word}
    for sep in ("=", ":"):
        if sep in word:
            candidates.add(word.split(sep, 1)[1])
    for candidate in candidates:
        if not candidate or candidate.startswith("-"):
            continue
        path = scan.resolve(candidate)
        if path is None:
            continue
        what = credential_path(path, scan.home, scan.worktree)
        if what:
            return f"the command touches {what}: {NO_CREDENTIALS}"
    return None
