"""An ACP agent's conversation as a screen of text: what the board's preview
and the session's terminal view show for an agent that has no terminal.
Built from the session's typed events (the last `last` lines), never from
anything the agent drew."""

from __future__ import annotations

from collections.abc import Sequence

from ..events import BlockedData, CoderEvent, ConversationData
from ..panes.base import Screen

WIDTH = 200


def _lines(data: ConversationData | BlockedData) -> list[str]:
    if isinstance(data, BlockedData):
        return [f"blocked ({data.by}): {data.what} — {data.why}"]
    text = data.text.rstrip("\n")
    match data.part:
        case "message":
            return text.splitlines() or [""]
        case "thought":
            return [f"(thinking) {line}" for line in text.splitlines()[:3]]
        case "tool_call" | "tool_update":
            head = f"tool {data.title or data.tool_call_id or ''}".rstrip()
            kind = f" ({data.tool_kind})" if data.tool_kind else ""
            status = f" {data.status}" if data.status else ""
            return [f"{head}{kind}{status}", *(f"  {ln}" for ln in text.splitlines()[:8])]
        case "plan":
            return ["plan:", *(f"  {ln}" for ln in text.splitlines())]
        case "prompt":
            first = text.splitlines()[0] if text else ""
            return ["", f"» {first}"]
        case "turn_end":
            return [f"— turn ended: {text}", ""]
        case "mode" | "model":
            return [f"{data.part}: {text}"]
        case "config":
            return ["config:", *(f"  {ln}" for ln in text.splitlines())]
    return []  # the commands it offers: listed in the log, not here


def conversation_screen(events: Sequence[CoderEvent], last: int = 200) -> Screen | None:
    """The conversation's last lines (None: the session has none). Read from
    the newest event back, only as far as `last` lines reach: the preview
    asks four times a second of a log that keeps thousands."""
    chunks: list[list[str]] = []
    count = 0
    for event in reversed(events):
        if isinstance(event.data, ConversationData | BlockedData):
            chunk = [ln[:WIDTH] for ln in _lines(event.data)]
            chunks.append(chunk)
            count += len(chunk)
            if count >= last:
                break
    lines = [ln for chunk in reversed(chunks) for ln in chunk]
    if not lines:
        return None
    lines = lines[-last:]
    return Screen(lines=lines, cursor_y=len(lines) - 1, width=WIDTH, height=len(lines))
