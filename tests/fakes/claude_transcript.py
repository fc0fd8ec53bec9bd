"""A Claude Code transcript as Claude Code writes it: one JSON line per
message (user prompt, assistant text with a tool call, the tool's result,
the answer), plus the summary and system lines a reader skips."""

from __future__ import annotations

import json
from pathlib import Path


def write_transcript(path: Path, prompt: str, answer: str) -> Path:
    lines = [
        {"type": "summary", "summary": "Fold accents", "leafUuid": "u0"},
        {
            "type": "user",
            "sessionId": "0b5e",
            "message": {"role": "user", "content": prompt},
            "timestamp": "2026-12-02T01:00:00.000Z",
        },
        {
            "type": "assistant",
            "message": {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "I'll read the slug module first."},
                    {"type": "tool_use", "id": "t1", "name": "Read", "input": {"path": "s.py"}},
                ],
            },
            "timestamp": "2026-12-02T01:00:02.000Z",
        },
        {
            "type": "user",
            "message": {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "def slug"}],
            },
        },
        {"type": "system", "content": "compacted", "level": "info"},
        {
            "type": "assistant",
            "message": {"role": "assistant", "content": [{"type": "text", "text": answer}]},
            "timestamp": "2026-12-02T01:00:09.000Z",
        },
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "\n".join(json.dumps(line, ensure_ascii=False) for line in lines) + "\n", encoding="utf-8"
    )
    return path
