"""`.gitattributes` lines a change adds that name a git driver.

corral itself runs git with every configured filter, textconv and diff/merge
driver off (`run.driver_overrides`), so such a line never makes corral run
anything. But once delivered, the operator's own git (and their CI's) reads
it: `* filter=x` makes every later checkout, `git add` and `git status` run
whatever `filter.x` is in their config on files the agent chose. Gate 2 shows
each such line so the operator decides with it in view.
"""

from __future__ import annotations

import re
from pathlib import Path

from .result_tree import shown, unquote
from .run import git

ATTRIBUTES_PATHSPEC = ":(glob)**/.gitattributes"
# an attribute that hands content to a command git's config names
_DRIVER = re.compile(r"(?:^|\s)(filter|diff|merge)=(\S+)")
_MACRO = re.compile(r"^\s*\[attr\]")
MAX_LINES = 20  # lines listed; more are counted


def driver_lines_in_patch(patch: str) -> list[str]:
    """`path: line` for each added `.gitattributes` line naming a filter,
    diff or merge driver, or defining a macro (which can name one), in a
    zero-context patch of `.gitattributes` files only."""
    found: list[str] = []
    path = ""
    for line in patch.splitlines():
        if line.startswith("+++ "):
            name = unquote(line[4:].rstrip("\t"))
            path = shown(name[2:] if name.startswith("b/") else name)
        elif line.startswith("+") and not line.startswith("+++"):
            added = line[1:].strip()
            if added.startswith("#"):
                continue
            if _DRIVER.search(added) or _MACRO.match(added):
                found.append(f"{path}: {added}")
    if len(found) > MAX_LINES:
        found = [*found[:MAX_LINES], f"… and {len(found) - MAX_LINES} more such lines"]
    return found


def driver_lines(worktree: Path, start_commit: str, tree: str) -> list[str]:
    """The change's added `.gitattributes` lines that name a driver."""
    patch = git(
        worktree,
        "diff",
        "--no-ext-diff",
        "--no-textconv",
        "--unified=0",
        start_commit,
        tree,
        "--",
        ATTRIBUTES_PATHSPEC,
    )
    return driver_lines_in_patch(patch)
