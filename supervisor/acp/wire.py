"""The agent's stdio as a JSON-RPC message transport for the ACP SDK.

The SDK's own stdio transport drops a line that is not JSON into a log; here
such a line is reported (`on_malformed`) so the session says what the agent
wrote. Every message corral sends is reported (`on_sent`, with the agent's
request when it is a response) only after its bytes were written to the
agent's stdin and drained: that is when a prompt went out, or an answer
landed.

The wire also carries what the SDK's schema lacks: `on_result` sees the raw
answer to each request the SDK sent (the `models` an agent announces with
`session/new` are not in the SDK's models), and `request` sends a request of
corral's own (`session/set_model`) under ids the SDK never uses, its answer
kept from the SDK.

A piece of speech (`session/update` with an `agent_message_chunk` or
`agent_thought_chunk` of text, most of what an agent streams) goes to
`on_chunk` (the client's `chunk`), not through the SDK: the SDK makes a task,
a tracing span and a validated model of each, several times the cost of the
text it carries. Only that exact shape takes this path; anything else, or
anything unexpected in it, goes to the SDK as before. Its call is queued
behind the SDK's tasks for the messages before it, so the order holds."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import Any

from acp import RequestError

from ..errors import swallowed

log = logging.getLogger("corral.supervisor.acp.wire")

MAX_LINE_BYTES = 50 * 1024 * 1024
SPOKEN = {"agent_message_chunk": "message", "agent_thought_chunk": "thought"}


def spoken(message: dict[str, Any]) -> tuple[str, str] | None:
    """(part, text) of a `session/update` notification that carries one
    piece of text the agent said or thought; None for anything else."""
    if "id" in message or message.get("method") != "session/update":
        return None
    params = message.get("params")
    if not isinstance(params, dict) or not isinstance(params.get("sessionId"), str):
        return None
    update = params.get("update")
    if not isinstance(update, dict):
        return None
    part = SPOKEN.get(update.get("sessionUpdate"))  # type: ignore[arg-type]
    content = update.get("content")
    if part is None or not isinstance(content, dict) or content.get("type") != "text":
        return None
    text = content.get("text")
    return (part, text) if isinstance(text, str) else None


def quiet_unrecorded_spans() -> None:
    """Turn off the SDK's tracing spans while nothing would record them.

    The SDK opens an OpenTelemetry span around every message it handles
    whenever `opentelemetry-api` is importable (the `mcp` SDK brings it), two
    per streamed update: about 33 µs each on this machine against 0.8 µs for
    no span, with 50 ACP sessions streaming a real share of the owner's
    loop. corral configures no tracer provider; while the global provider is
    still the API's default proxy (nobody configured one, e.g. with
    `opentelemetry-instrument`), every such span is a no-op that only costs.
    A provider configured before the first ACP session keeps them."""
    try:
        from acp import telemetry
        from opentelemetry import trace
    except ImportError:
        return
    if type(trace.get_tracer_provider()) is trace.ProxyTracerProvider:
        telemetry.TRACER = None  # type: ignore[assignment]  # the SDK reads None as "no spans"


class StdioWire:
    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        on_malformed: Callable[[bytes], None],
        on_sent: Callable[[dict[str, Any], dict[str, Any] | None], None],
        on_result: Callable[[str, Any], None] = lambda _method, _result: None,
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._on_malformed = on_malformed
        self._on_sent = on_sent
        self._lock = asyncio.Lock()
        self._closed = False
        self._asked: dict[Any, dict[str, Any]] = {}  # the agent's requests not yet answered
        self._on_result = on_result
        self._sent: dict[Any, str] = {}  # the SDK's requests not yet answered: id → method
        self._own: dict[str, asyncio.Future[Any]] = {}  # corral's own requests
        self._own_count = 0
        self._ended = False  # the agent's output ended: no answer can come any more
        # a piece of speech, past the SDK (see the module's docstring)
        self.on_chunk: Callable[[str, str], None] | None = None

    async def send(self, message: dict[str, Any]) -> None:
        data = (json.dumps(message, separators=(",", ":")) + "\n").encode("utf-8")
        async with self._lock:
            if self._closed or self._writer.is_closing():
                raise ConnectionError("the agent's stdin is closed")
            self._writer.write(data)
            await self._writer.drain()
        request = self._asked.pop(message.get("id"), None) if "method" not in message else None
        if "method" in message and "id" in message:
            self._sent[message["id"]] = message["method"]
        self._on_sent(message, request)

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        """Send a request of corral's own and wait for its answer (raises
        `RequestError` when the agent answers with an error, `ConnectionError`
        when it goes)."""
        if self._ended:
            raise ConnectionError("the agent closed its output")
        self._own_count += 1
        key = f"corral-{self._own_count}"
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._own[key] = answer
        try:
            await self.send({"jsonrpc": "2.0", "id": key, "method": method, "params": params})
            return await answer
        finally:
            self._own.pop(key, None)
            self._sent.pop(key, None)

    def _answered(self, message: dict[str, Any]) -> bool:
        """A response to a request of corral's own (kept from the SDK), or
        one the SDK waits for (its raw result shown to `on_result` first)."""
        key = message.get("id")
        own = self._own.get(key) if isinstance(key, str) else None
        if own is not None:
            if not own.done():
                error = message.get("error")
                if isinstance(error, dict):
                    own.set_exception(
                        RequestError(
                            int(error.get("code", -32603)),
                            str(error.get("message", "error")),
                            error.get("data"),
                        )
                    )
                else:
                    own.set_result(message.get("result"))
            return True
        method = self._sent.pop(key, None)
        if method is not None and "result" in message:
            self._on_result(method, message["result"])
        return False

    async def receive(self) -> dict[str, Any] | None:
        while True:
            try:
                line = await self._reader.readuntil(b"\n")
            except asyncio.IncompleteReadError as exc:
                line = exc.partial
                if not line:
                    self._fail_own()
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
            if self.on_chunk is not None:
                said = spoken(message)
                if said is not None:  # after the SDK's tasks for what came before
                    asyncio.get_running_loop().call_soon(self.on_chunk, *said)
                    continue
            if "method" in message and "id" in message:
                self._asked[message["id"]] = message
            elif "method" not in message and self._answered(message):
                continue
            return message

    def _fail_own(self) -> None:
        self._ended = True
        for answer in self._own.values():
            if not answer.done():
                answer.set_exception(ConnectionError("the agent closed its output"))

    async def close(self) -> None:
        self._closed = True
        self._fail_own()
        with swallowed(log, "closing the ACP wire's writer"):
            self._writer.close()
