"""An agent's own transcript, read for the session screen.

Claude Code keeps one JSONL file per conversation (`transcript_path` in its
hook payloads): one line per message, `type` user or assistant, the text in
`message.content` (a string, or blocks: text, tool_use, tool_result). Codex
keeps a rollout per thread (`$CODEX_HOME/sessions/Y/M/D/rollout-…-<thread
id>.jsonl`): `response_item` lines whose payload is a message (input_text /
output_text blocks) or a function call. Only what a reader follows is kept:
the user's words, the agent's text, and the names of the tools it called
(tool results, and the context Codex injects, are left out). Gemini CLI
writes one record per message (`type` user or gemini, written again when it
grows), under a name corral knows only as a pattern (`resolve`). Aider keeps a
markdown chat history. Which reader applies is the agent profile's word
(`transcript_format`), never sniffed from the file. A file that is
too big is read from its end: the latest turns are the ones wanted.
"""

from __future__ import annotations

import glob
import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..models import TranscriptTurn

READ_LIMIT = 8 * 1024 * 1024  # bytes read from the end of a transcript at most
TURN_CHARS = 4000  # one turn's text is cut here
INJECTED = re.compile(r"^<[A-Za-z_]+>")  # Codex's own context: <environment_context>, …


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


def _codex_turn(payload: Any, at: Any) -> TranscriptTurn | None:
    """One Codex `response_item` as a turn: a user or assistant message (not
    the context Codex injects as `<tag>…`), or a tool call by its name."""
    if not isinstance(payload, dict):
        return None
    stamp = at if isinstance(at, str) else None
    if payload.get("type") == "function_call" and isinstance(payload.get("name"), str):
        return TranscriptTurn(role="assistant", text="→ " + payload["name"], at=stamp)
    role = payload.get("role")
    if payload.get("type") != "message" or role not in ("user", "assistant"):
        return None
    texts = [
        b["text"]
        for b in payload.get("content") or []
        if isinstance(b, dict) and isinstance(b.get("text"), str)
    ]
    text = "\n".join(texts).strip()
    if not text or (role == "user" and INJECTED.match(text)):
        return None
    if len(text) > TURN_CHARS:
        text = text[:TURN_CHARS] + " …"
    return TranscriptTurn(role=role, text=text, at=stamp)


def _gemini_turn(line: dict[str, Any]) -> TranscriptTurn | None:
    """One Gemini CLI chat record (`type` user or gemini) as a turn."""
    content = line.get("content")
    if isinstance(content, list):
        content = "\n".join(
            b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"), str)
        )
    text = content.strip() if isinstance(content, str) else ""
    tools = [c["name"] for c in line.get("toolCalls") or [] if isinstance(c, dict) and "name" in c]
    if tools:
        text = (text + "\n" if text else "") + "→ " + ", ".join(map(str, tools))
    if not text or INJECTED.match(text):
        return None
    at = line.get("timestamp")
    return TranscriptTurn(
        role="user" if line.get("type") == "user" else "assistant",
        text=text[:TURN_CHARS],
        at=at if isinstance(at, str) else None,
    )


def resolve(path: str) -> Path | None:
    """The transcript a stored path names: the file, or the newest file a
    pattern matches (Gemini CLI's chat file carries its start time in its
    name, so corral knows it only as a pattern); None when there is none."""
    if glob.has_magic(path):
        found = glob.glob(path)
        return Path(max(found, key=os.path.getmtime)) if found else None
    return Path(path) if os.path.exists(path) else None


def _codex_line(line: dict[str, Any]) -> TranscriptTurn | None:
    """One rollout line: its `response_item`s are the turns."""
    if line.get("type") == "response_item":
        return _codex_turn(line.get("payload"), line.get("timestamp"))
    return None


def turn_of(line: dict[str, Any]) -> TranscriptTurn | None:
    """One Claude Code transcript line as a turn (None: not a turn a reader follows)."""
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


def aider_turns(text: str) -> list[TranscriptTurn]:
    """Aider's chat history (markdown): `#### ` lines are what was typed (a
    multi-line prompt is several), `> ` lines are Aider's own output (left
    out), the rest is the model's answer."""
    turns: list[TranscriptTurn] = []
    role: str | None = None
    lines: list[str] = []

    def flush() -> None:
        body = "\n".join(lines).strip()
        if role is not None and body:
            turns.append(
                TranscriptTurn(
                    role="user" if role == "user" else "assistant", text=body[:TURN_CHARS]
                )
            )

    for line in text.splitlines():
        if line.startswith("####"):
            if role != "user":
                flush()
                role, lines = "user", []
            lines.append(line[4:].strip())
        elif line.startswith(">") or line.startswith("# aider chat started"):
            if role == "user":
                flush()
                role, lines = None, []
        else:
            if role != "assistant":
                flush()
                role, lines = "assistant", []
            lines.append(line.rstrip())
    flush()
    return turns


def _gemini_line(line: dict[str, Any]) -> TranscriptTurn | None:
    """One Gemini CLI chat line: a message record, or a line shaped like
    Claude Code's (the chat file's older form)."""
    if line.get("type") in ("user", "gemini") and "message" not in line:
        return _gemini_turn(line)
    return turn_of(line)


# The transcript formats an agent profile names (`AgentProfile.transcript_format`):
# a JSONL line reader each, and Aider's markdown history.
JSONL_FORMATS: dict[str, Callable[[dict[str, Any]], TranscriptTurn | None]] = {
    "claude": turn_of,
    "codex": _codex_line,
    "gemini": _gemini_line,
}
MARKDOWN_FORMATS = {"aider": aider_turns}
FORMATS = frozenset({*JSONL_FORMATS, *MARKDOWN_FORMATS})


def read_transcript(path: Path, fmt: str, limit: int = 500) -> list[TranscriptTurn]:
    """The last `limit` turns of an agent's transcript, read in the format its
    profile names (`FORMATS`; the file's content never chooses), oldest first
    (none when the file is missing or unreadable, or the format unknown)."""
    if fmt not in FORMATS:
        return []
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
    if fmt in MARKDOWN_FORMATS:
        return MARKDOWN_FORMATS[fmt](b"\n".join(lines).decode("utf-8", "replace"))[-limit:]
    line_turn = JSONL_FORMATS[fmt]
    turns: dict[object, TranscriptTurn] = {}  # a record written again replaces itself
    for n, raw in enumerate(lines):
        if not raw.strip():
            continue
        try:
            row = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(row, dict):
            continue
        turn = line_turn(row)
        key: object = n
        if fmt == "gemini" and row.get("type") in ("user", "gemini") and "message" not in row:
            key = row.get("id") or n
        if turn is not None:
            turns.pop(key, None)
            turns[key] = turn
        elif key in turns:
            del turns[key]
    return list(turns.values())[-limit:]
