"""How much a session changed and how far its base moved on: files and
lines changed between two trees (`git diff-tree --numstat`, no diff driver or
textconv), and commits on the base since the session started (`rev-list
--count`). Read-only; every call goes through the hardened `run.git`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .errors import GitError
from .run import git


@dataclass(frozen=True)
class ChangeStats:
    files: int
    added: int
    removed: int


@dataclass(frozen=True)
class GitStats:
    """A board row's numbers: changes since the start, and the base's lead."""

    files: int
    added: int
    removed: int
    behind: int | None  # commits on the base since the start (None: unknown)


def change_stats(cwd: Path | str, start: str, tree: str) -> ChangeStats:
    """Files changed between `start` and `tree` and their added/removed lines
    (a binary file counts as a file with no lines)."""
    if start == tree:
        return ChangeStats(0, 0, 0)
    out = git(
        cwd, "diff-tree", "-r", "--numstat", "--no-renames", "--no-ext-diff", "--no-textconv",
        start, tree, "--",
    )  # fmt: skip
    files = added = removed = 0
    for line in out.splitlines():
        parts = line.split("\t", 2)
        if len(parts) != 3:
            continue
        files += 1
        added += int(parts[0]) if parts[0].isdigit() else 0
        removed += int(parts[1]) if parts[1].isdigit() else 0
    return ChangeStats(files, added, removed)


def base_commit(repo: Path | str, base: str) -> str | None:
    """The commit `base` names now (None when it does not resolve): what a
    sweep over many sessions on one base asks git once, not once a session."""
    out = git(repo, "rev-parse", "--verify", "--quiet", f"{base}^{{commit}}", "--", check=False)
    text = out.strip()
    return text or None


def commits_behind(repo: Path | str, start_commit: str, base: str) -> int | None:
    """Commits `base` gained since `start_commit` (None when `base` does not
    resolve, e.g. a branch that was removed)."""
    try:
        out = git(repo, "rev-list", "--count", f"{start_commit}..{base}", "--")
    except GitError:
        return None
    text = out.strip()
    return int(text) if text.isdigit() else None
