"""The owner's side of the control protocol (`protocol.py`): an asyncio unix
server in the state dir that answers each request by calling the facade.

Only the owner's own user may connect: the socket is 0600 in a 0700 dir,
and each connection's peer uid (SO_PEERCRED) is checked again, since a
mode is only as good as the directories above it. A client that sends
garbage, too much, or goes away mid-stream costs its own connection and
nothing else: streams are bounded mailboxes the owner never waits for.

Same uid is not the same person: each connection's caller is classified
once, when it connects (`callers.py`), as the operator or an agent, and
each method says once, in `METHODS`, whether an agent may call it and
whether only a person may. An agent's call to a person's method is refused
with a sentence and written on the session's log, where the board shows it.
Each running local agent also gets a socket of its own
(`<state>/as/<last 12 of the session id>/s`): whoever connects there is
that agent.

Each client is bounded: at most `max_in_flight` requests are worked on at
once (past it the owner stops reading that connection), answers are written
under backpressure, and a client that leaves more than `max_pending_bytes`
of answers unread, or reads nothing for `write_stall_secs`, is cut off with
a sentence in the owner's log. Other clients never wait for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import shutil
import socket
import time
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError
from pydantic_core import to_json

from ..cancelling import cancel_and_wait
from ..contracts.hidden import for_agent
from ..errors import CorralError, StateDirError, swallowed
from ..events import OPERATOR, BoundaryData, CoderEvent
from ..paths import agent_socket_path, ensure_private_dir
from ..session.board import WatchDropped, Watcher
from ..session.journal import Subscription, SubscriptionClosed, SubscriptionDropped
from ..states import CoderState
from . import protocol as p
from . import rules
from .callers import Agent, Caller, CallerClassifier, peer_pid_uid
from .surface import CALLS, Call, Calls, P

if TYPE_CHECKING:
    from ..api import Supervisor
    from ..discuss import Discussions
    from .handles import AssistantTools

log = logging.getLogger("corral.supervisor.control")

REPLY_GRACE_SECS = 30.0  # how long answers still go out to a client that half-closed
THIS_SESSIONS = "this session's"
BOUNDARY_REPEAT_SECS = 30.0
MAX_SHOWN_TARGET = (
    64  # a session id is 24 characters  # the same refused attempt is written once per this long
)
Handler = Callable[["_Connection", Any, Any], Awaitable[Any]]


@dataclasses.dataclass(frozen=True)
class ClientBounds:
    """What one connection may cost the owner."""

    max_in_flight: int = 32  # requests worked on at once; past it, reading waits
    # answers written but not yet read by the client: room for two boards of 10,000 rows
    max_pending_bytes: int = 32 << 20
    write_stall_secs: float = 30.0  # a client that reads nothing this long is cut off


@dataclasses.dataclass(frozen=True)
class Method:
    """One method of the surface (`surface.Calls`: its params, answer, who
    may call it) and the handler that answers it here."""

    call: Call[Any, Any]
    handler: Handler


def serve(call: Call[P, Any], handler: Callable[[_Connection, Any, P], Awaitable[Any]]) -> Method:
    """`call` answered by `handler` (whose params are the record's model)."""
    return Method(call, handler)


@dataclasses.dataclass
class _Streamed:
    """A result followed by a stream, started once the result is sent."""

    result: Any
    start: Callable[[], Coroutine[Any, Any, None]]


class ControlServer:
    """Serves `supervisor` on `<state dir>/control.sock` until `close()`,
    and each running local agent on its own agent socket."""

    def __init__(
        self,
        supervisor: Supervisor,
        *,
        discussions: Discussions | Callable[[], Discussions] | None = None,
        tools: AssistantTools | None = None,
        allowed_uid: int | None = None,
        bounds: ClientBounds | None = None,
        classifier: CallerClassifier | None = None,
    ) -> None:
        self.supervisor = supervisor
        self.discussions = discussions
        self.tools = tools
        self.allowed_uid = os.getuid() if allowed_uid is None else allowed_uid
        self.bounds = bounds or ClientBounds()
        self.path = p.socket_path(supervisor.state_dir)
        self.classifier = classifier or classifier_for(supervisor)
        self._server: asyncio.AbstractServer | None = None
        self._connections: set[_Connection] = set()
        self._handlers: set[asyncio.Task[Any]] = set()  # each connection's own task
        self._agent_servers: dict[str, asyncio.Task[asyncio.AbstractServer]] = {}
        # when each (calling session, method) attempt was last written: once per
        # BOUNDARY_REPEAT_SECS, so a loop cannot flood the log it is shown on
        self._recorded: dict[tuple[str | None, str], float] = {}

    async def start(self) -> Path:
        """Listen on the socket (a stale one from a crashed owner is
        replaced: whoever calls this holds the state dir's lock), and on
        the agent socket of every local agent already running."""
        if len(os.fsencode(self.path)) > p.MAX_SOCKET_PATH:
            raise StateDirError(
                f"the control socket path {self.path} is longer than a unix socket allows "
                f"({p.MAX_SOCKET_PATH} bytes): set CORRAL_HOME to a shorter directory"
            )
        ensure_private_dir(self.path.parent)
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        old = os.umask(0o177)
        try:
            self._server = await asyncio.start_unix_server(
                lambda r, w: self._accept(r, w, None),
                path=str(self.path),
                limit=p.MAX_MESSAGE_BYTES + 1,
            )
        finally:
            os.umask(old)
        os.chmod(self.path, 0o600)
        for sid in self.supervisor.follow_local_agents(
            self.open_agent_socket, self.close_agent_socket
        ):
            self.open_agent_socket(sid)
        return self.path

    async def close(self) -> None:
        self.supervisor.unfollow_local_agents(self.open_agent_socket, self.close_agent_socket)
        for sid in list(self._agent_servers):
            # the directories stay: a confined agent that outlives this owner sees
            # the next owner's socket there (its sandbox binds the directory)
            self.close_agent_socket(sid, keep_dir=True)
        if self._server is not None:
            self._server.close()
            for conn in list(self._connections):
                conn.abort()
            # every connection's calls end here, and then its handler (its
            # reads end with the abort), not when the loop shuts down
            await cancel_and_wait(
                [t for c in self._connections for t in c.tasks()],
                timeout=2,
                what="a control call",
            )
            if self._handlers:
                await asyncio.wait(set(self._handlers), timeout=2)
            with swallowed(log, "waiting for the control socket to close"):
                await asyncio.wait_for(self._server.wait_closed(), 2)
            self._server = None
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    # -- agent sockets -------------------------------------------------------------------

    def agent_socket(self, session_id: str) -> Path:
        return agent_socket_path(self.supervisor.state_dir, session_id)

    def open_agent_socket(self, session_id: str) -> None:
        """Listen on the session's agent socket: bound before this returns
        (its agent may call at once; the connection waits in the backlog)."""
        # its directory stays: a sandbox about to start binds it (gone, bwrap fails)
        self.close_agent_socket(session_id, keep_dir=True)
        path = self.agent_socket(session_id)
        if len(os.fsencode(path)) > p.MAX_SOCKET_PATH:
            log.warning(
                "control: no agent socket for %s: %s is longer than a unix socket allows; "
                "its agent reaches the owner only through the main socket",
                session_id,
                path,
            )
            return
        ensure_private_dir(path.parent.parent)
        ensure_private_dir(path.parent)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            old = os.umask(0o177)
            try:
                sock.bind(str(path))
            finally:
                os.umask(old)
            sock.listen(64)
        except OSError as exc:
            sock.close()
            log.warning("control: no agent socket for %s: %s", session_id, exc)
            return
        agent = Agent(session_id, None, "on its agent socket")
        serving = asyncio.get_running_loop().create_task(
            asyncio.start_unix_server(
                lambda r, w: self._accept(r, w, agent),
                sock=sock,
                limit=p.MAX_MESSAGE_BYTES + 1,
            )
        )
        self._agent_servers[session_id] = serving

    def close_agent_socket(self, session_id: str, *, keep_dir: bool = False) -> None:
        """Stop serving the session's agent socket (its agent ended, or the
        owner stops), and close the connections that came through it."""
        serving = self._agent_servers.pop(session_id, None)
        if serving is not None:
            if serving.done() and not serving.cancelled() and serving.exception() is None:
                serving.result().close()
            else:
                serving.cancel()
            for conn in list(self._connections):
                if conn.on_agent_socket == session_id:
                    conn.abort()
        path = self.agent_socket(session_id)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        if not keep_dir:  # with what else corral kept there (the network proxy's socket and list)
            shutil.rmtree(path.parent, ignore_errors=True)

    def agent_sockets(self) -> list[str]:
        """Sessions whose agent socket is served."""
        return list(self._agent_servers)

    # -- connections ---------------------------------------------------------------------

    async def _accept(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        agent: Agent | None,
    ) -> None:
        """A connection's handler, from its first byte to its end. Only the
        loop shutting down cancels it, and nothing awaits it: ending it
        cancelled would make asyncio's stream server log a CancelledError
        traceback (Python 3.11), so it ends quietly, the connection closed."""
        try:
            await self._serve_connection(reader, writer, agent)
        except asyncio.CancelledError:
            writer.transport.abort()

    async def _serve_connection(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        agent: Agent | None,
    ) -> None:
        sock = writer.get_extra_info("socket")
        try:
            pid, uid = peer_pid_uid(sock) if sock is not None else (0, -1)
        except OSError:
            pid, uid = 0, -1
        caller: Caller = (
            Agent(agent.session_id, pid, agent.why)
            if agent is not None
            # a /proc walk (and, under a tmux, one question to it): off the loop
            else await asyncio.to_thread(
                self.classifier.classify_pid, pid, dict(self.classifier.pane_roots())
            )
        )
        conn = _Connection(self, reader, writer, caller, agent.session_id if agent else None)
        if uid != self.allowed_uid:
            # read its first request, so the refusal is an answer it reads (closing
            # on unread bytes would reset the connection and lose the sentence)
            with swallowed(log, "reading a refused peer's first request"):
                await asyncio.wait_for(reader.readline(), 1)
            await conn.send_error(
                None,
                p.CORRAL_ERROR,
                f"refused: the peer's uid {uid} is not the owner's uid {self.allowed_uid}",
                "PermissionDenied",
            )
            await conn.finish()
            return
        self._connections.add(conn)
        handler = asyncio.current_task()
        if handler is not None:
            self._handlers.add(handler)
        try:
            await conn.run()
        finally:
            self._connections.discard(conn)
            if handler is not None:
                self._handlers.discard(handler)

    def clients(self) -> list[dict[str, Any]]:
        """What each connected client costs now: who, requests in flight,
        answer bytes not yet written out."""
        return [
            {
                "caller": conn.caller.describe(),
                "pid": conn.caller.pid,
                "in_flight": len(conn.requests),
                "pending_bytes": conn.pending,
            }
            for conn in self._connections
        ]

    def classify(self, pid: int | None) -> Caller:
        """Who process `pid` is (one /proc walk; see `callers.py`)."""
        return self.classifier.classify_pid(pid)

    def agents_may_start(self) -> bool:
        policy = getattr(self.tools, "policy", None)
        if policy is not None:
            return bool(policy.agents_may_start)
        return bool(self.supervisor.mcp_settings().agents_may_start)

    # -- what agents tried ---------------------------------------------------------------

    def refuse(self, caller: Agent, method: str, phrase: str, target: str | None) -> CorralError:
        """The refusal of an agent's call to a person's method, written where
        the operator sees it: the calling session's log (the target's too,
        when it names another), else the owner's log."""
        if target is not None:
            target = target[:MAX_SHOWN_TARGET]  # whatever the agent sent, shown short
        sentence = rules.person_refusal(caller, phrase, target)
        key = (caller.session_id, method)
        now = time.monotonic()
        if now - self._recorded.get(key, -BOUNDARY_REPEAT_SECS) >= BOUNDARY_REPEAT_SECS:
            if len(self._recorded) > 4096:  # callers come and go: forget the old ones
                self._recorded = {
                    k: t for k, t in self._recorded.items() if now - t < BOUNDARY_REPEAT_SECS
                }
            self._recorded[key] = now
            self._record(caller, method, phrase, target)
        return CorralError(sentence)

    def _record(self, caller: Agent, method: str, phrase: str, target: str | None) -> None:
        sup = self.supervisor
        shown = False
        if caller.session_id is not None:
            own = phrase.format(whose=rules.whose(caller.session_id, target))
            message = f"the agent tried to {own}"
            data = BoundaryData(
                method=method, caller=caller.session_id, target=target, message=message
            )
            shown = sup.record_boundary(caller.session_id, data)
        if target is not None and target != caller.session_id:
            who = (
                "an agent of an unknown session"
                if caller.session_id is None
                else f"the agent of session {caller.session_id[-8:]}"
            )
            message = f"{who} tried to {phrase.format(whose=THIS_SESSIONS)}"
            data = BoundaryData(
                method=method, caller=caller.session_id, target=target, message=message
            )
            shown = sup.record_boundary(target, data) or shown
        log.warning(
            "control: refused %s (pid %s, %s) calling %s%s%s",
            caller.describe(),
            caller.pid,
            caller.why,
            method,
            f" on {target}" if target else "",
            "" if shown else " (no live session to show it on)",
        )


def classifier_for(supervisor: Supervisor) -> CallerClassifier:
    """Peers judged against the supervisor's live local agent panes and its
    own agent tmux server."""
    return CallerClassifier(supervisor.agent_pane_roots, supervisor.agent_server_pid_reader())


class _Connection:
    def __init__(
        self,
        server: ControlServer,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        caller: Caller,
        on_agent_socket: str | None = None,
    ) -> None:
        self.server = server
        self.sup = server.supervisor
        self.reader = reader
        self.writer = writer
        self.caller = caller
        self.on_agent_socket = on_agent_socket  # the session whose agent socket it came on
        self.bounds = server.bounds
        self.streams: dict[Any, asyncio.Task[None]] = {}
        self.requests: set[asyncio.Task[None]] = set()
        self._lock = asyncio.Lock()
        self.pending = 0  # bytes of answers handed to send_raw and not yet written out
        self.gone = False

    # -- writing -------------------------------------------------------------------------

    async def send_raw(self, data: bytes) -> None:
        """Write under backpressure: one writer at a time, each waiting for the
        client to read. A client that leaves too much unread, or reads nothing
        for too long, is cut off."""
        if self.gone:
            return
        self.pending += len(data)
        try:
            if self.pending > self.bounds.max_pending_bytes and self.pending > len(data):
                self.cut_off(
                    f"it left more than {self.bounds.max_pending_bytes >> 20} MiB of answers unread"
                )
                return
            async with self._lock:
                if self.gone:
                    return
                self.writer.write(data)
                transport = self.writer.transport
                if transport.get_write_buffer_size() <= transport.get_write_buffer_limits()[1]:
                    await self.writer.drain()  # not paused: returns at once, no timer
                    return
                try:
                    await asyncio.wait_for(self.writer.drain(), self.bounds.write_stall_secs)
                except TimeoutError:
                    self.cut_off(
                        f"it read none of its answers for {self.bounds.write_stall_secs:g} s "
                        f"({len(self.requests)} request(s) in flight)"
                    )
        except (ConnectionError, RuntimeError):
            self.gone = True
        finally:
            self.pending -= len(data)

    def tasks(self) -> list[asyncio.Task[None]]:
        """Its calls being answered and its streams."""
        return [*self.requests, *self.streams.values()]

    def cut_off(self, why: str) -> None:
        """Drop a client that costs the owner too much, saying so in its log."""
        if self.gone:
            return
        log.warning(
            "control: cut off a client (%s, pid %s): %s",
            self.caller.describe(),
            self.caller.pid,
            why,
        )
        self.abort()

    async def send(self, message: dict[str, Any]) -> None:
        await self.send_raw(p.encode(message))

    async def send_error(self, req_id: Any, code: int, message: str, kind: str) -> None:
        error = {"code": code, "message": message, "data": {"kind": kind}}
        await self.send({"jsonrpc": "2.0", "id": req_id, "error": error})

    def abort(self) -> None:
        """Close at once, unwritten answers dropped (a blocked write ends too)."""
        self.gone = True
        self.writer.transport.abort()

    async def finish(self) -> None:
        self.gone = True
        with swallowed(log, "closing a client's connection"):
            self.writer.close()
            await asyncio.wait_for(self.writer.wait_closed(), 1)

    # -- reading -------------------------------------------------------------------------

    async def run(self) -> None:
        try:
            while not self.gone:
                try:
                    line = await self.reader.readline()
                except ValueError:  # over the limit: the rest of the line is unreadable
                    await self.send_error(
                        None,
                        p.TOO_LARGE,
                        f"request larger than {p.MAX_MESSAGE_BYTES} bytes: the connection "
                        "is closed; send smaller requests",
                        "TooLarge",
                    )
                    break
                except ConnectionError:
                    break
                if not line:
                    break
                if line.strip():
                    await self._request(line)
                while len(self.requests) >= self.bounds.max_in_flight and not self.gone:
                    # backpressure: the next request is read once one is answered
                    await asyncio.wait(set(self.requests), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in self.streams.values():
                task.cancel()
            if self.requests and not self.gone:  # a client that sent and then closed its
                # side still gets its answers (e.g. `printf … | socat - UNIX-CONNECT:…`)
                await asyncio.wait(set(self.requests), timeout=REPLY_GRACE_SECS)
            await self.finish()

    async def _request(self, line: bytes) -> None:
        try:
            message = json.loads(line)
        except (ValueError, UnicodeDecodeError) as exc:
            await self.send_error(None, p.PARSE_ERROR, f"not JSON: {exc}", "ParseError")
            return
        if (
            not isinstance(message, dict)
            or message.get("jsonrpc") != "2.0"
            or not isinstance(message.get("method"), str)
        ):
            await self.send_error(
                message.get("id") if isinstance(message, dict) else None,
                p.INVALID_REQUEST,
                'not a JSON-RPC 2.0 request: expected {"jsonrpc": "2.0", "id", "method", "params"}',
                "InvalidRequest",
            )
            return
        if p.holds_lone_surrogate(message.get("params")):
            await self.send_error(
                message.get("id"),
                p.INVALID_PARAMS,
                p.LONE_SURROGATE,
                "InvalidParams",
            )
            return
        task = asyncio.get_running_loop().create_task(self._answer(message))
        self.requests.add(task)
        task.add_done_callback(self.requests.discard)

    async def _answer(self, message: dict[str, Any]) -> None:
        req_id = message.get("id")
        method = message["method"]
        entry = METHODS.get(method)
        if entry is None:
            await self.send_error(
                req_id, p.METHOD_NOT_FOUND, f"unknown method {method!r}", "MethodNotFound"
            )
            return
        try:
            params = entry.call.params.model_validate(message.get("params") or {})
        except ValidationError as exc:
            await self.send_error(
                req_id, p.INVALID_PARAMS, p.params_problem(method, exc), "InvalidParams"
            )
            return
        try:
            self.check_caller(method, entry, params)
            result = await entry.handler(self, req_id, params)
        except CorralError as exc:
            await self.send_error(req_id, p.CORRAL_ERROR, str(exc), p.error_kind(exc))
            return
        except Exception as exc:
            log.exception("control: %s failed", method)
            await self.send_error(
                req_id,
                p.INTERNAL_ERROR,
                f"{method} failed unexpectedly: {type(exc).__name__}: {exc}",
                type(exc).__name__,
            )
            return
        if req_id is None:
            return  # a notification: nobody waits for the answer
        if isinstance(result, _Streamed):
            await self.send_raw(
                to_json({"jsonrpc": "2.0", "id": req_id, "result": result.result}, fallback=str)
                + b"\n"
            )
            self.streams[req_id] = asyncio.get_running_loop().create_task(result.start())
            return
        await self.send_raw(
            to_json({"jsonrpc": "2.0", "id": req_id, "result": result}, fallback=str) + b"\n"
        )

    def check_caller(self, method: str, entry: Method, params: Any) -> None:
        """Raise the refusal when an agent calls what it may not (the record
        says who may: `rules.admit`); a person's method refused is recorded
        where the operator sees it."""
        caller = self.caller
        target = getattr(params, "session_id", None)
        refusal = rules.admit(entry.call, caller, target)
        if refusal is None:
            return
        if refusal.phrase is not None and isinstance(caller, Agent):
            raise self.server.refuse(caller, method, refusal.phrase, target)
        raise CorralError(refusal.sentence)

    # -- streams ------------------------------------------------------------------------

    async def pump(
        self,
        stream: Any,
        sub: Subscription[Any],
        send: Callable[[list[Any]], Awaitable[None]],
        *,
        closed: str,
    ) -> None:
        """A subscription's events to this client, a batch a `send`, until it
        ends (`stream_end` says why: `closed` or fallen behind) or the client
        goes. A session's stream and a discussion's share it."""
        try:
            while not self.gone:
                try:
                    first = await sub.get()
                except SubscriptionDropped as exc:
                    await self._end(stream, "dropped", str(exc), sub.last_seq + 1)
                    return
                except SubscriptionClosed:
                    await self._end(stream, "closed", closed, None)
                    return
                await send([first, *sub.get_nowait()])
        finally:
            sub.close()
            self.streams.pop(stream, None)

    async def pump_events(self, stream: Any, sub: Subscription[CoderEvent]) -> None:
        head = p.EVENT_HEAD + to_json(stream) + p.EVENT_MID

        async def send(batch: list[CoderEvent]) -> None:
            seen = [_as_seen(self, p.event_row(e)) for e in batch]
            await self.send_raw(
                b"".join(head + to_json(row, fallback=str) + b"}}\n" for row in seen)
            )

        await self.pump(stream, sub, send, closed="the session left memory")

    async def pump_discussion(self, stream: Any, sub: Subscription[Any]) -> None:
        """A discussion's events to this client: every client's turns and the
        assistant's replies, one write a batch."""

        async def send(batch: list[Any]) -> None:
            await self.send_raw(
                b"".join(
                    _notification(
                        "discussion_event", {"stream": stream, "event": e.model_dump(mode="json")}
                    )
                    for e in batch
                )
            )

        await self.pump(stream, sub, send, closed="the discussion was closed")

    async def pump_board(self, stream: Any, watcher: Watcher) -> None:
        try:
            while not self.gone:
                try:
                    rows = await watcher.get()
                except WatchDropped as exc:
                    await self._end(stream, "dropped", str(exc), None)
                    return
                await self.send_notification(
                    "board", {"stream": stream, "rows": [r.model_dump(mode="json") for r in rows]}
                )
        finally:
            self.sup.unwatch(watcher)
            self.streams.pop(stream, None)

    async def send_notification(self, method: str, params: dict[str, Any]) -> None:
        await self.send_raw(_notification(method, params))

    async def _end(self, stream: Any, reason: str, message: str, resume: int | None) -> None:
        await self.send_notification(
            "stream_end",
            {"stream": stream, "reason": reason, "message": message, "resume_from": resume},
        )


def _notification(method: str, params: dict[str, Any]) -> bytes:
    """One JSON-RPC notification, as a line."""
    return to_json({"jsonrpc": "2.0", "method": method, "params": params}, fallback=str) + b"\n"


# --- the methods: each mirrors one facade call ------------------------------------------


def _dump(value: BaseModel) -> dict[str, Any]:
    return value.model_dump(mode="json")


async def _hello(conn: _Connection, _id: Any, _p: p.NoParams) -> Any:
    caller = conn.caller
    return {
        "protocol": p.PROTOCOL,
        "pid": os.getpid(),
        "state_dir": str(conn.sup.state_dir),
        "mcp": conn.server.tools is not None,
        "discussions": conn.server.discussions is not None,
        # who the owner takes this connection for (what it says of itself counts for nothing)
        "caller": {
            "agent": caller.is_agent,
            "session_id": caller.session_id if isinstance(caller, Agent) else None,
            "described": caller.describe(),
        },
    }


async def _list(conn: _Connection, _id: Any, _p: p.NoParams) -> Any:
    return [_dump(r) for r in conn.sup.list()]


def _as_seen(conn: _Connection, value: Any) -> Any:
    """What the caller may read: an agent never sees a hidden check's name,
    command, files or output (`contracts.hidden.for_agent`)."""
    return value if rules.sees_hidden_checks(conn.caller) else for_agent(value)


async def _get(conn: _Connection, _id: Any, params: p.SessionParams) -> Any:
    return _as_seen(conn, _dump(conn.sup.get(params.session_id)))


async def _foreman_split(conn: _Connection, _id: Any, params: p.SessionParams) -> Any:
    return _dump(await conn.sup.foreman_split(params.session_id))


async def _set_foreman_split(conn: _Connection, _id: Any, a: p.SplitParams) -> Any:
    return _dump(conn.sup.set_foreman_split(a.session_id, a.split))


async def _start(conn: _Connection, _id: Any, a: p.StartParams) -> Any:
    caller = conn.caller
    if isinstance(caller, Agent) and rules.start_refusal(caller, conn.server.agents_may_start()):
        # one the operator has let start still stops at gate 1: confirm is a person's
        raise conn.server.refuse(caller, "start", rules.START_PHRASE, None)
    rules.check_agent_start(
        caller,
        hidden_checks=a.contract is not None and bool(a.contract.hidden_checks),
        context=a.context is not None,
    )
    decided = a.decided if rules.decides_notices(caller) else []
    result = await conn.sup.start(
        a.intent,
        a.repo,
        engine=a.engine,
        base=a.base,
        max_iterations=a.max_iterations,
        constraints=a.constraints,
        discussion_id=a.discussion_id,
        wait=a.wait,
        contract=a.contract,
        model=a.model,
        split=a.split,
        host=a.host,
        decided=decided,
        context=a.context,
    )
    return _dump(result)


async def _confirm(conn: _Connection, _id: Any, a: p.ConfirmParams) -> Any:
    return await conn.sup.confirm(a.session_id, a.contract)


async def _revise(conn: _Connection, _id: Any, a: p.ReviseParams) -> Any:
    return _dump(await conn.sup.revise(a.session_id, a.request))


async def _respond(conn: _Connection, _id: Any, a: p.RespondParams) -> Any:
    return await conn.sup.respond(a.session_id, a.text, steer=a.steer)


async def _set_mode(conn: _Connection, _id: Any, a: p.ModeParams) -> Any:
    return await conn.sup.set_mode(a.session_id, a.mode)


async def _set_model(conn: _Connection, _id: Any, a: p.ModelParams) -> Any:
    return await conn.sup.set_model(a.session_id, a.model)


async def _set_option(conn: _Connection, _id: Any, a: p.OptionParams) -> Any:
    return await conn.sup.set_option(a.session_id, a.key, a.value)


async def _steer(conn: _Connection, _id: Any, a: p.SteerParams) -> Any:
    return await conn.sup.respond(a.session_id, a.text, steer=True)


async def _options(conn: _Connection, _id: Any, a: p.SessionParams) -> Any:
    return conn.sup.question_options(a.session_id)


async def _approve(conn: _Connection, _id: Any, a: p.ApproveParams) -> Any:
    selection = (
        None
        if a.selection is None
        else {path: None if hunks is None else set(hunks) for path, hunks in a.selection.items()}
    )
    result = await conn.sup.approve(
        a.session_id,
        accept_finding=a.accept_finding,
        delivery=a.delivery,
        comment=a.comment,
        selection=selection,
        override_red=a.override_red,
        discard_rest=a.discard_rest,
        accept_judge_changes=a.accept_judge_changes,
        accept_flaky=a.accept_flaky,
    )
    return _dump(result)


async def _reject(conn: _Connection, _id: Any, a: p.RejectParams) -> Any:
    return _dump(await conn.sup.approve(a.session_id, approve=False, comment=a.comment))


async def _cancel(conn: _Connection, _id: Any, a: p.SessionParams) -> Any:
    return _dump(await conn.sup.cancel(a.session_id))


async def _reverify(conn: _Connection, _id: Any, a: p.SessionParams) -> Any:
    return [_dump(r) for r in await conn.sup.reverify(a.session_id)]


async def _tasks(conn: _Connection, _id: Any, _p: p.NoParams) -> Any:
    return [_dump(t) for t in await conn.sup.tasks()]


async def _task_add(conn: _Connection, _id: Any, a: p.TaskAddParams) -> Any:
    return _dump(
        await conn.sup.add_task(
            a.name, action=a.action, params=a.params, at=a.at, every=a.every, cron=a.cron
        )
    )


async def _task_remove(conn: _Connection, _id: Any, a: p.TaskParams) -> Any:
    await conn.sup.remove_task(a.task_id)
    return None


async def _task_runs(conn: _Connection, _id: Any, a: p.TaskParams) -> Any:
    return [_dump(r) for r in await conn.sup.task_runs(a.task_id)]


async def _task_pause(conn: _Connection, _id: Any, a: p.TaskPauseParams) -> Any:
    return _dump(await conn.sup.pause_task(a.task_id, a.paused))


async def _task_run(conn: _Connection, _id: Any, a: p.TaskParams) -> Any:
    return _dump(await conn.sup.run_task_now(a.task_id))


async def _search(conn: _Connection, _id: Any, a: p.SearchParams) -> Any:
    return await conn.sup.search(a.text)


async def _transcript(conn: _Connection, _id: Any, a: p.TranscriptParams) -> Any:
    return [_dump(t) for t in await conn.sup.transcript(a.session_id, a.limit)]


async def _export_context(conn: _Connection, _id: Any, a: p.SessionParams) -> Any:
    return (await conn.sup.export_context(a.session_id)).model_dump(mode="json")


async def _adoptable(conn: _Connection, _id: Any, a: p.AdoptableParams) -> Any:
    sockets = None if a.sockets is None else [Path(s) for s in a.sockets]
    return [_dump(pane) for pane in await conn.sup.adoptable(sockets)]


async def _adopt(conn: _Connection, _id: Any, a: p.AdoptParams) -> Any:
    return {"session_id": await conn.sup.adopt(a.target)}


async def _release(conn: _Connection, _id: Any, a: p.SessionParams) -> Any:
    await conn.sup.release(a.session_id)
    return None


async def _send(conn: _Connection, _id: Any, a: p.SendParams) -> Any:
    """From whom the owner identified: the operator, or the calling agent's
    session. The `sender` a client names is not believed."""
    sender = rules.sender_of(conn.caller, OPERATOR)
    return _dump(
        await conn.sup.send(
            sender, a.target, a.text, expects_reply=a.expects_reply, responds_to=a.responds_to
        )
    )


async def _history(conn: _Connection, _id: Any, a: p.SessionParams) -> Any:
    return _as_seen(conn, [e.model_dump(mode="json") for e in await conn.sup.history(a.session_id)])


async def _report_impossible(conn: _Connection, _id: Any, a: p.ImpossibleParams) -> Any:
    return conn.sup.report_impossible(a.session_id, a.reason)


async def _revive(conn: _Connection, _id: Any, a: p.SessionParams) -> Any:
    await conn.sup.revive(a.session_id)
    return None


async def _rename(conn: _Connection, _id: Any, a: p.RenameParams) -> Any:
    return _dump(conn.sup.rename(a.session_id, a.name))


async def _archive(conn: _Connection, _id: Any, a: p.ArchiveParams) -> Any:
    return _dump(conn.sup.archive(a.session_id, a.archived))


async def _delete(conn: _Connection, _id: Any, a: p.SessionParams) -> Any:
    return _dump(await conn.sup.delete(a.session_id))


async def _push(conn: _Connection, _id: Any, a: p.PushParams) -> Any:
    return _dump(await conn.sup.push(a.session_id, a.remote))


async def _pull_request(conn: _Connection, _id: Any, a: p.PushParams) -> Any:
    return _dump(await conn.sup.pull_request(a.session_id, a.remote))


async def _retry(conn: _Connection, _id: Any, a: p.RetryParams) -> Any:
    return _dump(await conn.sup.retry(a.session_id, keep_edits=a.keep_edits))


async def _review_files(conn: _Connection, _id: Any, a: p.SessionParams) -> Any:
    return [dataclasses.asdict(f) for f in await conn.sup.review_files(a.session_id)]


async def _checkout_clashes(conn: _Connection, _id: Any, a: p.SessionParams) -> Any:
    return await conn.sup.checkout_clashes(a.session_id)


async def _subscribe(conn: _Connection, req_id: Any, a: p.SubscribeParams) -> Any:
    result, sub = conn.sup.subscribe(a.session_id, a.from_seq)
    if sub is None or req_id is None:
        if sub is not None:
            sub.close()
        return _dump(result)
    return _Streamed(_dump(result), lambda: conn.pump_events(req_id, sub))


async def _watch(conn: _Connection, req_id: Any, _p: p.NoParams) -> Any:
    rows, watcher = conn.sup.watch()
    dumped = {"rows": [_dump(r) for r in rows]}
    if req_id is None:
        conn.sup.unwatch(watcher)
        return dumped
    return _Streamed(dumped, lambda: conn.pump_board(req_id, watcher))


async def _unsubscribe(conn: _Connection, _id: Any, a: p.StreamParams) -> Any:
    task = conn.streams.pop(a.stream, None)
    if task is not None:
        task.cancel()
    return {"closed": task is not None}


async def _wait_for(conn: _Connection, _id: Any, a: p.WaitParams) -> Any:
    try:
        states = None if a.states is None else {CoderState(s) for s in a.states}
    except ValueError as exc:
        raise CorralError(f"wait_for: {exc}") from exc
    return _dump(await conn.sup.wait_for(a.session_id, states, needs=a.needs, timeout=a.timeout))


async def _session_misc(conn: _Connection, _id: Any, a: p.SessionParams) -> Any:
    return {
        "live": conn.sup.is_live(a.session_id),
        "needs_you": conn.sup.needs_you_of(a.session_id),
        "journal_path": str(conn.sup.journal_path(a.session_id)),
    }


async def _engines(conn: _Connection, _id: Any, _p: p.NoParams) -> Any:
    return {
        "choices": conn.sup.engine_choices(),
        "command_engines": conn.sup.command_engines(),
        "disk_full": conn.sup.disk_full(),
        "hosts": conn.sup.host_choices(),
        "models": conn.sup.model_choices(),
    }


async def _engine_refusal(conn: _Connection, _id: Any, a: p.EngineParams) -> Any:
    return conn.sup.engine_refusal(a.engine)


async def _agent_screen(conn: _Connection, _id: Any, a: p.ScreenParams) -> Any:
    """The agent pane's screen, sent only when its version moved."""
    version = conn.sup.agent_screen_version(a.session_id)
    if version == a.known_version:
        return {"version": version, "unchanged": True}
    screen = conn.sup.agent_screen(a.session_id)
    return {
        "version": version,
        "screen": None if screen is None else dataclasses.asdict(screen),
    }


async def _agent_keys(conn: _Connection, _id: Any, a: p.KeysParams) -> Any:
    await conn.sup.send_keys_to_agent(a.session_id, a.keys)
    return {"sent": len(a.keys)}


async def _agent_resize(conn: _Connection, _id: Any, a: p.ResizeParams) -> Any:
    await conn.sup.resize_agent(a.session_id, a.width, a.height)
    return {"resized": True}


async def _agent_scrollback(conn: _Connection, _id: Any, a: p.ScrollbackParams) -> Any:
    return await conn.sup.agent_scrollback(a.session_id, a.lines)


async def _attach_argv(conn: _Connection, _id: Any, a: p.SessionParams) -> Any:
    return conn.sup.attach_argv(a.session_id)


def _discussions(conn: _Connection) -> Discussions:
    """The owner's discussions (a console makes its own on first use)."""
    found = conn.server.discussions
    if found is None:
        raise CorralError("this owner serves no discussions")
    return found() if callable(found) else found


async def _discussions_list(conn: _Connection, _id: Any, _p: p.NoParams) -> Any:
    return _discussions(conn).list()


async def _discussion_get(conn: _Connection, _id: Any, a: p.DiscussionParams) -> Any:
    return _discussions(conn).get(a.discussion_id).to_json()


async def _discussion_start(conn: _Connection, _id: Any, a: p.DiscussionStartParams) -> Any:
    return (await _discussions(conn).start(a.repo, context=a.context)).summary()


async def _discussion_resume(conn: _Connection, _id: Any, a: p.DiscussionParams) -> Any:
    """The owner's one copy of a saved discussion (opened if it was not)."""
    return (await _discussions(conn).resume(a.discussion_id)).summary()


async def _discussion_subscribe(conn: _Connection, req_id: Any, a: p.DiscussionStreamParams) -> Any:
    """A discussion's events from `from_seq`, then live: every client's turns
    and the assistant's replies, as `discussion_event` notifications."""
    sub = _discussions(conn).get(a.discussion_id).subscribe(a.from_seq)
    answer = {"discussion_id": a.discussion_id, "stream": req_id}
    if req_id is None:
        sub.close()
        return answer
    return _Streamed(answer, lambda: conn.pump_discussion(req_id, sub))


async def _discussion_send(conn: _Connection, _id: Any, a: p.DiscussionSendParams) -> Any:
    discussion = _discussions(conn).get(a.discussion_id)
    return {"seq": await discussion.send(a.text)}


async def _discussion_cancel(conn: _Connection, _id: Any, a: p.DiscussionParams) -> Any:
    """Stop the reply in flight (it still ends with `turn_complete`)."""
    return {"cancelled": _discussions(conn).get(a.discussion_id).cancel()}


async def _discussion_model(conn: _Connection, _id: Any, a: p.DiscussionModelParams) -> Any:
    """Pin the discussion's model (blank or `auto`: none); refused while it answers."""
    discussion = _discussions(conn).get(a.discussion_id)
    discussion.choose_model(a.model)
    return {"model": discussion.model}


async def _discussion_link(conn: _Connection, _id: Any, a: p.DiscussionLinkParams) -> Any:
    """A session was started from the discussion's prepared task: the task is
    used up (the supervisor linked the session when it started it). Refused
    for a session the owner did not start from this discussion."""
    discussion = _discussions(conn).get(a.discussion_id)
    if conn.sup.get(a.session_id).session.discussion_id != a.discussion_id:
        raise CorralError(
            f"session {a.session_id} was not started from discussion {a.discussion_id}, so "
            "its prepared task stays; start the task from the discussion to use it"
        )
    discussion.link_session(a.session_id)
    return {"linked": True}


async def _discussion_promote(conn: _Connection, _id: Any, a: p.DiscussionParams) -> Any:
    prepared = await _discussions(conn).get(a.discussion_id).promote()
    return prepared.to_dict()


async def _discussion_close(conn: _Connection, _id: Any, a: p.DiscussionParams) -> Any:
    await _discussions(conn).close(a.discussion_id)
    return {"closed": True}


def _tools(conn: _Connection) -> AssistantTools:
    if conn.server.tools is None:
        raise CorralError("this owner serves no assistant tools")
    return conn.server.tools


async def _assistant_start(conn: _Connection, _id: Any, a: p.StartArgs) -> Any:
    return await _tools(conn).start(a, conn.caller)


async def _assistant_poll(conn: _Connection, _id: Any, a: p.PollArgs) -> Any:
    return _as_seen(conn, await _tools(conn).poll(a.run_id, a.since_seq))


async def _assistant_cancel(conn: _Connection, _id: Any, a: p.CancelArgs) -> Any:
    return await _tools(conn).cancel(a.run_id, conn.caller)


def _methods() -> dict[str, Method]:
    """Each record of the surface with its handler: a record without one, or
    a handler without a record, stops the owner at import."""
    c = Calls
    served = [
        serve(c.hello, _hello),
        serve(c.list, _list),
        serve(c.get, _get),
        serve(c.start, _start),
        serve(c.confirm, _confirm),
        serve(c.foreman_split, _foreman_split),
        serve(c.set_foreman_split, _set_foreman_split),
        serve(c.revise, _revise),
        serve(c.respond, _respond),
        serve(c.steer, _steer),
        serve(c.set_mode, _set_mode),
        serve(c.set_model, _set_model),
        serve(c.set_option, _set_option),
        serve(c.report_impossible, _report_impossible),
        serve(c.question_options, _options),
        serve(c.approve, _approve),
        serve(c.reject, _reject),
        serve(c.cancel, _cancel),
        serve(c.reverify, _reverify),
        serve(c.revive, _revive),
        serve(c.rename, _rename),
        serve(c.archive, _archive),
        serve(c.retry, _retry),
        serve(c.delete, _delete),
        serve(c.push, _push),
        serve(c.pull_request, _pull_request),
        serve(c.history, _history),
        serve(c.send, _send),
        serve(c.task_pause, _task_pause),
        serve(c.task_run, _task_run),
        serve(c.search, _search),
        serve(c.transcript, _transcript),
        serve(c.export_context, _export_context),
        serve(c.adoptable, _adoptable),
        serve(c.adopt, _adopt),
        serve(c.release, _release),
        serve(c.tasks, _tasks),
        serve(c.task_add, _task_add),
        serve(c.task_remove, _task_remove),
        serve(c.task_runs, _task_runs),
        serve(c.review_files, _review_files),
        serve(c.checkout_clashes, _checkout_clashes),
        serve(c.subscribe, _subscribe),
        serve(c.watch, _watch),
        serve(c.unsubscribe, _unsubscribe),
        serve(c.wait_for, _wait_for),
        serve(c.session_info, _session_misc),
        serve(c.engines, _engines),
        serve(c.engine_refusal, _engine_refusal),
        serve(c.agent_screen, _agent_screen),
        serve(c.agent_keys, _agent_keys),
        serve(c.agent_resize, _agent_resize),
        serve(c.agent_scrollback, _agent_scrollback),
        serve(c.attach_argv, _attach_argv),
        serve(c.discussions_list, _discussions_list),
        serve(c.discussion_get, _discussion_get),
        serve(c.discussion_start, _discussion_start),
        serve(c.discussion_resume, _discussion_resume),
        serve(c.discussion_subscribe, _discussion_subscribe),
        serve(c.discussion_send, _discussion_send),
        serve(c.discussion_cancel, _discussion_cancel),
        serve(c.discussion_model, _discussion_model),
        serve(c.discussion_link, _discussion_link),
        serve(c.discussion_promote, _discussion_promote),
        serve(c.discussion_close, _discussion_close),
        serve(c.assistant_start, _assistant_start),
        serve(c.assistant_poll, _assistant_poll),
        serve(c.assistant_cancel, _assistant_cancel),
    ]
    methods = {m.call.name: m for m in served}
    unserved = set(CALLS) - set(methods)
    if unserved or len(methods) != len(served):
        raise RuntimeError(f"the control server serves no handler for {sorted(unserved)}")
    return methods


METHODS = _methods()
