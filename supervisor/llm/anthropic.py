"""Anthropic Messages API (`POST {base_url}/v1/messages`, streamed).

System messages become the top-level `system`; tool results travel as
`tool_result` blocks in a user message; consecutive messages of one role are
merged, as the API wants alternating turns.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from .base import Message, ModelError, ToolCall, ToolSpec, Turn, Usage
from .endpoints import DEFAULT_ANTHROPIC_BASE_URL
from .http_provider import StreamingHTTPProvider
from .retry import (
    Exchange,
    Retryable,
    RetryPolicy,
    json_or_error,
    parse_arguments,
    status_error,
)

ANTHROPIC_VERSION = "2023-06-01"
ANTHROPIC_KEY_HINT = "CORRAL_LLM_API_KEY (or ANTHROPIC_API_KEY)"


def _stop_reason(reason: str | None, has_tools: bool) -> str:
    if reason == "max_tokens":
        return "max_tokens"
    if reason == "tool_use" or has_tools:
        return "tool_use"
    return "end_turn"


def to_anthropic(messages: Sequence[Message]) -> tuple[str, list[dict[str, Any]]]:
    """(system text, messages) in the Messages API shape."""
    system: list[str] = []
    out: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})

    for m in messages:
        if m.role == "system":
            if m.content:
                system.append(m.content)
        elif m.role == "tool":
            add(
                "user",
                [
                    {
                        "type": "tool_result",
                        "tool_use_id": m.tool_call_id or "",
                        "content": m.content,
                    }
                ],
            )
        elif m.role == "assistant":
            blocks: list[dict[str, Any]] = []
            if m.content:
                blocks.append({"type": "text", "text": m.content})
            blocks += [
                {"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments}
                for c in m.tool_calls
            ]
            add("assistant", blocks)
        elif m.content:
            add("user", [{"type": "text", "text": m.content}])
    return "\n\n".join(system), out


def to_anthropic_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools
    ]


def _input_tokens(usage: dict[str, Any]) -> int:
    return sum(
        int(usage.get(k) or 0)
        for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    )


class AnthropicProvider(StreamingHTTPProvider):
    """`ModelProvider` over the Anthropic Messages API."""

    name = "anthropic"

    def __init__(
        self,
        base_url: str = DEFAULT_ANTHROPIC_BASE_URL,
        model: str = "",
        api_key: str | None = None,
        *,
        max_retries: int = 3,
        key_hint: str = ANTHROPIC_KEY_HINT,
        retry: RetryPolicy | None = None,
    ) -> None:
        self._setup(
            base_url or DEFAULT_ANTHROPIC_BASE_URL,
            model,
            api_key,
            max_retries=max_retries,
            key_hint=key_hint,
            retry=retry,
        )

    @property
    def url(self) -> str:
        # ANTHROPIC_BASE_URL is conventionally the host; tolerate one ending in /v1.
        if self.base_url.endswith("/v1"):
            return f"{self.base_url}/messages"
        return f"{self.base_url}/v1/messages"

    def _headers(self) -> dict[str, str]:
        headers = {
            "Content-Type": "application/json",
            "Accept": "text/event-stream",
            "anthropic-version": ANTHROPIC_VERSION,
            "User-Agent": "corral",
        }
        if self._api_key:
            headers["x-api-key"] = self._api_key
        return headers

    def payload(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        max_tokens: int,
        temperature: float,
    ) -> dict[str, Any]:
        system, msgs = to_anthropic(messages)
        body: dict[str, Any] = {
            "model": self.model,
            "messages": msgs,
            "max_tokens": max_tokens,
            "temperature": temperature,
            "stream": True,
        }
        if system:
            body["system"] = system
        if tools:
            body["tools"] = to_anthropic_tools(tools)
        return body

    def _stream_error(self, data: dict[str, Any], emitted: bool) -> Exception:
        """An `error` event inside a 200 stream (e.g. overloaded_error)."""
        raw_error = data.get("error")
        err: dict[str, Any] = raw_error if isinstance(raw_error, dict) else {}
        etype = str(err.get("type") or "")
        detail = " ".join(str(err.get("message") or etype or "unknown error").split())[:300]
        if etype in ("authentication_error", "permission_error"):
            return ModelError(
                f"the model server at {self.where} rejected the API key: set {self.key_hint} "
                "to a valid key",
                kind="auth",
            )
        message = f"the model server at {self.where} failed mid-answer: {detail}"
        if etype == "invalid_request_error":
            return ModelError(message, kind="bad_request")
        if etype == "rate_limit_error":
            error = ModelError(message, kind="rate_limit")
        else:
            error = ModelError(message, kind="server")
        return error if emitted else Retryable(error)

    async def _read(self, ex: Exchange, on_delta: Callable[[str], None] | None) -> Turn:
        head = await ex.head(self.where)
        if head.status != 200:
            body = await ex.body_bytes(self.where)
            raise status_error(
                head.status,
                body,
                where=self.where,
                model=self.model,
                key_hint=self.key_hint,
                secret=self._api_key,
                retry_after=head.retry_after,
            )
        if not head.is_sse:
            turn = self._from_json(json_or_error(await ex.body_bytes(self.where), self.where))
            if on_delta is not None and turn.text:
                on_delta(turn.text)
            return turn

        text: list[str] = []
        blocks: dict[int, dict[str, Any]] = {}
        stop: str | None = None
        input_tokens = output_tokens = 0
        model = ""
        emitted = False
        async for event, raw in ex.events(self.where):
            try:
                data = json.loads(raw)
            except ValueError:
                continue
            if not isinstance(data, dict):
                continue
            kind = data.get("type") or event
            if kind == "message_start":
                message = data.get("message") or {}
                model = message.get("model") or model
                usage = message.get("usage") or {}
                input_tokens = _input_tokens(usage)
                output_tokens = int(usage.get("output_tokens") or 0)
            elif kind == "content_block_start":
                block = data.get("content_block") or {}
                index = int(data.get("index", len(blocks)))
                if block.get("type") == "tool_use":
                    blocks[index] = {
                        "id": block.get("id") or f"toolu_{index}",
                        "name": block.get("name") or "",
                        "input": block.get("input") or {},
                        "json": [],
                    }
                elif block.get("type") == "text" and block.get("text"):
                    text.append(block["text"])
                    emitted = True
                    if on_delta is not None:
                        on_delta(block["text"])
            elif kind == "content_block_delta":
                delta = data.get("delta") or {}
                if delta.get("type") == "text_delta" and delta.get("text"):
                    text.append(delta["text"])
                    emitted = True
                    if on_delta is not None:
                        on_delta(delta["text"])
                elif delta.get("type") == "input_json_delta":
                    slot = blocks.get(int(data.get("index", -1)))
                    if slot is not None:
                        slot["json"].append(delta.get("partial_json") or "")
            elif kind == "message_delta":
                stop = (data.get("delta") or {}).get("stop_reason") or stop
                usage = data.get("usage") or {}
                output_tokens = int(usage.get("output_tokens") or output_tokens)
                input_tokens = max(input_tokens, _input_tokens(usage))
            elif kind == "error":
                raise self._stream_error(data, emitted)
            elif kind == "message_stop":
                stop = stop or "end_turn"
                break
        if stop is None:
            raise ModelError(
                f"the model server at {self.where} ended the answer early (no stop reason)",
                kind="server",
            )
        calls = tuple(
            ToolCall(
                id=slot["id"],
                name=slot["name"],
                arguments=parse_arguments("".join(slot["json"])) if slot["json"] else slot["input"],
            )
            for _, slot in sorted(blocks.items())
        )
        return Turn(
            text="".join(text),
            tool_calls=calls,
            stop_reason=_stop_reason(stop, bool(calls)),
            usage=Usage(input_tokens=input_tokens, output_tokens=output_tokens),
            model=model or self.model,
        )

    def _from_json(self, data: dict[str, Any]) -> Turn:
        """A server that answered `stream: true` with one JSON message."""
        text: list[str] = []
        calls: list[ToolCall] = []
        for block in data.get("content") or []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text":
                text.append(str(block.get("text") or ""))
            elif block.get("type") == "tool_use":
                calls.append(
                    ToolCall(
                        id=str(block.get("id") or f"toolu_{len(calls)}"),
                        name=str(block.get("name") or ""),
                        arguments=parse_arguments(block.get("input")),
                    )
                )
        usage = data.get("usage") or {}
        return Turn(
            text="".join(text),
            tool_calls=tuple(calls),
            stop_reason=_stop_reason(data.get("stop_reason"), bool(calls)),
            usage=Usage(
                input_tokens=_input_tokens(usage),
                output_tokens=int(usage.get("output_tokens") or 0),
            ),
            model=data.get("model") or self.model,
        )
