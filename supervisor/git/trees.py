"""Immutable git trees of a worktree: what verification ran on, and so what
is shown, reviewed and delivered.

A snapshot reads the worktree's whole content (ignored files excluded) as
bytes, never through filters or conversions, and writes it as a tree object
through a throwaway index (`filetree`). The worktree's own index is never
touched, so an agent running `git` at the same moment never meets our index
lock, and nothing it does later can change the tree. A verified tree is anchored by `refs/corral/verified/<session id>` (a
commit on the start commit) so `git gc` never prunes what may still be
approved, also across restarts.

Blocking; call through `asyncio.to_thread`.
"""

from __future__ import annotations

from pathlib import Path

from .filetree import snapshot_files
from .result_tree import changes_between, shown
from .run import git
from .snapshot import identity_env

_NO_DRIVERS = ["--no-ext-diff", "--no-textconv"]


def snapshot_tree(worktree: Path) -> str:
    """The worktree's full content as a tree id (its own index untouched)."""
    return snapshot_files(worktree)


def seed_worktree(worktree: Path, tree: str) -> None:
    """Make a fresh worktree hold `tree`'s content as uncommitted changes on
    its start commit (new, changed and deleted files alike): a retry that
    carries on from the previous attempt's edits, reviewed from the start."""
    git(worktree, "read-tree", "-u", "--reset", tree, timeout=300)
    git(worktree, "reset", "-q", timeout=300)  # the index back to the start commit


def tree_of(cwd: Path, rev: str) -> str:
    """The tree id of a commit (or of a tree)."""
    return git(cwd, "rev-parse", "--verify", f"{rev}^{{tree}}").strip()


def tree_exists(cwd: Path, tree: str) -> bool:
    """Whether the object database still holds `tree` as a tree."""
    out = git(cwd, "rev-parse", "--verify", "--quiet", f"{tree}^{{tree}}", check=False)
    return out.strip() == tree


def changed_between(cwd: Path, a: str, b: str) -> list[str]:
    """Paths that differ between two trees or commits, sorted, as people read
    them (escaped where a name is not printable UTF-8)."""
    return sorted({shown(c.path) for c in changes_between(cwd, a, b)})


def tree_patch(cwd: Path, start: str, tree: str) -> str:
    """The change from `start` to `tree`, binary-safe, for `git apply`."""
    return git(
        cwd,
        *("-c", "core.quotePath=true"),  # every byte of a name survives as text
        "diff",
        "--binary",
        "--full-index",
        "-M",
        *_NO_DRIVERS,
        start,
        tree,
        "--",
        timeout=300,
    )


def commit_tree(repo: Path, tree: str, parent: str, message: str, *, sign: bool = False) -> str:
    """A commit of exactly `tree` on `parent` (no index, no checkout);
    `sign`: signed with the operator's git signing key (`-S`, as git's own
    `user.signingkey` and `gpg.format` say)."""
    env = identity_env(repo)
    signed = ["-S"] if sign else []
    return git(
        repo, "commit-tree", *signed, tree, "-p", parent, input_text=message, env=env
    ).strip()


def verified_ref(session_id: str) -> str:
    return f"refs/corral/verified/{session_id}"


def anchor_verified(repo: Path, session_id: str, start: str, tree: str) -> str:
    """Keep a verified tree reachable (gc never prunes it); returns the commit.
    A ref that already holds this tree is left as it is."""
    ref = verified_ref(session_id)
    held = git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False).strip()
    if held and tree_of(repo, held) == tree:
        return held
    message = f"corral: the tree verified for session {session_id}\n"
    commit = commit_tree(repo, tree, start, message)
    git(repo, "update-ref", ref, commit)
    return commit
