"""The owner's side of the control protocol (`protocol.py`): an asyncio unix
server in the state dir that answers each request by calling the facade.

Only the owner's own user may connect: the socket is 0600 in a 0700 dir,
and each connection's peer uid (SO_PEERCRED) is checked again, since a
mode is only as good as the directories above it. A client that sends
garbage, too much, or goes away mid-stream costs its own connection and
nothing else: streams are bounded mailboxes the owner never waits for.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import socket
import struct
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError
from pydantic_core import to_json

from ..errors import CorralError, StateDirError
from ..events import CoderEvent
from ..paths import ensure_private_dir
from ..session.board import WatchDropped, Watcher
from ..session.events import Subscription, SubscriptionClosed, SubscriptionDropped
from ..states import CoderState
from . import protocol as p

if TYPE_CHECKING:
    from ..api import Supervisor
    from ..discuss import Discussions
    from .handles import AssistantTools

log = logging.getLogger("corral.supervisor.control")

REPLY_GRACE_SECS = 30.0  # how long answers still go out to a client that half-closed
Handler = Callable[["_Connection", Any, Any], Awaitable[Any]]


def peer_uid(sock: socket.socket) -> int:
    """The uid of the process at the other end of a unix socket."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", raw)
    return int(uid)


@dataclasses.dataclass
class _Streamed:
    """A result followed by a stream, started once the result is sent."""

    result: Any
    start: Callable[[], Coroutine[Any, Any, None]]


class ControlServer:
    """Serves `supervisor` on `<state dir>/control.sock` until `close()`."""

    def __init__(
        self,
        supervisor: Supervisor,
        *,
        discussions: Discussions | Callable[[], Discussions] | None = None,
        tools: AssistantTools | None = None,
        allowed_uid: int | None = None,
    ) -> None:
        self.supervisor = supervisor
        self.discussions = discussions
        self.tools = tools
        self.allowed_uid = os.getuid() if allowed_uid is None else allowed_uid
        self.path = p.socket_path(supervisor.state_dir)
        self._server: asyncio.AbstractServer | None = None
        self._connections: set[_Connection] = set()

    async def start(self) -> Path:
        """Listen on the socket (a stale one from a crashed owner is
        replaced: whoever calls this holds the state dir's lock)."""
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
                self._accept, path=str(self.path), limit=p.MAX_MESSAGE_BYTES + 1
            )
        finally:
            os.umask(old)
        os.chmod(self.path, 0o600)
        return self.path

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            for conn in list(self._connections):
                conn.abort()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)
            self._server = None
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = _Connection(self, reader, writer)
        sock = writer.get_extra_info("socket")
        try:
            uid = peer_uid(sock) if sock is not None else -1
        except OSError:
            uid = -1
        if uid != self.allowed_uid:
            # read its first request, so the refusal is an answer it reads (closing
            # on unread bytes would reset the connection and lose the sentence)
            with contextlib.suppress(Exception):
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
        try:
            await conn.run()
        finally:
            self._connections.discard(conn)


class _Connection:
    def __init__(
        self, server: ControlServer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.server = server
        self.sup = server.supervisor
        self.reader = reader
        self.writer = writer
        self.streams: dict[Any, asyncio.Task[None]] = {}
        self.requests: set[asyncio.Task[None]] = set()
        self._lock = asyncio.Lock()
        self.gone = False

    # -- writing -------------------------------------------------------------------------

    async def send_raw(self, data: bytes) -> None:
        if self.gone:
            return
        try:
            async with self._lock:
                self.writer.write(data)
                await self.writer.drain()
        except (ConnectionError, RuntimeError):
            self.gone = True

    async def send(self, message: dict[str, Any]) -> None:
        await self.send_raw(p.encode(message))

    async def send_error(self, req_id: Any, code: int, message: str, kind: str) -> None:
        error = {"code": code, "message": message, "data": {"kind": kind}}
        await self.send({"jsonrpc": "2.0", "id": req_id, "error": error})

    def abort(self) -> None:
        self.gone = True
        self.writer.close()

    async def finish(self) -> None:
        self.gone = True
        with contextlib.suppress(Exception):
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
        model, handler = entry
        try:
            params = model.model_validate(message.get("params") or {})
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(x) for x in e['loc']) or 'params'}: {e['msg']}"
                for e in exc.errors()
            )
            await self.send_error(
                req_id, p.INVALID_PARAMS, f"{method}: {problems}", "InvalidParams"
            )
            return
        try:
            result = await handler(self, req_id, params)
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

    # -- streams ------------------------------------------------------------------------

    async def pump_events(self, stream: Any, sub: Subscription[CoderEvent]) -> None:
        head = p.EVENT_HEAD + to_json(stream) + p.EVENT_MID
        try:
            while not self.gone:
                try:
                    first = await sub.get()
                except SubscriptionDropped as exc:
                    await self._end(stream, "dropped", str(exc), sub.last_seq + 1)
                    return
                except SubscriptionClosed:
                    await self._end(stream, "closed", "the session left memory", None)
                    return
                batch = [first, *sub.get_nowait()]
                await self.send_raw(
                    b"".join(head + to_json(p.event_row(e), fallback=str) + b"}}\n" for e in batch)
                )
        finally:
            sub.close()
            self.streams.pop(stream, None)

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
        await self.send_raw(
            to_json({"jsonrpc": "2.0", "method": method, "params": params}, fallback=str) + b"\n"
        )

    async def _end(self, stream: Any, reason: str, message: str, resume: int | None) -> None:
        await self.send_notification(
            "stream_end",
            {"stream": stream, "reason": reason, "message": message, "resume_from": resume},
        )


# --- the methods: each mirrors one facade call ------------------------------------------


def _dump(value: BaseModel) -> dict[str, Any]:
    return value.model_dump(mode="json")


async def _hello(conn: _Connection, _id: Any, _p: p.NoParams) -> Any:
    return {
        "protocol": p.PROTOCOL,
        "pid": os.getpid(),
        "state_dir": str(conn.sup.state_dir),
        "mcp": conn.server.tools is not None,
        "discussions": conn.server.discussions is not None,
    }


async def _list(conn: _Connection, _id: Any, _p: p.NoParams) -> Any:
    return [_dump(r) for r in conn.sup.list()]


async def _get(conn: _Connection, _id: Any, params: p.SessionParams) -> Any:
    return _dump(conn.sup.get(params.session_id))


async def _foreman_split(conn: _Connection, _id: Any, params: p.SessionParams) -> Any:
    return _dump(await conn.sup.foreman_split(params.session_id))


async def _set_foreman_split(conn: _Connection, _id: Any, a: p.SplitParams) -> Any:
    return _dump(conn.sup.set_foreman_split(a.session_id, a.split))


async def _start(conn: _Connection, _id: Any, a: p.StartParams) -> Any:
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
        host=a.host,
    )
    return _dump(result)


async def _confirm(conn: _Connection, _id: Any, a: p.ConfirmParams) -> Any:
    return await conn.sup.confirm(a.session_id, a.contract)


async def _revise(conn: _Connection, _id: Any, a: p.ReviseParams) -> Any:
    return _dump(await conn.sup.revise(a.session_id, a.request))


async def _respond(conn: _Connection, _id: Any, a: p.RespondParams) -> Any:
    return await conn.sup.respond(a.session_id, a.text, steer=a.steer)


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


async def _adoptable(conn: _Connection, _id: Any, a: p.AdoptableParams) -> Any:
    sockets = None if a.sockets is None else [Path(s) for s in a.sockets]
    return [_dump(pane) for pane in await conn.sup.adoptable(sockets)]


async def _adopt(conn: _Connection, _id: Any, a: p.AdoptParams) -> Any:
    return {"session_id": await conn.sup.adopt(a.target)}


async def _release(conn: _Connection, _id: Any, a: p.SessionParams) -> Any:
    await conn.sup.release(a.session_id)
    return None


async def _send(conn: _Connection, _id: Any, a: p.SendParams) -> Any:
    return _dump(await conn.sup.send(a.sender, a.target, a.text))


async def _history(conn: _Connection, _id: Any, a: p.SessionParams) -> Any:
    return [e.model_dump(mode="json") for e in await conn.sup.history(a.session_id)]


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


async def _subscribe(conn: _Connection, req_id: Any, a: p.SubscribeParams) -> Any:
    result, sub = conn.sup.subscribe(a.session_id, a.from_seq)
    if sub is None or req_id is None:
        if sub is not None:
            sub.close()
        return _dump(result)
    return _Streamed(_dump(result), lambda: conn.pump_events(req_id, sub))


async def _watch(conn: _Connection, req_id: Any, _p: p.NoParams) -> Any:
    rows, watcher = conn.sup.watch()
    dumped = [_dump(r) for r in rows]
    if req_id is None:
        conn.sup.unwatch(watcher)
        return dumped
    return _Streamed({"rows": dumped}, lambda: conn.pump_board(req_id, watcher))


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
    return (await _discussions(conn).start(a.repo)).summary()


async def _discussion_send(conn: _Connection, _id: Any, a: p.DiscussionSendParams) -> Any:
    discussion = _discussions(conn).get(a.discussion_id)
    return {"seq": await discussion.send(a.text)}


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


async def _assistant_start(conn: _Connection, _id: Any, a: Any) -> Any:
    return await _tools(conn).start(a)


async def _assistant_poll(conn: _Connection, _id: Any, a: Any) -> Any:
    return await _tools(conn).poll(a.run_id, a.since_seq)


async def _assistant_cancel(conn: _Connection, _id: Any, a: Any) -> Any:
    return await _tools(conn).cancel(a.run_id)


def _methods() -> dict[str, tuple[type[BaseModel], Handler]]:
    from .handles import CancelArgs, PollArgs, StartArgs

    table: dict[str, tuple[type[BaseModel], Any]] = {
        "hello": (p.NoParams, _hello),
        "list": (p.NoParams, _list),
        "get": (p.SessionParams, _get),
        "start": (p.StartParams, _start),
        "confirm": (p.ConfirmParams, _confirm),
        "foreman_split": (p.SessionParams, _foreman_split),
        "set_foreman_split": (p.SplitParams, _set_foreman_split),
        "revise": (p.ReviseParams, _revise),
        "respond": (p.RespondParams, _respond),
        "steer": (p.SteerParams, _steer),
        "question_options": (p.SessionParams, _options),
        "approve": (p.ApproveParams, _approve),
        "reject": (p.RejectParams, _reject),
        "cancel": (p.SessionParams, _cancel),
        "reverify": (p.SessionParams, _reverify),
        "revive": (p.SessionParams, _revive),
        "rename": (p.RenameParams, _rename),
        "archive": (p.ArchiveParams, _archive),
        "retry": (p.RetryParams, _retry),
        "delete": (p.SessionParams, _delete),
        "push": (p.PushParams, _push),
        "pull_request": (p.PushParams, _pull_request),
        "history": (p.SessionParams, _history),
        "send": (p.SendParams, _send),
        "task_pause": (p.TaskPauseParams, _task_pause),
        "task_run": (p.TaskParams, _task_run),
        "search": (p.SearchParams, _search),
        "transcript": (p.TranscriptParams, _transcript),
        "adoptable": (p.AdoptableParams, _adoptable),
        "adopt": (p.AdoptParams, _adopt),
        "release": (p.SessionParams, _release),
        "tasks": (p.NoParams, _tasks),
        "task_add": (p.TaskAddParams, _task_add),
        "task_remove": (p.TaskParams, _task_remove),
        "task_runs": (p.TaskParams, _task_runs),
        "review_files": (p.SessionParams, _review_files),
        "subscribe": (p.SubscribeParams, _subscribe),
        "watch": (p.NoParams, _watch),
        "unsubscribe": (p.StreamParams, _unsubscribe),
        "wait_for": (p.WaitParams, _wait_for),
        "session_info": (p.SessionParams, _session_misc),
        "engines": (p.NoParams, _engines),
        "engine_refusal": (p.EngineParams, _engine_refusal),
        "agent_screen": (p.ScreenParams, _agent_screen),
        "agent_keys": (p.KeysParams, _agent_keys),
        "agent_resize": (p.ResizeParams, _agent_resize),
        "agent_scrollback": (p.ScrollbackParams, _agent_scrollback),
        "attach_argv": (p.SessionParams, _attach_argv),
        "discussions_list": (p.NoParams, _discussions_list),
        "discussion_get": (p.DiscussionParams, _discussion_get),
        "discussion_start": (p.DiscussionStartParams, _discussion_start),
        "discussion_send": (p.DiscussionSendParams, _discussion_send),
        "discussion_promote": (p.DiscussionParams, _discussion_promote),
        "discussion_close": (p.DiscussionParams, _discussion_close),
        "assistant_start": (StartArgs, _assistant_start),
        "assistant_poll": (PollArgs, _assistant_poll),
        "assistant_cancel": (CancelArgs, _assistant_cancel),
    }
    return table


METHODS = _methods()
