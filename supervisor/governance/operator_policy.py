"""The operator's deny rules as an inspector: they can only narrow what the
built-in rules allow, and are frozen when a session's run starts.

A path glob without `/` matches a file or directory name at any depth; one
with `/` matches the worktree-relative path; `*` also crosses `/`. For the
shell tool, each word of the command is matched as a path.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .confinement import PathEscape, confine, is_inside, real_path, relative_name
from .shell_scan import ShellScan
from .shell_words import split_commands
from .tool_request import FILE_TOOLS, ToolRequest


@dataclass(frozen=True)
class OperatorRule:
    """The deny rules of one policy file."""

    source: Path
    commands: tuple[re.Pattern[str], ...] = ()
    paths: tuple[str, ...] = ()
    tools: frozenset[str] = frozenset()


def _path_hit(pattern: str, path: Path, worktree: Path, home: Path) -> bool:
    """Whether one of the operator's path globs matches `path`."""
    pattern = pattern.strip()
    if pattern.endswith("/"):
        pattern = pattern.rstrip("/")
    if pattern.startswith("~"):
        pattern = str(home) + pattern[1:]
    if os.path.isabs(pattern):
        candidates = [path, *path.parents]
        return any(fnmatch.fnmatchcase(c.as_posix(), pattern) for c in candidates)
    if not is_inside(path, worktree):
        return False
    rel = path.relative_to(worktree)
    if rel == Path("."):
        return False
    chain = [rel, *[p for p in rel.parents if p != Path(".")]]
    if "/" in pattern:
        pattern = pattern.removeprefix("./")
        return any(fnmatch.fnmatchcase(c.as_posix(), pattern) for c in chain)
    return any(fnmatch.fnmatchcase(c.name, pattern) for c in chain)


class OperatorPolicy:
    """The operator's deny rules, frozen when the run starts."""

    name = "operator policy"

    def __init__(self, rules: Sequence[OperatorRule] = (), home: Path | None = None) -> None:
        self.rules = list(rules)
        self.home = real_path(home or Path.home())

    @property
    def sources(self) -> list[Path]:
        return [rule.source for rule in self.rules]

    @property
    def denied_tools(self) -> frozenset[str]:
        out: set[str] = set()
        for rule in self.rules:
            out |= rule.tools
        return frozenset(out)

    def inspect(self, request: ToolRequest) -> str | None:
        root = real_path(request.worktree)
        for rule in self.rules:
            if request.tool in rule.tools:
                return f"the operator's policy ({rule.source}) denies the {request.tool} tool"
            if request.tool == "shell":
                command = request.command
                for regex in rule.commands:
                    if regex.search(command):
                        return (
                            f"the operator's policy ({rule.source}) denies commands matching "
                            f"{regex.pattern!r}"
                        )
            if rule.paths:
                for path in self._paths(request, root):
                    for glob in rule.paths:
                        if _path_hit(glob, path, root, self.home):
                            return (
                                f"the operator's policy ({rule.source}) denies access to "
                                f"{relative_name(root, path)} (matches {glob!r})"
                            )
        return None

    def path_denied(self, path: Path, worktree: Path) -> str | None:
        """The pattern that hides `path` from listings and searches, if any."""
        root = real_path(worktree)
        for rule in self.rules:
            for pattern in rule.paths:
                if _path_hit(pattern, path, root, self.home):
                    return pattern
        return None

    def _paths(self, request: ToolRequest, root: Path) -> list[Path]:
        """The paths a call names: a file tool's path, or a shell command's words."""
        if request.tool in FILE_TOOLS:
            try:
                return [confine(root, request.arguments.get("path") or ".")]
            except PathEscape:
                return []
        if request.tool == "shell":
            scan = ShellScan(worktree=root, cwd=root, home=self.home, scratch=())
            out: list[Path] = []
            for simple in split_commands(request.command):
                for word in [*simple.argv[1:], *(t for _op, t in simple.redirects)]:
                    if word.startswith("-"):
                        continue
                    path = scan.resolve(word)
                    if path is not None and path != root:
                        out.append(path)
            return out
        return []
