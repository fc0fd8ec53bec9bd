"""OpenAI-compatible chat completions (`POST {base_url}/chat/completions`,
streamed): OpenAI itself and the local servers that speak the same wire
format — Ollama (`http://127.0.0.1:11434/v1`), llama.cpp's server, vLLM,
LM Studio. No key is sent when `api_key` is None.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from .base import Message, ModelError, ToolCall, ToolSpec, Turn, Usage
from .endpoints import DEFAULT_OPENAI_BASE_URL
from .http_provider import StreamingHTTPProvider
from .retry import (
    Exchange,
    Retryable,
    RetryPolicy,
    error_detail,
    json_or_error,
    parse_arguments,
    status_error,
)

OPENAI_KEY_HINT = "CORRAL_LLM_API_KEY (or OPENAI_API_KEY)"

_STOP = {"stop": "end_turn", "tool_calls": "tool_use", "function_call": "tool_use"}


def _stop_reason(finish: str | None, has_tools: bool) -> str:
    if finish == "length":
        return "max_tokens"
    if has_tools:
        return "tool_use"
    return _STOP.get(finish or "stop", "end_turn")


def to_openai_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "tool":
            item: dict[str, Any] = {
                "role": "tool",
                "tool_call_id": m.tool_call_id or "",
                "content": m.content,
            }
            if m.name:
                item["name"] = m.name
            out.append(item)
        elif m.role == "assistant" and m.tool_calls:
            out.append(
                {
                    "role": "assistant",
                    "content": m.content or None,
                    "tool_calls": [
                        {
                            "id": c.id,
                            "type": "function",
                            "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
                        }
                        for c in m.tool_calls
                    ],
                }
            )
        else:
            out.append({"role": m.role, "content": m.content})
    return out


def to_openai_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
        }
        for t in tools
    ]


def _usage(raw: Any) -> Usage | None:
    if not isinstance(raw, dict):
        return None
    return Usage(
        input_tokens=int(raw.get("prompt_tokens") or raw.get("input_tokens") or 0),
        output_tokens=int(raw.get("completion_tokens") or raw.get("output_tokens") or 0),
    )


class OpenAICompatProvider(StreamingHTTPProvider):
    """`ModelProvider` over the chat completions wire format."""

    name = "openai"

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        max_retries: int = 3,
        key_hint: str = OPENAI_KEY_HINT,
        retry: RetryPolicy | None = None,
    ) -> None:
        self._setup(
            base_url or DEFAULT_OPENAI_BASE_URL,
            model,
            api_key,
            max_retries=max_retries,
            key_hint=key_hint,
            retry=retry,
        )

    @property
    def url(self) -> str:
        return f"{self.base_url}/chat/completions"

    def _headers(self) -> dict[str, str]:
        headers = {
            "Content-Type": "application/json",
            "Accept": "text/event-stream",
            "User-Agent": "corral",
        }
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    def payload(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        max_tokens: int,
        temperature: float,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": to_openai_messages(messages),
            "max_tokens": max_tokens,
            "temperature": temperature,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if tools:
            body["tools"] = to_openai_tools(tools)
        return body

    async def _read(self, ex: Exchange, on_delta: Callable[[str], None] | None) -> Turn:
        head = await ex.head(self.where)
        if head.status != 200:
            body = await ex.body_bytes(self.where)
            err = status_error(
                head.status,
                body,
                where=self.where,
                model=self.model,
                key_hint=self.key_hint,
                secret=self._api_key,
                retry_after=head.retry_after,
            )
            raise err
        if not head.is_sse:
            turn = self._from_json(json_or_error(await ex.body_bytes(self.where), self.where))
            if on_delta is not None and turn.text:
                on_delta(turn.text)
            return turn

        text: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        finish: str | None = None
        usage: Usage | None = None
        model = ""
        emitted = done = False
        async for _event, data in ex.events(self.where):
            if data.strip() == "[DONE]":
                done = True
                break
            try:
                chunk = json.loads(data)
            except ValueError:
                continue
            if not isinstance(chunk, dict):
                continue
            if chunk.get("error"):
                detail = error_detail(data.encode(), self._api_key)
                err = ModelError(
                    f"the model server at {self.where} failed mid-answer: {detail}", kind="server"
                )
                if emitted:
                    raise err
                raise Retryable(err)
            model = chunk.get("model") or model
            usage = _usage(chunk.get("usage")) or usage
            for choice in chunk.get("choices") or []:
                if not isinstance(choice, dict):
                    continue
                delta = choice.get("delta") or {}
                content = delta.get("content")
                if isinstance(content, str) and content:
                    text.append(content)
                    emitted = True
                    if on_delta is not None:
                        on_delta(content)
                for pos, tc in enumerate(delta.get("tool_calls") or []):
                    self._accumulate(calls, pos, tc)
                if choice.get("finish_reason"):
                    finish = choice["finish_reason"]
        if not done and finish is None:
            raise ModelError(
                f"the model server at {self.where} ended the answer early (no finish reason)",
                kind="server",
            )
        tool_calls = self._finish_calls(calls)
        return Turn(
            text="".join(text),
            tool_calls=tool_calls,
            stop_reason=_stop_reason(finish, bool(tool_calls)),
            usage=usage or Usage(),
            model=model or self.model,
        )

    @staticmethod
    def _accumulate(calls: dict[int, dict[str, Any]], pos: int, tc: Any) -> None:
        if not isinstance(tc, dict):
            return
        index = tc.get("index", pos)
        slot = calls.setdefault(index, {"id": "", "name": "", "args": []})
        if tc.get("id"):
            slot["id"] = tc["id"]
        fn = tc.get("function") or {}
        if fn.get("name") and not slot["name"]:
            slot["name"] = fn["name"]
        args = fn.get("arguments")
        if isinstance(args, dict):
            slot["args"].append(json.dumps(args))
        elif isinstance(args, str):
            slot["args"].append(args)

    @staticmethod
    def _finish_calls(calls: dict[int, dict[str, Any]]) -> tuple[ToolCall, ...]:
        return tuple(
            ToolCall(
                id=slot["id"] or f"call_{index}",
                name=slot["name"],
                arguments=parse_arguments("".join(slot["args"])),
            )
            for index, slot in sorted(calls.items())
        )

    def _from_json(self, data: dict[str, Any]) -> Turn:
        """A server that ignored `stream: true` and answered in one body."""
        choices = data.get("choices") or [{}]
        choice = choices[0] if isinstance(choices[0], dict) else {}
        message = choice.get("message") or {}
        calls: dict[int, dict[str, Any]] = {}
        for pos, tc in enumerate(message.get("tool_calls") or []):
            self._accumulate(calls, pos, tc)
        tool_calls = self._finish_calls(calls)
        content = message.get("content")
        return Turn(
            text=content if isinstance(content, str) else "",
            tool_calls=tool_calls,
            stop_reason=_stop_reason(choice.get("finish_reason"), bool(tool_calls)),
            usage=_usage(data.get("usage")) or Usage(),
            model=data.get("model") or self.model,
        )
