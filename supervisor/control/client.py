"""The client side of the control protocol: `ControlClient` (blocking, one
call at a time: the command line, scripts, benches) and `AsyncControlClient`
(asyncio, concurrent calls and streams: `corral run`, a second console, the
MCP bridge). Both raise the owner's errors as the supervisor's own classes
(`CorralError` and its kinds), so a client reads the same sentences an
in-process caller does.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import itertools
import json
import logging
import socket
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ..errors import CorralError, swallowed
from ..events import EVENT_ADAPTER, CoderEvent, parse_event
from ..models import (
    SessionDetail,
    SessionSummary,
    SubscribeResult,
)
from ..paths import control_socket
from ..paths import owner_running as owner_running  # re-exported: where it always was
from ..session.board import BoardFeed, Watcher
from ..session.journal import Subscription
from . import protocol as p
from .surface import Call, Calls, P, R, call_named

if TYPE_CHECKING:
    from ..discuss.discussion_events import DiscussEvent

log = logging.getLogger("corral.supervisor.control")
_validate_event = EVENT_ADAPTER.validator.validate_json  # one event, validated once


class NoOwner(CorralError):
    """Nobody serves the state dir: no owner runs (or it is too old to serve)."""


class OwnerGone(CorralError):
    """The owner closed the connection (it stopped, or hung up on this client)."""


class OwnerStalled(CorralError):
    """The owner holds the connection but does not answer in time (stopped,
    or too busy): the caller may wait for it or give up; nothing was lost."""


STALLED = "the owner is not answering"  # how a console says OwnerStalled


def _no_owner(state_dir: Path, why: str) -> NoOwner:
    return NoOwner(f"no corral owns {state_dir} ({why}): start `corral serve` or a console there")


def _check_hello(hello: dict[str, Any]) -> dict[str, Any]:
    if hello.get("protocol") != p.PROTOCOL:
        raise CorralError(
            f"the owner speaks {hello.get('protocol')!r}, this corral {p.PROTOCOL!r}: "
            "run the same corral version on both sides"
        )
    return hello


class ControlClient:
    """A blocking connection to the owner. `call(method, **params)` returns
    the result or raises the error the owner answered with."""

    def __init__(self, state_dir: Path, *, timeout: float | None = 30) -> None:
        self.state_dir = Path(state_dir)
        path = control_socket(self.state_dir)
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.settimeout(timeout)
        try:
            self._sock.connect(str(path))
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            self._sock.close()
            raise _no_owner(self.state_dir, "nothing listens on its control socket") from exc
        except TimeoutError as exc:  # its backlog is full: it accepts nobody
            self._sock.close()
            raise OwnerStalled(f"{STALLED} ({self.state_dir}): it accepts no connection") from exc
        except OSError as exc:
            self._sock.close()
            raise _no_owner(self.state_dir, f"its control socket refused: {exc}") from exc
        self._file = self._sock.makefile("rb")
        self._ids = itertools.count(1)
        # one call at a time: a console's worker threads share this connection
        self._lock = threading.Lock()
        self.requests: Counter[str] = Counter()  # calls made, by method (budgets count them)
        self.hello = _check_hello(self.call("hello"))

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._file.close()
            self._sock.close()

    def __enter__(self) -> ControlClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, message: dict[str, Any]) -> None:
        self._sock.sendall(p.encode(message))

    def read(self) -> dict[str, Any]:
        line = self._file.readline(p.MAX_ANSWER_BYTES + 1)
        if not line:
            raise OwnerGone("the owner closed the connection")
        if not line.endswith(b"\n"):
            raise OwnerGone(
                f"the owner's answer is longer than {p.MAX_ANSWER_BYTES} bytes; ask for less "
                "(one session with get, or watch the board)"
            )
        return cast(dict[str, Any], json.loads(line))

    def request(self, call: Call[P, R], params: P) -> R:
        """The owner's answer to `call`, read as its record's type."""
        return call.read(self.call(call.name, **call.request(params)))

    def answer(self, call: Call[P, R], params: P) -> Any:
        """The owner's answer to `call` as the JSON it sent, after checking it
        reads as the record's type: for a command that prints it unchanged."""
        raw = self.call(call.name, **call.request(params))
        call.read(raw)
        return raw

    def call(self, method: str, **params: Any) -> Any:
        """The owner's answer, as JSON; `method` must be one the surface
        defines (`surface.Calls`). An unbounded call (its work takes as long
        as it takes: a delivery, a re-verification) waits while the owner
        holds the connection; an owner that dies closes it, which is the
        only way such a wait ends without an answer."""
        record = call_named(method)
        with self._lock:
            self.requests[method] += 1
            bounded = self._sock.gettimeout()
            if record.unbounded:
                self._sock.settimeout(None)
            try:
                return self._call(method, params)
            except TimeoutError as exc:
                # the answer may still come: this connection cannot tell it from
                # the next one's, so it is closed (the next call says gone)
                self.close()
                raise OwnerStalled(
                    f"{STALLED}: {self.state_dir}'s owner did not answer {method} "
                    f"within {bounded:g} s"
                ) from exc
            except OSError as exc:  # reset, broken pipe, closed: never a bare OSError
                raise OwnerGone(f"the owner of {self.state_dir} went away ({exc})") from exc
            finally:
                with contextlib.suppress(OSError):
                    self._sock.settimeout(bounded)

    def _call(self, method: str, params: dict[str, Any]) -> Any:
        req_id = next(self._ids)
        self.send({"jsonrpc": "2.0", "id": req_id, "method": method, "params": params})
        while True:
            message = self.read()
            if message.get("id") != req_id:
                if message.get("id") is None and "error" in message:
                    p.raise_error(message["error"])
                continue  # a stream's notification: a blocking client reads none
            if "error" in message:
                p.raise_error(message["error"])
            return message.get("result")

    # typed helpers for what the command line asks most
    def list(self) -> list[SessionSummary]:
        return self.request(Calls.list, p.NoParams())

    def get(self, session_id: str) -> SessionDetail:
        return self.request(Calls.get, p.SessionParams(session_id=session_id))


class _RemoteSource:
    """What a client-side subscription calls when it is closed."""

    def __init__(self, client: AsyncControlClient, stream: int) -> None:
        self.client = client
        self.stream = stream

    def unsubscribe(self, sub: Any) -> None:
        self.client._drop_stream(self.stream)


class _RemoteFeed:
    """Stands in for the board feed of a watcher fed over the socket."""

    def __init__(self, client: AsyncControlClient, stream: int) -> None:
        self.client = client
        self.stream = stream

    def unregister(self, watcher: Watcher) -> bool:
        self.client._drop_stream(self.stream)
        return True


class AsyncControlClient:
    """An asyncio connection to the owner: concurrent calls, and streams
    delivered into the supervisor's own `Subscription` and `Watcher` types, so
    code written against the in-process facade reads them unchanged."""

    def __init__(
        self,
        state_dir: Path,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        backlog: int = 4096,
    ) -> None:
        self.state_dir = Path(state_dir)
        self._reader = reader
        self._writer = writer
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._streams: dict[int, Callable[[str, dict[str, Any]], None]] = {}
        self._sinks: dict[int, Callable[[CoderEvent], object]] = {}  # event streams' mailboxes
        self._backlog = backlog
        # a bounded call's answer waits at most this long (None: as long as the
        # owner lives, as `corral run` waits on a session), then OwnerStalled; an
        # unbounded one (a delivery) always waits while the owner lives. A
        # console does not time its calls out: its heartbeat says "not answering"
        self.answer_timeout: float | None = None
        self.requests: Counter[str] = Counter()  # calls made, by method (budgets count them)
        self.pings = 0  # heartbeats, counted apart from what the console asked
        self._closed = False
        self.hello: dict[str, Any] = {}
        self._task = asyncio.get_running_loop().create_task(self._read_loop())
        self.on_disconnect: Callable[[], None] | None = None

    @classmethod
    async def connect(
        cls, state_dir: Path, *, backlog: int = 4096, timeout: float | None = 30
    ) -> AsyncControlClient:
        path = control_socket(Path(state_dir))
        try:
            reader, writer = await asyncio.open_unix_connection(
                str(path), limit=p.MAX_ANSWER_BYTES + 1
            )
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            raise _no_owner(Path(state_dir), "nothing listens on its control socket") from exc
        except OSError as exc:
            raise _no_owner(Path(state_dir), f"its control socket refused: {exc}") from exc
        client = cls(state_dir, reader, writer, backlog=backlog)
        try:  # the greeting waits at most `timeout`: a stopped owner still accepts
            client.requests[Calls.hello.name] += 1
            client.hello = _check_hello(await client._answer(Calls.hello.name, {}, timeout))
        except BaseException:
            await client.close()
            raise
        return client

    async def close(self) -> None:
        self._closed = True
        self._writer.close()
        with swallowed(log, "waiting for the control connection to close"):
            await asyncio.wait_for(self._writer.wait_closed(), 1)
        self._task.cancel()
        with (
            contextlib.suppress(asyncio.CancelledError),
            swallowed(log, "stopping the control client's reader"),
        ):
            await self._task

    async def __aenter__(self) -> AsyncControlClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def connected(self) -> bool:
        return not self._closed and not self._task.done()

    async def request(self, call: Call[P, R], params: P) -> R:
        """The owner's answer to `call`, read as its record's type."""
        return call.read(await self.call(call.name, **call.request(params)))

    async def answer(self, call: Call[P, R], params: P) -> Any:
        """The owner's answer to `call` as the JSON it sent, after checking it
        reads as the record's type: for a bridge that passes it on unchanged."""
        raw = await self.call(call.name, **call.request(params))
        call.read(raw)
        return raw

    async def call(self, method: str, **params: Any) -> Any:
        """The owner's answer, as JSON; `method` must be one the surface
        defines (`surface.Calls`)."""
        record = call_named(method)
        self.requests[method] += 1
        return await self._answer(method, params, None if record.unbounded else self.answer_timeout)

    async def ping(self, timeout: float) -> None:
        """One `hello`: the owner answers within `timeout` seconds, or
        OwnerStalled (OwnerGone once the connection closed)."""
        self.pings += 1
        await self._answer(Calls.hello.name, {}, timeout)

    async def _answer(self, method: str, params: dict[str, Any], timeout: float | None) -> Any:
        if not self.connected:
            raise OwnerGone("the connection to the owner is closed")
        req_id = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[req_id] = future
        try:
            self._writer.write(
                p.encode({"jsonrpc": "2.0", "id": req_id, "method": method, "params": params})
            )
            async with asyncio.timeout(timeout):
                await self._writer.drain()
                return await future
        except TimeoutError as exc:
            raise OwnerStalled(
                f"{STALLED}: {self.state_dir}'s owner did not answer {method} within {timeout:g} s"
            ) from exc
        except (OSError, RuntimeError) as exc:  # the transport closed under the write
            raise OwnerGone(f"the owner of {self.state_dir} went away ({exc})") from exc
        finally:
            self._pending.pop(req_id, None)

    async def _read_loop(self) -> None:
        """Read in chunks and split lines here: a stream of small events costs
        one read per chunk, not one per line."""
        try:
            pending = b""
            while True:
                chunk = await self._reader.read(1 << 18)
                if not chunk:
                    break
                lines = (pending + chunk).split(b"\n")
                pending = lines.pop()
                if len(pending) > p.MAX_ANSWER_BYTES:
                    log.warning("control: an answer over %s bytes; hanging up", p.MAX_ANSWER_BYTES)
                    break
                for line in lines:
                    if line:
                        self._dispatch(line)
        except (ConnectionError, ValueError, asyncio.IncompleteReadError):
            pass
        finally:
            self._closed = True
            gone = OwnerGone("the owner went away (its connection closed)")
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(gone)
            for handler in builtins.list(self._streams.values()):
                handler("stream_end", {"reason": "closed", "message": str(gone)})
            self._streams.clear()
            self._sinks.clear()
            if self.on_disconnect is not None:
                self._safe(self.on_disconnect)

    @staticmethod
    def _safe(fn: Callable[[], None]) -> None:
        try:
            fn()
        except Exception:
            log.exception("control: on_disconnect failed")

    def _dispatch(self, line: bytes) -> None:
        if line.startswith(p.EVENT_HEAD):  # the hot path: one validation, no json.loads
            rest = line[len(p.EVENT_HEAD) :]
            cut = rest.find(p.EVENT_MID)
            if cut > 0 and rest.endswith(b"}}") and rest[:cut].isdigit():
                sink = self._sinks.get(int(rest[:cut]))
                if sink is not None:
                    try:
                        sink(_validate_event(rest[cut + len(p.EVENT_MID) : -2]))
                    except ValueError as exc:
                        log.warning("control: unreadable event: %s", exc)
                return
        message = json.loads(line)
        req_id = message.get("id")
        if req_id is not None:
            future = self._pending.get(req_id)
            if future is not None and not future.done():
                if "error" in message:
                    try:
                        p.raise_error(message["error"])
                    except CorralError as exc:
                        future.set_exception(exc)
                else:
                    future.set_result(message.get("result"))
            return
        if "error" in message:  # an error no request owns: the owner hung up on us
            return
        params = message.get("params") or {}
        stream = params.get("stream")
        handler = self._streams.get(stream) if isinstance(stream, int) else None
        if handler is not None:
            try:
                handler(message.get("method", ""), params)
            except ValueError as exc:  # one bad notification is not the connection's end
                log.warning("control: unreadable %s: %s", message.get("method"), exc)

    def _drop_stream(self, stream: int) -> None:
        self._sinks.pop(stream, None)
        if self._streams.pop(stream, None) is not None and self.connected:
            self._writer.write(
                p.encode(
                    {
                        "jsonrpc": "2.0",
                        "id": None,
                        "method": Calls.unsubscribe.name,
                        "params": {"stream": stream},
                    }
                )
            )

    async def _open_stream(
        self,
        method: str,
        handler: Callable[[str, dict[str, Any]], None],
        sink: Callable[[CoderEvent], object] | None = None,
        **params: Any,
    ) -> tuple[int, Any]:
        """Call a streaming method, its handler (and an event stream's sink)
        registered before the answer can arrive: notifications follow the
        answer on the same connection."""
        self.requests[method] += 1
        req_id = next(self._ids)
        self._streams[req_id] = handler
        if sink is not None:
            self._sinks[req_id] = sink
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[req_id] = future
        self._writer.write(
            p.encode({"jsonrpc": "2.0", "id": req_id, "method": method, "params": params})
        )
        try:
            await self._writer.drain()
            return req_id, await future
        except BaseException:
            self._streams.pop(req_id, None)
            self._sinks.pop(req_id, None)
            raise
        finally:
            self._pending.pop(req_id, None)

    # -- what most clients read; every other call goes through `request` --------------

    async def list(self) -> builtins.list[SessionSummary]:
        return await self.request(Calls.list, p.NoParams())

    async def get(self, session_id: str) -> SessionDetail:
        return await self.request(Calls.get, p.SessionParams(session_id=session_id))

    async def subscribe(
        self, session_id: str, from_seq: int = 0
    ) -> tuple[SubscribeResult, Subscription[CoderEvent] | None]:
        """Replay from `from_seq` and then live events, into a `Subscription`
        (bounded like the owner's: a reader that falls behind is dropped and
        told where to resubscribe from)."""
        sub: Subscription[CoderEvent] = Subscription(None, self._backlog)

        def on(method: str, params: dict[str, Any]) -> None:
            if method == "event":
                sub.offer(params["parsed"] if "parsed" in params else parse_event(params["event"]))
            elif method == "stream_end":
                if params.get("reason") == "dropped":
                    sub.dropped = True
                else:
                    sub.closed = True
                sub._wake()

        stream, result = await self._open_stream(
            Calls.subscribe.name, on, sub.offer, session_id=session_id, from_seq=from_seq
        )
        answer = Calls.subscribe.read(result)
        if not answer.live:
            self._streams.pop(stream, None)
            self._sinks.pop(stream, None)
            return answer, None
        sub._log = _RemoteSource(self, stream)
        return answer, sub

    async def subscribe_discussion(
        self, discussion_id: str, from_seq: int = 0
    ) -> Subscription[DiscussEvent]:
        """A discussion the owner holds: its events from `from_seq`, then
        live, every client's turns included (bounded like `subscribe`)."""
        from ..discuss.discussion_events import parse_discuss_event  # only a discussion's client

        sub: Subscription[DiscussEvent] = Subscription(None, self._backlog)

        def on(method: str, params: dict[str, Any]) -> None:
            if method == "discussion_event":
                sub.offer(parse_discuss_event(params["event"]))
            elif method == "stream_end":
                if params.get("reason") == "dropped":
                    sub.dropped = True
                else:
                    sub.closed = True
                sub._wake()

        params = p.DiscussionStreamParams(discussion_id=discussion_id, from_seq=from_seq)
        stream, _answer = await self._open_stream(
            Calls.discussion_subscribe.name, on, **Calls.discussion_subscribe.request(params)
        )
        sub._log = _RemoteSource(self, stream)
        return sub

    def subscribe_nowait(
        self, session_id: str, from_seq: int, sub: Subscription[CoderEvent]
    ) -> int:
        """Ask for a session's stream without waiting for the answer (for a
        caller that must stay synchronous): its events go into `sub`, and an
        error answer closes it. Returns the stream's id."""
        self.requests[Calls.subscribe.name] += 1
        req_id = next(self._ids)

        def on(method: str, params: dict[str, Any]) -> None:
            if method == "event":
                sub.offer(params["parsed"] if "parsed" in params else parse_event(params["event"]))
            elif method == "stream_end":
                if params.get("reason") == "dropped":
                    sub.dropped = True
                else:
                    sub.closed = True
                sub._wake()

        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

        def answered(done: asyncio.Future[Any]) -> None:
            self._pending.pop(req_id, None)
            if done.cancelled() or done.exception() is not None or not done.result().get("live"):
                self._streams.pop(req_id, None)
                self._sinks.pop(req_id, None)
                sub.closed = True
                sub._wake()

        future.add_done_callback(answered)
        self._streams[req_id] = on
        self._sinks[req_id] = sub.offer
        self._pending[req_id] = future
        self._writer.write(
            p.encode(
                {
                    "jsonrpc": "2.0",
                    "id": req_id,
                    "method": Calls.subscribe.name,
                    "params": Calls.subscribe.request(
                        p.SubscribeParams(session_id=session_id, from_seq=from_seq)
                    ),
                }
            )
        )
        return req_id

    async def watch(self) -> tuple[builtins.list[SessionSummary], Watcher]:
        """The whole board and its changes, like `Supervisor.watch`."""
        watcher = Watcher(cast(BoardFeed, None))

        def on(method: str, params: dict[str, Any]) -> None:
            if method == "board":
                for row in params.get("rows", []):
                    watcher._offer(SessionSummary.model_validate(row))
            elif method == "stream_end":
                if params.get("reason") == "dropped":
                    watcher.dropped = True
                else:
                    watcher.closed = True
                watcher._wake()

        stream, result = await self._open_stream(Calls.watch.name, on)
        watcher._feed = cast(BoardFeed, _RemoteFeed(self, stream))
        return Calls.watch.read(result).rows, watcher

    def unsubscribe(self, sub: Subscription[CoderEvent]) -> None:
        sub.close()

    def unwatch(self, watcher: Watcher) -> bool:
        watcher.closed = True
        watcher._wake()
        return watcher._feed.unregister(watcher)
