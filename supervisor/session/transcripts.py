"""An agent's own transcript, read for the session screen.

Claude Code keeps one JSONL file per conversation (`transcript_path` in its
hook payloads): one line per message, `type` user or assistant, the text in
`message.content` (a string, or blocks: text, tool_use, tool_result). Only
what a reader follows is kept: the user's words, the agent's text, and the
names of the tools it called (tool results are left out). A file that is too
big is read from its end: the latest turns are the ones wanted.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..models import TranscriptTurn

READ_LIMIT = 8 * 1024 * 1024  # bytes read from the end of a transcript at most
TURN_CHARS = 4000  # one turn's text is cut here


def _text_of(content: Any) -> tuple[str, list[str]]:
    """(the text, the names of tools called) of one message's content."""
    if isinstance(content, str):
        return content, []
    texts: list[str] = []
    tools: list[str] = []
    if isinstance(content, list):
        for block in content:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
            elif block.get("type") == "tool_use" and isinstance(block.get("name"), str):
                tools.append(block["name"])
    return "\n".join(texts), tools


def turn_of(line: dict[str, Any]) -> TranscriptTurn | None:
    """One transcript line as a turn (None: not a turn a reader follows)."""
    kind = line.get("type")
    message = line.get("message")
    if kind not in ("user", "assistant") or not isinstance(message, dict):
        return None
    text, tools = _text_of(message.get("content"))
    if tools:
        text = (text + "\n" if text else "") + "→ " + ", ".join(tools)
    text = text.strip()
    if not text:
        return None  # a tool result, or an empty message
    if len(text) > TURN_CHARS:
        text = text[:TURN_CHARS] + " …"
    at = line.get("timestamp")
    return TranscriptTurn(role=kind, text=text, at=at if isinstance(at, str) else None)


def read_transcript(path: Path, limit: int = 500) -> list[TranscriptTurn]:
    """The last `limit` turns of a Claude Code transcript, oldest first
    (none when the file is missing or unreadable)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, 2)
            size = fh.tell()
            fh.seek(max(0, size - READ_LIMIT))
            data = fh.read()
    except OSError:
        return []
    lines = data.split(b"\n")
    if size > READ_LIMIT:
        lines = lines[1:]  # the first line was cut
    turns: list[TranscriptTurn] = []
    for raw in lines:
        if not raw.strip():
            continue
        try:
            row = json.loads(raw)
        except ValueError:
            continue
        if isinstance(row, dict) and (turn := turn_of(row)) is not None:
            turns.append(turn)
    return turns[-limit:]
