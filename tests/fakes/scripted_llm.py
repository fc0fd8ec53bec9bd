"""A scripted `ModelProvider` for tests: canned turns in order.

Each step is a `Turn` (its text is streamed through `on_delta` in a few
chunks), a `ModelError` (raised), or a callable `(messages, tools) -> Turn`
(sync or async; it may raise). Every call is recorded before it is served,
so a test can see a call parked on the optional `gate`.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace

from corral.supervisor.llm.base import Message, ModelError, ToolSpec, Turn

Responder = Callable[[Sequence[Message], Sequence[ToolSpec]], Turn | Awaitable[Turn]]
Step = Turn | ModelError | Responder


@dataclass(frozen=True)
class ScriptedCall:
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...]
    max_tokens: int
    temperature: float
    timeout: float

    @property
    def prompt(self) -> str:
        """Every message's text, joined (for assertions on what was asked)."""
        return "\n\n".join(m.content for m in self.messages)

    @property
    def last(self) -> str:
        return self.messages[-1].content if self.messages else ""


def text_chunks(text: str, pieces: int = 3) -> list[str]:
    if not text:
        return []
    size = max(1, -(-len(text) // pieces))
    return [text[i : i + size] for i in range(0, len(text), size)]


class ScriptedProvider:
    """Serves `turns` in order; running out raises ModelError(kind="unavailable").

    `gate`, when set, makes every call wait for it (a parked model)."""

    def __init__(
        self,
        turns: Sequence[Step] = (),
        *,
        gate: asyncio.Event | None = None,
        name: str = "scripted",
        model: str = "scripted",
    ) -> None:
        self.turns: list[Step] = list(turns)
        self.gate = gate
        self.name = name
        self.model = model
        self.calls: list[ScriptedCall] = []

    def push(self, *steps: Step) -> None:
        self.turns.extend(steps)

    @property
    def remaining(self) -> int:
        return len(self.turns)

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
        self.calls.append(
            ScriptedCall(tuple(messages), tuple(tools), max_tokens, temperature, timeout)
        )
        if self.gate is not None:
            await self.gate.wait()
        if not self.turns:
            raise ModelError("the scripted model has no more turns", kind="unavailable")
        step = self.turns.pop(0)
        if isinstance(step, ModelError):
            raise step
        if not isinstance(step, Turn):
            result = step(messages, tools)
            step = await result if inspect.isawaitable(result) else result
            assert isinstance(step, Turn), f"a scripted step returned {step!r}"
        for piece in text_chunks(step.text):
            if on_delta is not None:
                on_delta(piece)
            await asyncio.sleep(0)
        return step if step.model else replace(step, model=self.model)
