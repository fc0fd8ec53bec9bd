"""What the tools of one run share: the worktree, the shell's environment,
the operator hooks, and the run's memory (the files read so far, which
`write_file` requires, and the changes made, which `report_no_change`
refuses after)."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...governance.confinement import confine, relative_name
from .results import ToolError


@dataclass
class ToolState:
    root: Path  # the worktree, symlinks resolved
    env: dict[str, str]  # the shell's environment (already scrubbed)
    ask: Callable[[str, list[str]], Awaitable[str]] | None  # None: no operator to ask
    withdraw: Callable[[], None]  # takes back a question the run stopped waiting for
    seconds_left: Callable[[], float | None]  # None: the session has no deadline
    hidden: Callable[[Path], bool]  # paths the operator's policy hides from listings
    read: set[Path] = field(default_factory=set)
    mutated: bool = False
    mutations: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.root = Path(os.path.realpath(self.root))

    def rel(self, path: Path) -> str:
        return relative_name(self.root, path)

    def path(self, args: Mapping[str, Any], default: str | None = None) -> Path:
        """The confined path the `path` argument names (`default` when absent)."""
        raw = args.get("path", default)
        if raw is None:
            raise ToolError("the 'path' argument is required (relative to the worktree)")
        return confine(self.root, raw)


def text_arg(args: Mapping[str, Any], key: str, *aliases: str, required: bool = True) -> str:
    """The string argument `key` (or the first alias given); "" when optional and absent."""
    for name in (key, *aliases):
        value = args.get(name)
        if isinstance(value, str):
            return value
    if required:
        raise ToolError(f"the '{key}' argument is required (a string)")
    return ""


def int_arg(args: Mapping[str, Any], key: str) -> int | None:
    """The whole-number argument `key`, or None when absent."""
    value = args.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ToolError(f"'{key}' must be a whole number")
    try:
        return int(value)
    except ValueError:
        raise ToolError(f"'{key}' must be a whole number") from None
