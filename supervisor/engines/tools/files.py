"""Reading and changing files: `read_file`, `list_dir`, `write_file`,
`edit_file`. Reads are numbered and capped; a write never replaces a file the
run has not read, and an edit replaces exactly one match."""

from __future__ import annotations

from typing import Any

from .results import ToolError, ToolResult
from .state import ToolState, int_arg, text_arg

MAX_READ_CHARS = 60_000
MAX_READ_LINES = 2_000
MAX_READ_BYTES = 8 * 1024 * 1024
MAX_LIST_ENTRIES = 500


def is_binary(data: bytes) -> bool:
    """A NUL byte in the first 8 KiB marks a binary file."""
    return b"\x00" in data[:8192]


async def read_file(state: ToolState, args: dict[str, Any]) -> ToolResult:
    target = state.path(args)
    rel = state.rel(target)
    if not target.exists():
        raise ToolError(f"{rel} does not exist")
    if target.is_dir():
        raise ToolError(f"{rel} is a directory; use list_dir")
    start = int_arg(args, "start_line") or 1
    end = int_arg(args, "end_line")
    with target.open("rb") as fh:
        data = fh.read(MAX_READ_BYTES + 1)
    state.read.add(target)
    if is_binary(data):
        size = target.stat().st_size
        return ToolResult(f"{rel} is a binary file ({size} bytes)", summary=f"{rel}: binary")
    lines = data[:MAX_READ_BYTES].decode("utf-8", errors="replace").splitlines()
    total = len(lines)
    if total == 0:
        return ToolResult(f"{rel} is empty", summary=f"{rel}: empty")
    start = max(1, start)
    last_wanted = total if end is None else max(start, min(end, total))
    if start > total:
        raise ToolError(f"{rel} has {total} lines; start_line {start} is past the end")
    out: list[str] = []
    size = 0
    last = start - 1
    for n in range(start, last_wanted + 1):
        line = f"{n:>6}\t{lines[n - 1]}"
        if out and (size + len(line) > MAX_READ_CHARS or len(out) >= MAX_READ_LINES):
            break
        out.append(line)
        size += len(line) + 1
        last = n
    text = "\n".join(out)
    if last < total and (end is None or last < last_wanted):
        text += (
            f"\n[showing lines {start}-{last} of {total}; read again with "
            f"start_line={last + 1} for more]"
        )
    elif len(data) > MAX_READ_BYTES:
        text += f"\n[the file is larger than {MAX_READ_BYTES} bytes; the rest was not read]"
    return ToolResult(text, summary=f"{rel}: lines {start}-{last} of {total}")


async def list_dir(state: ToolState, args: dict[str, Any]) -> ToolResult:
    target = state.path(args, ".")
    rel = state.rel(target)
    if not target.is_dir():
        raise ToolError(f"{rel} is not a directory")
    entries: list[str] = []
    for child in sorted(target.iterdir(), key=lambda p: (not p.is_dir(), p.name)):
        if child.name == ".git" or state.hidden(child):
            continue
        name = " ".join(child.name.splitlines())  # a newline in a name cannot fake lines
        entries.append(name + ("/" if child.is_dir() else ""))
    shown = entries[:MAX_LIST_ENTRIES]
    text = "\n".join(shown) if shown else "(empty directory)"
    if len(entries) > len(shown):
        text += f"\n[{len(entries) - len(shown)} more entries not shown]"
    return ToolResult(text, summary=f"{rel}: {len(entries)} entries")


async def write_file(state: ToolState, args: dict[str, Any]) -> ToolResult:
    target = state.path(args)
    content = text_arg(args, "content")
    rel = state.rel(target)
    existed = target.exists()
    if existed and target.is_dir():
        raise ToolError(f"{rel} is a directory")
    if existed and target not in state.read:
        raise ToolError(
            f"{rel} already exists and you have not read it in this run; read_file it "
            "first (or use edit_file) so you do not overwrite what you have not seen"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    data = content.encode("utf-8")
    target.write_bytes(data)
    state.read.add(target)
    verb = "replaced" if existed else "created"
    state.mutations.append(f"{verb} {rel}")
    lines = content.count("\n") + (1 if content and not content.endswith("\n") else 0)
    return ToolResult(
        f"{verb} {rel} ({lines} lines, {len(data)} bytes)",
        summary=f"{verb} {rel} ({lines} lines)",
        mutated=True,
    )


async def edit_file(state: ToolState, args: dict[str, Any]) -> ToolResult:
    target = state.path(args)
    old = text_arg(args, "old_text", "old_string")
    new = text_arg(args, "new_text", "new_string")
    rel = state.rel(target)
    if not target.is_file():
        raise ToolError(f"{rel} does not exist; use write_file to create it")
    if not old:
        raise ToolError("old_text is empty; give the exact text to replace")
    if old == new:
        raise ToolError("old_text and new_text are the same; nothing would change")
    try:
        content = target.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(f"{rel} is not UTF-8 text; edit_file cannot change it") from None
    count = content.count(old)
    if count == 0:
        raise ToolError(
            f"old_text was not found in {rel}; read_file it and copy the exact text "
            "(whitespace included, without the line-number prefixes)"
        )
    if count > 1:
        raise ToolError(
            f"old_text is not unique: it appears {count} times in {rel}; include more "
            "surrounding lines so it matches exactly once"
        )
    at = content.index(old)
    line = content.count("\n", 0, at) + 1
    target.write_bytes(content.replace(old, new, 1).encode("utf-8"))
    state.read.add(target)
    state.mutations.append(f"edited {rel}")
    removed = old.count("\n") + 1
    added = new.count("\n") + 1 if new else 0
    return ToolResult(
        f"edited {rel} at line {line}: replaced {removed} line(s) with {added} line(s)",
        summary=f"edited {rel} at line {line} (-{removed} +{added})",
        mutated=True,
    )
