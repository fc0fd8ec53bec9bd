"""Worktrees on a host: made and removed with git over the host's
connection (one round trip each), so an agent there works in its own
checkout of the repository that lives there."""

from __future__ import annotations

import re

from ..git.run import GitError
from .connection import HostConnection

_COMMIT = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")

_ADD = """set -e
repo=$1 path=$2 base=$3
git -C "$repo" rev-parse --git-dir >/dev/null 2>&1 || { echo "no git repository at $repo" >&2; exit 3; }
commit=$(git -C "$repo" rev-parse --verify "$base^{commit}")
mkdir -p "$(dirname "$path")"
git -C "$repo" worktree add --quiet --detach "$path" "$commit" >&2
printf '%s\\n' "$commit"
"""


def add_worktree(conn: HostConnection, repo: str, path: str, base: str = "HEAD") -> str:
    """A detached worktree of `repo` at `path` on the host, at `base`; returns
    the base commit. Raises GitError naming the host on any failure."""
    for what, value in (("repository", repo), ("worktree", path)):
        if not value.startswith("/"):
            raise GitError(f"the {what} path on host {conn.name} must be absolute: {value}")
    result = conn.run(["sh", "-c", _ADD, "sh", repo, path, base])
    commit = result.text.strip().splitlines()[-1] if result.text.strip() else ""
    if result.returncode != 0 or not _COMMIT.fullmatch(commit):
        why = result.error.splitlines()[-1] if result.error else f"status {result.returncode}"
        raise GitError(f"cannot make a worktree of {repo} on host {conn.name}: {why}")
    return commit


def head_commit(conn: HostConnection, path: str) -> str:
    """The commit checked out in the worktree at `path` on the host."""
    result = conn.run(["git", "-C", path, "rev-parse", "--verify", "HEAD^{commit}"])
    commit = result.text.strip()
    if result.returncode != 0 or not _COMMIT.fullmatch(commit):
        raise GitError(f"no commit in {path} on host {conn.name}: {result.error}")
    return commit


def remove_worktree(conn: HostConnection, repo: str, path: str) -> None:
    """Remove the worktree (and its changes) from the host; gone already is fine."""
    result = conn.run(["git", "-C", repo, "worktree", "remove", "--force", path])
    if result.returncode != 0 and "is not a working tree" not in result.error:
        raise GitError(f"cannot remove worktree {path} on host {conn.name}: {result.error}")
    conn.run(["git", "-C", repo, "worktree", "prune"])
