"""Path confinement: the file tools stay inside the worktree.

`..`, absolute paths, `~` and symlinks are resolved before the check, so a
path cannot leave the worktree by spelling; `.git` and the project's policy
files are never written by a tool.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import CorralError
from .tool_request import FILE_TOOLS, WRITE_TOOLS, ToolRequest


def real_path(path: Path | str) -> Path:
    """`path` with symlinks and `..` resolved."""
    return Path(os.path.realpath(path))


def is_inside(path: Path, root: Path) -> bool:
    return path == root or path.is_relative_to(root)


class PathEscape(CorralError):
    """A file tool's path leaves the worktree."""


def confine(worktree: Path, raw: object) -> Path:
    """The real path of `raw` (relative to the worktree, or absolute inside
    it), refusing anything that leaves the worktree lexically (`..`,
    absolute, `~`) or through a symlink."""
    if not isinstance(raw, str) or not raw.strip():
        raise PathEscape("a path is required (relative to the worktree)")
    if "\x00" in raw:
        raise PathEscape("the path contains a NUL byte")
    root = real_path(worktree)
    text = os.path.expanduser(raw.strip())
    candidate = Path(text) if os.path.isabs(text) else root / text
    lexical = Path(os.path.normpath(candidate))
    if not is_inside(lexical, root) and not is_inside(lexical, Path(os.path.normpath(worktree))):
        raise PathEscape(
            f"path {raw!r} is outside the worktree; use paths relative to {root} and stay inside it"
        )
    # re-anchor on the real root, then follow symlinks
    try:
        relative = lexical.relative_to(root)
    except ValueError:
        relative = lexical.relative_to(Path(os.path.normpath(worktree)))
    real = real_path(root / relative)
    if not is_inside(real, root):
        raise PathEscape(
            f"path {raw!r} resolves through a symlink to {real}, outside the worktree; "
            "corral's file tools stay inside it"
        )
    return real


def relative_name(worktree: Path, path: Path) -> str:
    """`path` as the model names it: relative to the worktree (`.` for the
    worktree itself), or unchanged when it lies outside."""
    root = real_path(worktree)
    try:
        rel = path.relative_to(root).as_posix()
    except ValueError:
        return str(path)
    return rel or "."


PROTECTED_WRITE = (".git", ".corral/policies")


class FileConfinement:
    """File tools stay inside the worktree and leave `.git` and the policy
    files alone."""

    name = "worktree confinement"

    def inspect(self, request: ToolRequest) -> str | None:
        if request.tool not in FILE_TOOLS:
            return None
        raw = request.arguments.get("path")
        if raw is None and request.tool in ("list_dir", "find_files", "grep_files"):
            raw = "."
        if isinstance(raw, str) and raw.strip():  # a missing path is the tool's error to report
            try:
                real = confine(request.worktree, raw)
            except PathEscape as exc:
                return str(exc)
            if request.tool in WRITE_TOOLS:
                rel = relative_name(request.worktree, real)
                for protected in PROTECTED_WRITE:
                    if rel == protected or rel.startswith(protected + "/"):
                        return f"{rel} is corral's to manage; do not write under {protected}/"
        pattern = request.arguments.get("pattern")
        if (
            request.tool == "find_files"
            and isinstance(pattern, str)
            and (os.path.isabs(os.path.expanduser(pattern)) or ".." in Path(pattern).parts)
        ):
            return f"pattern {pattern!r} leaves the worktree; use a relative glob such as '**/*.py'"
        return None
