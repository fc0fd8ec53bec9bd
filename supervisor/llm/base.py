"""The model seam: messages and tool schemas in, one streamed turn out.

Every provider (OpenAI-compatible chat completions, Anthropic Messages, an
agent CLI used one-shot, scripted) implements `ModelProvider.complete`.
Errors are `ModelError` with a `kind` the callers act on: `auth` becomes
`auth_required` with a sentence saying what to set; `rate_limit` and
`server` are retried with backoff by the provider before surfacing; nothing
ever logs or shows a key.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from ..errors import CorralError

Role = Literal["system", "user", "assistant", "tool"]
ErrorKind = Literal["auth", "rate_limit", "server", "timeout", "bad_request", "unavailable"]


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Message:
    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None  # for role "tool": which call this answers
    name: str | None = None  # for role "tool": the tool's name


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]  # JSON schema of the arguments object


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None


@dataclass(frozen=True)
class Turn:
    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    stop_reason: str = "end_turn"  # end_turn | tool_use | max_tokens
    usage: Usage = field(default_factory=Usage)
    model: str = ""


class ModelError(CorralError):
    def __init__(self, message: str, *, kind: ErrorKind, status: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.status = status


class ModelProvider(Protocol):
    name: str  # "openai", "anthropic", "cli:claude", "scripted"
    model: str

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] = (),
        *,
        max_tokens: int = 4096,
        temperature: float = 0.0,
        on_delta: Callable[[str], None] | None = None,
        timeout: float = 120.0,
    ) -> Turn:
        """One assistant turn. Text deltas go to `on_delta` as they stream."""
        ...
