"""What the HTTP providers share: one streamed exchange per attempt, retried
with backoff inside one overall timeout. Subclasses say how to build the
request (`payload`, `_headers`) and how to read the stream (`_read`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .base import Message, ToolSpec, Turn
from .endpoints import display_url
from .retry import Exchange, RetryPolicy, start_exchange, with_retries


class StreamingHTTPProvider:
    @property
    def url(self) -> str:
        """The endpoint a completion is posted to."""
        raise NotImplementedError

    def _setup(
        self,
        base_url: str,
        model: str,
        api_key: str | None,
        *,
        max_retries: int,
        key_hint: str,
        retry: RetryPolicy | None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self._api_key = api_key or None
        self.key_hint = key_hint
        self.retry = retry or RetryPolicy(max_retries=max_retries)
        self.where = display_url(self.base_url)

    def __repr__(self) -> str:  # never the key
        return f"{type(self).__name__}({self.where!r}, {self.model!r})"

    def payload(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        max_tokens: int,
        temperature: float,
    ) -> dict[str, Any]:
        raise NotImplementedError

    def _headers(self) -> dict[str, str]:
        raise NotImplementedError

    async def _read(self, ex: Exchange, on_delta: Callable[[str], None] | None) -> Turn:
        raise NotImplementedError

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
        payload = self.payload(messages, tools, max_tokens, temperature)

        async def attempt(remaining: float) -> Turn:
            exchange = start_exchange(self.url, self._headers(), payload, remaining)
            try:
                return await self._read(exchange, on_delta)
            finally:
                exchange.close()

        return await with_retries(attempt, policy=self.retry, timeout=timeout, where=self.where)
