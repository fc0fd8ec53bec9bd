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


def write_codex_rollout(codex_home: Path, thread_id: str, prompt: str, answer: str) -> Path:
    """A Codex rollout as Codex 0.171 writes it under $CODEX_HOME/sessions."""

    def item(payload: dict[str, object]) -> dict[str, object]:
        return {
            "timestamp": "2026-12-01T21:53:43.000Z",
            "type": "response_item",
            "payload": payload,
        }

    def message(role: str, kind: str, text: str) -> dict[str, object]:
        return item({"type": "message", "role": role, "content": [{"type": kind, "text": text}]})

    lines = [
        {"type": "session_meta", "payload": {"id": thread_id}},
        message("developer", "input_text", "<skills_instructions>\n## Skills"),
        message("user", "input_text", "<environment_context>\n  <cwd>/repo</cwd>"),
        message("user", "input_text", prompt),
        message("assistant", "output_text", "Need approval."),
        item({"type": "function_call", "name": "exec_command", "arguments": "{}"}),
        item({"type": "function_call_output", "output": "done"}),
        message("assistant", "output_text", answer),
        {"type": "event_msg", "payload": {"type": "task_complete"}},
    ]
    path = (
        codex_home
        / "sessions"
        / "2026"
        / "12"
        / "01"
        / f"rollout-2026-12-01T21-53-43-{thread_id}.jsonl"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    return path


def write_gemini_chat(home: Path, agent_session: str, prompt: str, answer: str) -> Path:
    """A Gemini CLI 0.61 chat file: a header, the `$set` records it keeps
    its metadata in, one record per message (the model's written again once
    its tool calls are known), and a tool response."""
    lines: list[dict[str, object]] = [
        {"sessionId": agent_session, "projectHash": "ab12", "kind": "main"},
        {"$set": {"messages": [{"id": "ctx", "type": "user", "content": [{"text": "<session_context>\nThis is the Gemini CLI."}]}]}},
        {"id": "u1", "timestamp": "2026-12-02T01:32:52.285Z", "type": "user", "content": [{"text": prompt}]},
        {"$set": {"lastUpdated": "2026-12-02T01:32:52.285Z"}},
        {"id": "g1", "type": "gemini", "content": "Writing it."},
        {"id": "g1", "type": "gemini", "content": "Writing it.", "toolCalls": [{"name": "write_file", "args": {}}]},
        {"id": "u2", "type": "user", "content": [{"functionResponse": {"name": "write_file"}}]},
        {"id": "g2", "type": "gemini", "content": answer},
    ]  # fmt: skip
    path = (
        home
        / ".gemini"
        / "tmp"
        / "repo"
        / "chats"
        / f"session-2026-12-02T01-32-{agent_session[:8]}.jsonl"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    return path
