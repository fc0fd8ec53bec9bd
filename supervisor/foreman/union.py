"""The verified union: verified subtask trees merged in order, in git objects
only (no checkout, no index of the repository's own), then written into the
integration worktree as plain changes on its start commit, the way an
agent's edits would be.

All functions block (git); callers use `asyncio.to_thread`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..git.run import GitError, git
from ..git.snapshot import identity_env
from ..git.trees import commit_tree


@dataclass(frozen=True)
class Merged:
    """One merge step: the new union commit, or the files that conflicted."""

    commit: str | None
    conflicts: list[str]


def changed_files(repo: Path, start: str, tree: str) -> list[str]:
    """Paths a subtask's verified tree changes against the start commit."""
    out = git(repo, "diff", "--name-only", "--no-renames", start, tree)
    return [line for line in out.splitlines() if line]


def commit_subtask(repo: Path, start: str, tree: str, ref: str, message: str) -> str:
    """A commit of the subtask's verified tree on the start commit, anchored
    by `ref` so its objects outlive the subtask's worktree."""
    commit = commit_tree(repo, tree, start, message)
    git(repo, "update-ref", ref, commit)
    return commit


def merge_into(repo: Path, union: str, commit: str, message: str) -> Merged:
    """Merge `commit` into the union commit (three-way, on the objects)."""
    try:
        out = git(
            repo,
            "merge-tree",
            "--write-tree",
            "--name-only",
            "--no-messages",
            union,
            commit,
            check=False,
        )
    except GitError as exc:
        raise GitError(f"merging the subtasks failed: {exc}") from exc
    lines = [line for line in out.splitlines() if line]
    if not lines:
        raise GitError("git merge-tree gave no tree; git 2.38 or newer is needed")
    tree, conflicts = lines[0], lines[1:]
    if conflicts:
        return Merged(None, sorted(set(conflicts)))
    merged = git(
        repo,
        "commit-tree",
        tree,
        "-p",
        union,
        "-p",
        commit,
        input_text=message,
        env=identity_env(repo),
    ).strip()
    return Merged(merged, [])


def write_union(worktree: Path, union: str) -> None:
    """Make the integration worktree's files exactly the union's tree, its
    HEAD and index still the start commit's (the union shows as changes)."""
    git(worktree, "read-tree", "-u", "--reset", union)
    git(worktree, "reset", "-q")
