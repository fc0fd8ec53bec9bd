"""Searching the worktree: `find_files` (by glob) and `grep_files` (by
regular expression), both among the files git sees (tracked, and untracked
but not ignored), minus what the operator's policy hides."""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path
from typing import Any

from ...git.run import GitError, WorktreeMetadataChanged, git_bytes
from .files import is_binary
from .results import ToolError, ToolResult, clip
from .state import ToolState, text_arg

MAX_FIND_RESULTS = 500
MAX_GREP_MATCHES = 200
MAX_GREP_LINE = 300
MAX_GREP_FILE_BYTES = 2 * 1024 * 1024


def compile_glob(pattern: str) -> re.Pattern[str]:
    """A glob where `**` crosses directories and `*`, `?` do not."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = pattern.find("]", i + 1)
            if end == -1:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1 : end].replace("\\", "\\\\")
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append(f"[{body}]")
                i = end
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out) + r"\Z")


def git_files(state: ToolState, base: Path) -> list[Path]:
    """Files git sees under `base` (tracked, and untracked but not ignored)."""
    listed: bytes | None
    try:  # corral's hardened git: no fsmonitor, hooks or discovered git dirs
        listed = git_bytes(
            state.root,
            *("ls-files", "-z", "--cached", "--others", "--exclude-standard"),
            *("--", state.rel(base)),
            timeout=60,
        )
    except WorktreeMetadataChanged:
        raise
    except GitError:
        listed = None
    names: list[str]
    if listed is not None:
        names = sorted({os.fsdecode(n) for n in listed.split(b"\x00") if n})
    else:
        names = []
        for folder, dirs, files in os.walk(base):
            dirs[:] = sorted(d for d in dirs if d != ".git")
            for f in sorted(files):
                names.append(os.path.relpath(os.path.join(folder, f), state.root))
    out: list[Path] = []
    for name in names:
        path = state.root / name
        if not path.is_file():
            continue
        real = Path(os.path.realpath(path))
        if not real.is_relative_to(state.root) or state.hidden(real):
            continue
        out.append(path)
    return out


async def find_files(state: ToolState, args: dict[str, Any]) -> ToolResult:
    pattern = text_arg(args, "pattern").strip().removeprefix("./")
    if not pattern:
        raise ToolError("the 'pattern' argument is empty")
    base = state.path(args, ".")
    if not base.is_dir():
        raise ToolError(f"{state.rel(base)} is not a directory")
    regex = compile_glob(pattern)
    by_name = "/" not in pattern
    files = await asyncio.to_thread(git_files, state, base)
    hits: list[str] = []
    for path in files:
        rel_base = path.relative_to(base).as_posix() if path.is_relative_to(base) else ""
        subject = path.name if by_name else rel_base
        if regex.match(subject):
            hits.append(state.rel(path))
    shown = hits[:MAX_FIND_RESULTS]
    text = "\n".join(shown) if shown else f"no files match {pattern!r}"
    if len(hits) > len(shown):
        text += f"\n[{len(hits) - len(shown)} more matches not shown; narrow the pattern]"
    return ToolResult(text, summary=f"{pattern}: {len(hits)} file(s)")


async def grep_files(state: ToolState, args: dict[str, Any]) -> ToolResult:
    pattern = text_arg(args, "pattern")
    flags = re.IGNORECASE if args.get("case_insensitive") else 0
    try:
        regex = re.compile(pattern, flags)
    except re.error as exc:
        raise ToolError(f"{pattern!r} is not a valid regular expression: {exc}") from None
    base = state.path(args, ".")
    glob = text_arg(args, "glob", required=False).strip()
    glob_regex = compile_glob(glob.removeprefix("./")) if glob else None

    def search() -> tuple[list[str], int]:
        files = [base] if base.is_file() else git_files(state, base)
        hits: list[str] = []
        more = 0
        for path in files:
            if glob_regex is not None:
                subject = path.name if "/" not in glob else state.rel(path)
                if not glob_regex.match(subject):
                    continue
            try:
                if path.stat().st_size > MAX_GREP_FILE_BYTES:
                    continue
                data = path.read_bytes()
            except OSError:
                continue
            if is_binary(data):
                continue
            rel = state.rel(path)
            for n, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
                if regex.search(line):
                    if len(hits) >= MAX_GREP_MATCHES:
                        more += 1
                        continue
                    shown = line if len(line) <= MAX_GREP_LINE else line[:MAX_GREP_LINE] + "…"
                    hits.append(f"{rel}:{n}: {shown}")
        return hits, more

    if not base.exists():
        raise ToolError(f"{state.rel(base)} does not exist")
    hits, more = await asyncio.to_thread(search)
    text = "\n".join(hits) if hits else f"no matches for {pattern!r}"
    if more:
        text += f"\n[{more} more matches not shown; narrow the pattern or the path]"
    return ToolResult(text, summary=f"{clip(pattern, 60)}: {len(hits) + more} match(es)")
