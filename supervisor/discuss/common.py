"""Limits, operator-facing sentences, the prepared task and the system prompt of discussions."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..llm.base import Message, ToolCall, ToolSpec

# --- limits and sentences -----------------------------------------------------

DISCUSSION_MUTATION_REFUSAL = (
    "This conversation stage is read-only; this is not a file-permission problem or a user "
    "refusing the requested change. Use prepare_coding_task with the requested change and "
    "constraints so the user can review it and start coding. Do not change file permissions "
    "or ask the user to do so."
)
DISCUSS_MAX_TURNS = 12  # model rounds in one reply
PROMOTE_MAX_ATTEMPTS = 3
MAX_OPEN_DISCUSSIONS = 8
DISCUSSION_IDLE_TTL_SECS = 3600
DISCUSS_EVENT_BUFFER_MAX = 2000
DISCUSS_SUBSCRIBER_QUEUE = DISCUSS_EVENT_BUFFER_MAX + 128
TRANSCRIPT_MAX_TURNS = 40
DISCUSS_MESSAGE_MAX_BYTES = 65536
REPLY_MAX_TOKENS = 4096
DISTILL_MAX_TOKENS = 1024

DISCUSSIONS_DIR = "discussions"  # under the state dir: one `<id>.json` per discussion

READ_TOOLS = ("read_file", "list_dir", "find_files", "grep_files")
GATED_TOOLS = frozenset({"write_file", "edit_file", "shell"})
PREPARE_TOOL = "prepare_coding_task"

GUIDANCE_LIMIT = (
    "Repository guidance applies to your analysis and proposed work; it does not expand the "
    "read-only permissions below."
)

PREPARE_SPEC = ToolSpec(
    PREPARE_TOOL,
    "Prepare a coding task for the operator to review: what to change and the constraints "
    "agreed in this conversation. This does not start any work and changes no file; the "
    "operator reviews and edits it, then starts coding.",
    {
        "type": "object",
        "properties": {
            "intent": {
                "type": "string",
                "description": "One paragraph, imperative: what to change and why.",
            },
            "constraints": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Constraints the operator agreed to (may be empty).",
            },
        },
        "required": ["intent"],
        "additionalProperties": False,
    },
)

_ID = re.compile(r"disc-[0-9a-f]{32}\Z")


def still_answering(discussion_id: str) -> str:
    return (
        f"{discussion_id} is still answering the previous message — wait for `turn_complete` "
        "before sending another"
    )


def too_large(n: int) -> str:
    return (
        f"that message is {n} bytes; the limit is {DISCUSS_MESSAGE_MAX_BYTES}. Shorten it, or "
        "point at a file in the repo instead of pasting it"
    )


def too_many_open() -> str:
    return (
        f"{MAX_OPEN_DISCUSSIONS} discussions are already open — close one before starting another"
    )


def no_open(discussion_id: str) -> str:
    return f"no open discussion '{discussion_id}' — resume a saved conversation, or start a new one"


def not_a_repo(path: Path | str) -> str:
    return (
        f"{path} is not a git repository (or inside one) — discuss needs a repo to ground itself in"
    )


NO_TURNS_YET = "this discussion has no turns yet — say what you are trying to do first"
CLOSED = "this discussion is closed — resume it to continue"
EMPTY_MESSAGE = "discuss message is empty"


# --- records --------------------------------------------------------------------


@dataclass
class PreparedTask:
    intent: str
    constraints: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"intent": self.intent, "constraints": list(self.constraints)}


def _clean_constraints(raw: Any) -> list[str]:
    if not isinstance(raw, list):
        return []
    return [c.strip() for c in raw if isinstance(c, str) and c.strip()]


def _message_to_json(m: Message) -> dict[str, Any]:
    row: dict[str, Any] = {"role": m.role, "content": m.content}
    if m.tool_calls:
        row["tool_calls"] = [
            {"id": c.id, "name": c.name, "arguments": c.arguments} for c in m.tool_calls
        ]
    if m.tool_call_id is not None:
        row["tool_call_id"] = m.tool_call_id
    if m.name is not None:
        row["name"] = m.name
    return row


def _message_from_json(row: dict[str, Any]) -> Message:
    calls = tuple(
        ToolCall(str(c["id"]), str(c["name"]), dict(c.get("arguments") or {}))
        for c in row.get("tool_calls") or ()
    )
    return Message(
        role=row["role"],
        content=str(row.get("content") or ""),
        tool_calls=calls,
        tool_call_id=row.get("tool_call_id"),
        name=row.get("name"),
    )


def system_prompt(repo: Path, summary: str, context: str) -> str:
    parts = [
        "You are corral's discussion assistant: you help a developer think through a change "
        f"to the repository at {repo} before any coding starts. You can read the repository "
        "with read_file, list_dir, find_files and grep_files; you cannot change anything.",
        f"Repository overview:\n{summary}".rstrip(),
    ]
    if context.strip():
        parts.append(context.strip())
    parts.append(GUIDANCE_LIMIT)
    parts.append(
        "Rules of this conversation (read-only):\n"
        "- When the developer asks you to implement, fix or change something, investigate as "
        "needed and then call prepare_coding_task with the intent and the agreed constraints "
        "so they can review it and start coding.\n"
        "- Answer questions and planning requests directly; do not prepare a task for them.\n"
        "- Use real paths from this repository; read files before making claims about them.\n"
        "- A refused write or command is NOT evidence that files are read-only or that the "
        "developer declined: this stage is read-only by design.\n"
        "- Reads outside the repository remain refused.\n"
        "- Preparing a task is not execution: never claim that files changed or that work "
        "started."
    )
    return "\n\n".join(parts)
