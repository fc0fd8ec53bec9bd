"""The agent's stdio as a JSON-RPC message transport for the ACP SDK.

The SDK's own stdio transport drops a line that is not JSON into a log; here
such a line is reported (`on_malformed`) so the session says what the agent
wrote. Every message corral sends is reported (`on_sent`, with the agent's
request when it is a response) only after its bytes were written to the
agent's stdin and drained: that is when a prompt went out, or an answer
landed."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from typing import Any

MAX_LINE_BYTES = 50 * 1024 * 1024


class StdioWire:
    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        on_malformed: Callable[[bytes], None],
        on_sent: Callable[[dict[str, Any], dict[str, Any] | None], None],
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._on_malformed = on_malformed
        self._on_sent = on_sent
        self._lock = asyncio.Lock()
        self._closed = False
        self._asked: dict[Any, dict[str, Any]] = {}  # the agent's requests not yet answered

    async def send(self, message: dict[str, Any]) -> None:
        data = (json.dumps(message, separators=(",", ":")) + "\n").encode("utf-8")
        async with self._lock:
            if self._closed or self._writer.is_closing():
                raise ConnectionError("the agent's stdin is closed")
            self._writer.write(data)
            await self._writer.drain()
        request = self._asked.pop(message.get("id"), None) if "method" not in message else None
        self._on_sent(message, request)

    async def receive(self) -> dict[str, Any] | None:
        while True:
            try:
                line = await self._reader.readuntil(b"\n")
            except asyncio.IncompleteReadError as exc:
                line = exc.partial
                if not line:
                    return None
            except asyncio.LimitOverrunError:
                self._on_malformed(b"(a line longer than the limit)")
                await self._reader.read(MAX_LINE_BYTES)
                continue
            text = line.strip()
            if not text:
                continue
            try:
                message = json.loads(text)
            except ValueError:
                self._on_malformed(text)
                continue
            if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
                self._on_malformed(text)
                continue
            if "method" in message and "id" in message:
                self._asked[message["id"]] = message
            return message

    async def close(self) -> None:
        self._closed = True
        with contextlib.suppress(Exception):
            self._writer.close()
