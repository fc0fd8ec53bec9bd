"""What a tool call gives back: the text the model reads and a line for the
event log. A failed call is a result too (`ToolError` carries the sentence)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ...models import NoChangeFinding


@dataclass
class ToolResult:
    text: str  # what the model receives
    summary: str  # one short line for the event log
    ok: bool = True
    mutated: bool = False
    denied: str | None = None
    nomination: NoChangeFinding | None = None
    impossible: str | None = None  # the task cannot be done as specified: why


class ToolError(Exception):
    """A sentence for the model: the call failed and nothing changed."""


def clip(text: str, n: int) -> str:
    """`text` on one line, cut to `n` characters."""
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def short_args(name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """Arguments for the event log: long texts become their size."""
    out: dict[str, Any] = {}
    for key, value in arguments.items():
        if key in ("content", "old_text", "new_text") and isinstance(value, str):
            out[key] = f"<{len(value)} chars>"
        elif isinstance(value, str):
            out[key] = clip(value, 200)
        elif isinstance(value, int | float | bool) or value is None:
            out[key] = value
        else:
            out[key] = clip(str(value), 200)
    return out
