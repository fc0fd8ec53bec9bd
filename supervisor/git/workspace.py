"""A session's private git worktree: provision, diff, deliver to a branch,
remove. Blocking; the supervisor calls these through `asyncio.to_thread`.

The operator's checkout (HEAD, index, files) is never touched: every task
works in a detached worktree under the state dir, and delivery creates a
branch ref only.
"""

from __future__ import annotations

from pathlib import Path

from ..models import DiffFile, DiffSummary
from .attributes import driver_lines
from .repo import head_commit
from .result_tree import changes_between, shown, unquote
from .run import GitError, WorktreeMetadataChanged, git
from .type_changes import type_changes

DEFAULT_PATCH_CAP = 512 * 1024
_IDENTITY = ["-c", "user.name=corral", "-c", "user.email=corral@localhost"]


def _has_identity(cwd: Path) -> bool:
    name = git(cwd, "config", "user.name", check=False).strip()
    email = git(cwd, "config", "user.email", check=False).strip()
    return bool(name and email)


class GitWorkspace:
    """One detached worktree of `repo` at `path`."""

    def __init__(self, repo: Path, path: Path) -> None:
        self.repo = repo
        self.path = path

    def exists(self) -> bool:
        return self.path.is_dir()

    def head(self) -> str | None:
        return head_commit(self.path)

    def is_pristine(self, start_commit: str) -> bool:
        """Nothing changed since `start_commit` (a git error counts as changed)."""
        try:
            if self.head() != start_commit:
                return False
            return git(self.path, "status", "--porcelain", "--untracked-files=all").strip() == ""
        except WorktreeMetadataChanged:
            raise  # not "changed": nothing may run there, the session fails with it
        except GitError:
            return False

    def diff(self, start_commit: str, tree: str, patch_cap: int = DEFAULT_PATCH_CAP) -> DiffSummary:
        """Describe the change from `start_commit` to `tree` (the verified
        tree, never the live worktree)."""
        common = ["--no-ext-diff", "--no-textconv", start_commit, tree, "--"]
        stat = git(self.path, "diff", "--stat", *common)
        numstat = git(self.path, "diff", "--numstat", "-z", "--find-renames", *common)
        # names C-quoted (every byte survives as text); counts in the same order
        names = git(
            self.path,
            "-c",
            "core.quotePath=true",
            "diff",
            "--name-status",
            "--find-renames",
            *common,
        )
        patch = git(self.path, "diff", "--find-renames", *common)
        full = len(patch.encode("utf-8"))
        truncated = full > patch_cap
        if truncated:
            patch = patch.encode("utf-8")[:patch_cap].decode("utf-8", errors="ignore")
        return DiffSummary(
            stat=stat.strip(),
            patch=patch,
            patch_truncated=truncated,
            patch_full_bytes=full,
            files=_files(numstat, names),
            attribute_drivers=driver_lines(self.path, start_commit, tree),
            type_changes=type_changes(self.path, changes_between(self.path, start_commit, tree)),
        )


def _counts(numstat: str) -> list[tuple[str, str]]:
    """(added, removed) per file of `git diff --numstat -z`, in git's order."""
    counts: list[tuple[str, str]] = []
    fields = numstat.split("\0")
    j = 0
    while j < len(fields):
        row = fields[j]
        if not row:
            j += 1
            continue
        added, removed, path = ([*row.split("\t", 2), "", ""])[:3]
        j += 3 if path == "" else 1  # a rename: the two paths follow as fields
        counts.append((added, removed))
    return counts


def _files(numstat: str, names: str) -> list[DiffFile]:
    """One entry per changed file: its name as people read it (escaped where
    it is not printable UTF-8), its kind and line counts."""
    rows: list[tuple[str, str]] = []
    for line in names.splitlines():
        status, _, rest = line.partition("\t")
        if not status:
            continue
        parts = rest.split("\t")
        kind = {"A": "added", "D": "deleted", "R": "renamed", "C": "renamed"}.get(
            status[0], "modified"
        )
        rows.append((shown(unquote(parts[-1])), kind))
    counts = _counts(numstat)
    files: list[DiffFile] = []
    for (path, kind), (added, removed) in zip(rows, counts, strict=False):
        binary = added == "-"
        files.append(
            DiffFile(
                path=path,
                added=0 if binary else int(added or 0),
                removed=0 if binary else int(removed or 0),
                change="binary" if binary else kind,  # type: ignore[arg-type]
            )
        )
    return files
