"""Bring a commit home from a host: `git fetch <ssh url> <commit>` over the
host's own multiplexed connection (GIT_SSH_COMMAND reuses its ControlPath),
so a verified result made on the host is delivered here as any other."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from ..git.run import GitError, git
from .connection import HostConnection

_COMMIT = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


def remote_url(conn: HostConnection, remote_repo: str) -> str:
    """An ssh:// URL git accepts for a repository path on the host."""
    if remote_repo.startswith("~/"):
        return f"ssh://{conn.host.destination}/{remote_repo}"
    if not remote_repo.startswith("/"):
        raise GitError(f"the repository path on host {conn.name} must be absolute: {remote_repo}")
    return f"ssh://{conn.host.destination}{remote_repo}"


def fetch_commit(
    conn: HostConnection, remote_repo: str, commit: str, local_repo: Path, *, timeout: float = 300
) -> str:
    """Fetch `commit` from the repository at `remote_repo` on the host into
    `local_repo`, kept under `refs/corral/hosts/<host>/<commit>`; returns that ref.
    Raises GitError naming the host when the commit cannot be fetched."""
    if not _COMMIT.fullmatch(commit):
        raise GitError(f"{commit!r} is not a full commit id")
    conn.connect()  # the master first: git's ssh then rides it
    ref = f"refs/corral/hosts/{conn.name}/{commit}"
    env = {"GIT_SSH_COMMAND": shlex.join(conn.ssh_base()), "GIT_SSH_VARIANT": "ssh"}
    try:
        git(
            local_repo,
            "fetch",
            "--no-tags",
            "--no-write-fetch-head",
            # a result commit is often on no ref (a worktree's detached HEAD):
            # let the host's upload-pack serve it by id, for this fetch only
            "--upload-pack=git -c uploadpack.allowAnySHA1InWant=true upload-pack",
            remote_url(conn, remote_repo),
            f"{commit}:{ref}",
            timeout=timeout,
            env=env,
        )
    except GitError as exc:
        raise GitError(
            f"cannot fetch {commit[:12]} from {remote_repo} on host {conn.name}: {exc}",
            exc.stderr,
        ) from exc
    if git(local_repo, "rev-parse", "--verify", f"{ref}^{{commit}}").strip() != commit:
        raise GitError(f"the commit fetched from host {conn.name} is not {commit}")
    return ref
