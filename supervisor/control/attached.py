"""A console attached to another process's owner: `AttachedSupervisor` answers
what the console asks of the in-process `Supervisor`, over the control socket.

The console never blocks on the owner: what it shows is a local mirror.
One `watch` stream keeps every board row (a local `BoardFeed` fans changes
out to the console's watchers); a session's detail (with its question's
options) is mirrored when a screen asks for it with `fresh()` (one async
request) and read from the mirror by `get`, `check_action`, footers and
repaints (no round trip). The engines' choices are read once at attach. The
agent's pane is fetched in the background when the terminal view polls. A
heartbeat tells a stalled owner (`owner_stalled`: "the owner is not
answering") from a gone one (`owner_gone`) within a second; calls then fail
fast with the typed `OwnerStalled` / `OwnerGone`, never a bare `OSError`.

What remains synchronous (`rename`, `archive`, `set_foreman_split`,
`engine_refusal`, `attach_argv`, `journal_path`, a detail not mirrored yet)
is one round trip on a second connection with a short timeout, refused at
once while the owner is stalled; the console calls them off its UI loop or
from a key press, never per repaint. Actions are the owner's calls, and
so are its discussions (`discussions`: the owner holds each one once; the
console follows its events on the owner's stream).
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import json
import logging
from collections.abc import Collection
from pathlib import Path
from typing import Any

from ..config import SupervisorConfig, load_config
from ..errors import CorralError
from ..events import CoderEvent, MessageData
from ..git.patches import FilePatch, Selection
from ..models import (
    AdoptablePane,
    ApproveResult,
    CancelResult,
    CheckResult,
    ContextPack,
    DeleteResult,
    OutcomeContract,
    PullRequestResult,
    PushResult,
    ReviseResult,
    ScheduledTask,
    SessionDetail,
    SessionSummary,
    Split,
    StartResult,
    SubscribeResult,
    TaskRun,
    TranscriptTurn,
)
from ..panes.base import Screen
from ..session.board import BoardFeed, WatchDropped, Watcher
from ..session.journal import Subscription
from ..states import CoderState, NeedsYou
from .client import STALLED, AsyncControlClient, ControlClient, OwnerGone, OwnerStalled
from .discussions import AttachedDiscussions
from .protocol import (
    AdoptableParams,
    AdoptParams,
    ApproveParams,
    ArchiveParams,
    ConfirmParams,
    EngineInfo,
    EngineParams,
    KeysParams,
    ModelParams,
    ModeParams,
    NoParams,
    OptionParams,
    PushParams,
    RejectParams,
    RenameParams,
    ResizeParams,
    RespondParams,
    RetryParams,
    ReviseParams,
    ScreenParams,
    ScrollbackParams,
    SearchParams,
    SendParams,
    SessionInfo,
    SessionParams,
    SplitParams,
    StartParams,
    TaskAddParams,
    TaskParams,
    TaskPauseParams,
    TranscriptParams,
    WaitParams,
)
from .surface import Call, Calls, OwnerSurface, P, R

log = logging.getLogger("corral.supervisor.control")

HEARTBEAT_SECS = 0.25  # how often the console asks the owner whether it answers (a hello)
STALL_SECS = 0.6  # an owner that takes longer to answer one `hello` is "not answering"
SYNC_TIMEOUT_SECS = 5.0
# the states in which the owner may run an agent with a screen to show
_AGENT_STATES = frozenset(
    {CoderState.CONTRACT_CONFIRMED, CoderState.RUNNING, CoderState.NEEDS_APPROVAL}
)  # a synchronous call (a key press's) waits at most this long


class _StreamSource:
    def __init__(self, owner: AttachedSupervisor, stream: int) -> None:
        self.owner = owner
        self.stream = stream

    def unsubscribe(self, sub: Any) -> None:
        if self.owner._async is not None:
            self.owner._async._drop_stream(self.stream)


class AttachedSupervisor:
    """Stands in for `Supervisor` in a console whose state dir another
    process owns. `open()` and `close()` run on the console's event loop."""

    remote = True

    def __init__(
        self,
        state_dir: Path,
        config: SupervisorConfig | None = None,
        *,
        mirror_board: bool = True,
    ) -> None:
        self.state_dir = Path(state_dir)
        # keep a local copy of the board (a console); `corral run` reads one session
        self.mirror_board = mirror_board
        self.config = config or load_config()
        self.broken_rows: builtins.list[str] = []
        self.stray_panes: builtins.list[str] = []
        self.panes = None
        self._async: AsyncControlClient | None = None
        self._sync: ControlClient | None = None
        self._rows: dict[str, SessionSummary] = {}
        self._details: dict[str, SessionDetail] = {}
        self._screens: dict[str, tuple[int, Screen | None]] = {}
        self.board = BoardFeed(self._rows.get, shed_secs=self.config.watcher_shed_secs)
        self._options: dict[str, builtins.list[str]] = {}
        self._engine_info: EngineInfo | None = None
        self._screen_fetch: dict[str, asyncio.Task[None]] = {}
        self._refetch: dict[str, asyncio.Task[None]] = {}
        self._stale: set[str] = set()  # mirrored details whose row moved on since
        self._mirror: asyncio.Task[None] | None = None
        self._heartbeat: asyncio.Task[None] | None = None
        self.owner_gone: str | None = None  # the sentence once the owner went away
        self.owner_stalled: str | None = None  # the sentence while the owner does not answer

    # -- owning nothing: attach and detach ---------------------------------------------

    async def open(self) -> None:
        self._sync = await asyncio.to_thread(
            ControlClient, self.state_dir, timeout=SYNC_TIMEOUT_SECS
        )
        self._async = await AsyncControlClient.connect(self.state_dir)
        if not self.mirror_board:
            return
        self._engine_info = await self._async.request(Calls.engines, NoParams())
        rows, watcher = await self._async.watch()
        self._rows.update({r.session_id: r for r in rows})
        loop = asyncio.get_running_loop()
        self._mirror = loop.create_task(self._follow(watcher))
        self._heartbeat = loop.create_task(self._beat())

    async def _beat(self) -> None:
        """Ask the owner every `HEARTBEAT_SECS` whether it answers: one not
        answered within `STALL_SECS` marks it stalled (the console says so)
        until it answers again; a closed connection ends the beat (gone)."""
        client = self._client()
        while client.connected:
            ping = asyncio.ensure_future(client.ping(timeout=3600))
            done, _ = await asyncio.wait({ping}, timeout=STALL_SECS)
            if not done:
                self.owner_stalled = f"{STALLED} (it has not answered for {STALL_SECS:g} s)"
                await asyncio.wait({ping})
            try:
                ping.result()
            except OwnerGone:
                break
            except CorralError as exc:
                log.warning("control: the owner refused a heartbeat: %s", exc)
            self.owner_stalled = None
            await asyncio.sleep(HEARTBEAT_SECS)
        self.owner_stalled = None
        self.owner_gone = self.owner_gone or "the owner of this state dir went away"

    async def _follow(self, watcher: Watcher) -> None:
        assert self._async is not None
        try:
            while True:
                try:
                    for row in await watcher.get():
                        self._rows[row.session_id] = row
                        self._fold(row)
                        self.board.notify(row.session_id)
                except WatchDropped:
                    if not self._async.connected:
                        break
                    self._async.unwatch(watcher)
                    rows, watcher = await self._async.watch()
                    gone = set(self._rows) - {row.session_id for row in rows}
                    for row in rows:
                        self._rows[row.session_id] = row
                        self._fold(row)
                        self.board.notify(row.session_id)
                    if gone:  # deleted at the owner: the console resyncs without them
                        for sid in gone:
                            del self._rows[sid]
                        self.board.resync()
        except CorralError:
            pass  # the connection closed while resyncing
        self.owner_gone = "the owner of this state dir went away"

    async def close(self) -> None:
        tasks = (
            self._mirror,
            self._heartbeat,
            *self._screen_fetch.values(),
            *self._refetch.values(),
        )
        for task in tasks:
            if task is not None:
                task.cancel()
        if self._async is not None:
            await self._async.close()
        if self._sync is not None:
            self._sync.close()

    detach = close

    @property
    def opened(self) -> bool:
        """Connected (or half-way): close() has connections to close."""
        return self._sync is not None or self._async is not None

    @property
    def store(self) -> None:
        return None  # the store is the owner's

    @property
    def left_running(self) -> builtins.list[str]:
        return []  # the owner keeps its agents

    def _ask(self, call: Call[P, R], params: P) -> R:
        """One blocking round trip (what the console must know now: never per
        repaint), refused at once while the owner is stalled or gone."""
        if self._async is None:
            raise CorralError("not attached to the owner: call open() first")
        if self.owner_gone:
            raise OwnerGone(self.owner_gone)
        if self.owner_stalled:
            raise OwnerStalled(self.owner_stalled)
        if self._sync is None:  # the last one timed out: a fresh connection
            self._sync = ControlClient(self.state_dir, timeout=SYNC_TIMEOUT_SECS)
        try:
            return self._sync.request(call, params)
        except OwnerStalled:
            self._sync = None  # it was closed: an answer may still be on its way
            raise

    @property
    def requests(self) -> dict[str, int]:
        """The calls this console made, by method (heartbeats apart): the
        budgets count them (opening a session screen: at most two)."""
        counts: dict[str, int] = {}
        for client in (self._sync, self._async):
            if client is not None:
                for method, n in client.requests.items():
                    counts[method] = counts.get(method, 0) + n
        counts.pop("hello", None)  # each connection's greeting
        return counts

    async def _request(self, call: Call[P, R], params: P) -> R:
        return await self._client().request(call, params)

    def _client(self) -> AsyncControlClient:
        if self._async is None:
            raise CorralError("not attached to the owner: call open() first")
        return self._async

    @property
    def discussions(self) -> AttachedDiscussions:
        """The owner's discussions, reached over this console's connection."""
        return AttachedDiscussions(self)

    # -- reading -----------------------------------------------------------------------

    def list(self) -> builtins.list[SessionSummary]:
        return sorted(self._rows.values(), key=lambda r: r.updated_at, reverse=True)

    def watch(self) -> tuple[builtins.list[SessionSummary], Watcher]:
        return self.list(), self.board.register()

    def unwatch(self, watcher: Watcher) -> bool:
        return self.board.unregister(watcher)

    def get(self, session_id: str) -> SessionDetail:
        """A console's mirrored detail (no round trip): its row's news (state,
        what it needs) is folded in as the board stream brings it, and a
        detail the row says moved on is asked again in the background. One
        the console has not asked `fresh()` for is one blocking round trip,
        then mirrored. Without a mirror (`corral run`), the owner's answer."""
        if not self.mirror_board:
            return self._ask(Calls.get, SessionParams(session_id=session_id))
        known = self._details.get(session_id)
        if known is None:
            return self._keep(self._ask(Calls.get, SessionParams(session_id=session_id)))
        if session_id in self._stale and session_id not in self._refetch:
            with contextlib.suppress(RuntimeError):  # no running loop: the mirror as it is
                task = asyncio.get_running_loop().create_task(self._refresh(session_id))
                self._refetch[session_id] = task
        return known

    async def _refresh(self, session_id: str) -> None:
        try:
            with contextlib.suppress(CorralError):  # stalled or gone: the app says so
                await self.fresh(session_id)
        finally:
            self._refetch.pop(session_id, None)

    def _fold(self, row: SessionSummary) -> None:
        """A board row's news into the mirrored detail, at once (the rest of
        the detail is asked again on its next read)."""
        known = self._details.get(row.session_id)
        if known is None:
            return
        if row.updated_at > known.session.updated_at or (row.next_seq or 0) > (known.next_seq or 0):
            self._stale.add(row.session_id)  # more moved than a row says
        session = known.session.model_copy(
            update={
                "state": row.state,
                "error": row.error,
                "name": row.name,
                "iterations": row.iterations,
                "result_branch": row.result_branch,
            }
        )
        self._details[row.session_id] = known.model_copy(
            update={
                "session": session,
                "live": row.live,
                "needs_you": row.needs_you,
                "needs_you_label": row.needs_you_label,
                "steering_available": row.steering_available,
                "question_prompt": row.question_prompt,
                "question_options": known.question_options if row.question_prompt else [],
                "auth_message": row.auth_message,
                "agent_status": row.agent_status,
                "agent_reason": row.agent_reason,
                "agent_source": row.agent_source,
            }
        )

    async def fresh(self, session_id: str) -> SessionDetail:
        """The owner's detail now (one request, off the UI loop), mirrored for
        `get`; while the owner is stalled or gone, the last one seen (the
        console keeps drawing what it had, and says why)."""
        try:
            detail = await self._request(Calls.get, SessionParams(session_id=session_id))
        except (OwnerGone, OwnerStalled):
            last = self._details.get(session_id)
            if last is None:
                raise
            return last
        return self._keep(detail)

    def _keep(self, detail: SessionDetail) -> SessionDetail:
        self._details[detail.session.id] = detail
        self._stale.discard(detail.session.id)
        return detail

    def _info(self, session_id: str) -> SessionInfo:
        return self._ask(Calls.session_info, SessionParams(session_id=session_id))

    def is_live(self, session_id: str) -> bool:
        row = self._rows.get(session_id)
        return row.live if row is not None else self._info(session_id).live

    def needs_you_of(self, session_id: str) -> str | None:
        row = self._rows.get(session_id)
        return row.needs_you_label if row is not None else self._info(session_id).needs_you

    def journal_path(self, session_id: str) -> Path:
        return Path(self._info(session_id).journal_path)

    def _engines(self) -> EngineInfo:
        if self._engine_info is None:
            self._engine_info = self._ask(Calls.engines, NoParams())
        return self._engine_info

    def disk_full(self) -> str | None:
        return self._engines().disk_full

    def question_options(self, session_id: str) -> builtins.list[str]:
        """The pending question's options: a console's from its mirrored
        detail, `corral run`'s from the owner."""
        if not self.mirror_board:
            try:
                return self._ask(Calls.question_options, SessionParams(session_id=session_id))
            except OwnerGone:
                return []
        return list(self.get(session_id).question_options)

    def engine_choices(self) -> builtins.list[tuple[str, str]]:
        return self._engines().choices

    def host_choices(self) -> builtins.list[str]:
        return self._engines().hosts

    def model_choices(self) -> builtins.list[tuple[str, bool]]:
        return self._engines().models

    def command_engines(self) -> builtins.list[tuple[str, str, str]]:
        return self._engines().command_engines

    def engine_refusal(self, engine: str) -> str | None:
        return self._ask(Calls.engine_refusal, EngineParams(engine=engine))

    def subscribe(
        self, session_id: str, from_seq: int = 0
    ) -> tuple[SubscribeResult, Subscription[CoderEvent] | None]:
        """Synchronous like the facade's: the stream is requested at once and
        its events arrive as the owner sends them (replay first)."""
        detail = self.get(session_id)
        state = detail.session.state
        if not detail.live:
            return SubscribeResult(
                state=state,
                events_replayed=0,
                events_skipped=0,
                live=False,
                replay_available=False,
            ), None
        client = self._client()
        sub: Subscription[CoderEvent] = Subscription(None, self.config.subscriber_backlog)
        stream = client.subscribe_nowait(session_id, from_seq, sub)
        sub._log = _StreamSource(self, stream)
        return SubscribeResult(
            state=state, events_replayed=0, events_skipped=0, live=True, replay_available=True
        ), sub

    def unsubscribe(self, sub: Subscription[CoderEvent]) -> None:
        sub.close()

    async def wait_for(
        self,
        session_id: str,
        states: set[CoderState] | None = None,
        *,
        needs: bool = False,
        timeout: float | None = 30,
    ) -> SessionSummary:
        shown = None if states is None else sorted(s.value for s in states)
        return await self._request(
            Calls.wait_for,
            WaitParams(session_id=session_id, states=shown, needs=needs, timeout=timeout),
        )

    async def history(self, session_id: str) -> builtins.list[CoderEvent]:
        return await self._request(Calls.history, SessionParams(session_id=session_id))

    async def export_context(self, session_id: str) -> ContextPack:
        return await self._request(Calls.export_context, SessionParams(session_id=session_id))

    async def transcript(self, session_id: str, limit: int = 500) -> builtins.list[TranscriptTurn]:
        known = self._details.get(session_id)
        if known is not None and known.session.agent_identity is None:
            return []  # an agent that keeps no transcript (the owner would answer [])
        return await self._request(
            Calls.transcript, TranscriptParams(session_id=session_id, limit=limit)
        )

    async def search(self, text: str) -> builtins.list[str]:
        return await self._request(Calls.search, SearchParams(text=text))

    async def review_files(self, session_id: str) -> builtins.list[FilePatch]:
        return await self._request(Calls.review_files, SessionParams(session_id=session_id))

    async def checkout_clashes(self, session_id: str) -> builtins.list[str]:
        return await self._request(Calls.checkout_clashes, SessionParams(session_id=session_id))

    async def foreman_split(self, session_id: str) -> Split:
        return await self._request(Calls.foreman_split, SessionParams(session_id=session_id))

    # -- acting ------------------------------------------------------------------------

    async def start(
        self,
        intent: str,
        repo: Path | str,
        *,
        engine: str = "auto",
        base: str | None = None,
        max_iterations: int | None = None,
        constraints: builtins.list[str] | None = None,
        discussion_id: str | None = None,
        wait: bool = True,
        contract: OutcomeContract | None = None,
        model: str | None = None,
        split: Split | dict[str, object] | str | None = None,
        host: str | None = None,
        decided: Collection[NeedsYou] = (),
        context: ContextPack | None = None,
    ) -> StartResult:
        params = StartParams(
            intent=intent,
            repo=str(Path(repo).resolve()),
            engine=engine,
            base=base,
            max_iterations=max_iterations,
            constraints=constraints,
            discussion_id=discussion_id,
            wait=wait,
            contract=contract,
            model=model,
            split=None if split is None else _split_json(split),
            host=host,
            decided=list(decided),
            context=context,
        )
        return await self._request(Calls.start, params)

    async def confirm(
        self, session_id: str, contract: OutcomeContract | None = None
    ) -> dict[str, str]:
        return await self._request(
            Calls.confirm, ConfirmParams(session_id=session_id, contract=contract)
        )

    async def revise(self, session_id: str, request: str) -> ReviseResult:
        return await self._request(
            Calls.revise, ReviseParams(session_id=session_id, request=request)
        )

    def set_foreman_split(self, session_id: str, split: Split | dict[str, object] | str) -> Split:
        return self._ask(
            Calls.set_foreman_split, SplitParams(session_id=session_id, split=_split_json(split))
        )

    async def respond(self, session_id: str, text: str, *, steer: bool = False) -> dict[str, bool]:
        return await self._request(
            Calls.respond, RespondParams(session_id=session_id, text=text, steer=steer)
        )

    async def set_mode(self, session_id: str, mode: str) -> dict[str, str]:
        return await self._request(Calls.set_mode, ModeParams(session_id=session_id, mode=mode))

    async def set_model(self, session_id: str, model: str) -> dict[str, str]:
        return await self._request(Calls.set_model, ModelParams(session_id=session_id, model=model))

    async def set_option(self, session_id: str, key: str, value: str) -> dict[str, str]:
        return await self._request(
            Calls.set_option, OptionParams(session_id=session_id, key=key, value=value)
        )

    async def approve(
        self,
        session_id: str,
        *,
        approve: bool = True,
        accept_finding: bool = False,
        delivery: str | None = None,
        comment: str | None = None,
        selection: Selection | None = None,
        override_red: bool = False,
        discard_rest: bool = False,
        accept_judge_changes: bool = False,
        accept_flaky: bool = False,
    ) -> ApproveResult:
        if not approve:
            return await self._request(
                Calls.reject, RejectParams(session_id=session_id, comment=comment)
            )
        chosen = (
            None
            if selection is None
            else {k: None if v is None else sorted(v) for k, v in selection.items()}
        )
        params = ApproveParams(
            session_id=session_id,
            accept_finding=accept_finding,
            delivery=delivery,
            comment=comment,
            selection=chosen,
            override_red=override_red,
            discard_rest=discard_rest,
            accept_judge_changes=accept_judge_changes,
            accept_flaky=accept_flaky,
        )
        return await self._request(Calls.approve, params)

    async def reverify(self, session_id: str) -> builtins.list[CheckResult]:
        return await self._request(Calls.reverify, SessionParams(session_id=session_id))

    async def cancel(self, session_id: str) -> CancelResult:
        return await self._request(Calls.cancel, SessionParams(session_id=session_id))

    async def send(
        self,
        sender: str,
        target: str,
        text: str,
        *,
        expects_reply: bool = False,
        responds_to: str | None = None,
    ) -> MessageData:
        params = SendParams(
            sender=sender,
            target=target,
            text=text,
            expects_reply=expects_reply,
            responds_to=responds_to,
        )
        return await self._request(Calls.send, params)

    async def revive(self, session_id: str) -> None:
        await self._request(Calls.revive, SessionParams(session_id=session_id))

    def rename(self, session_id: str, name: str | None) -> SessionSummary:
        return self._ask(Calls.rename, RenameParams(session_id=session_id, name=name))

    def archive(self, session_id: str, archived: bool = True) -> SessionSummary:
        return self._ask(Calls.archive, ArchiveParams(session_id=session_id, archived=archived))

    async def retry(
        self, session_id: str, *, wait: bool = False, keep_edits: bool = False
    ) -> StartResult:
        return await self._request(
            Calls.retry, RetryParams(session_id=session_id, keep_edits=keep_edits)
        )

    async def delete(self, session_id: str) -> DeleteResult:
        return await self._request(Calls.delete, SessionParams(session_id=session_id))

    async def push(self, session_id: str, remote: str = "origin") -> PushResult:
        return await self._request(Calls.push, PushParams(session_id=session_id, remote=remote))

    async def pull_request(self, session_id: str, remote: str = "origin") -> PullRequestResult:
        return await self._request(
            Calls.pull_request, PushParams(session_id=session_id, remote=remote)
        )

    async def adoptable(
        self, sockets: builtins.list[Path] | None = None
    ) -> builtins.list[AdoptablePane]:
        names = None if sockets is None else [str(s) for s in sockets]
        return await self._request(Calls.adoptable, AdoptableParams(sockets=names))

    async def adopt(self, target: str) -> str:
        return (await self._request(Calls.adopt, AdoptParams(target=target))).session_id

    async def release(self, session_id: str) -> None:
        await self._request(Calls.release, SessionParams(session_id=session_id))

    async def tasks(self) -> builtins.list[ScheduledTask]:
        return await self._request(Calls.tasks, NoParams())

    async def add_task(
        self,
        name: str,
        *,
        action: str,
        params: dict[str, str],
        at: float | None = None,
        every: float | None = None,
        cron: str | None = None,
    ) -> ScheduledTask:
        added = TaskAddParams(
            name=name, action=action, params=params, at=at, every=every, cron=cron
        )
        return await self._request(Calls.task_add, added)

    async def remove_task(self, task_id: str) -> None:
        await self._request(Calls.task_remove, TaskParams(task_id=task_id))

    async def pause_task(self, task_id: str, paused: bool = True) -> ScheduledTask:
        return await self._request(
            Calls.task_pause, TaskPauseParams(task_id=task_id, paused=paused)
        )

    async def run_task_now(self, task_id: str) -> TaskRun:
        return await self._request(Calls.task_run, TaskParams(task_id=task_id))

    async def task_runs(self, task_id: str) -> builtins.list[TaskRun]:
        return await self._request(Calls.task_runs, TaskParams(task_id=task_id))

    # -- the agent's pane: the owner's, mirrored on demand ---------------------------

    def agent_screen_version(self, session_id: str) -> int:
        """The mirrored screen's version (no round trip); the owner is asked
        in the background for a newer one (the terminal view polls this a few
        times a second; one fetch at a time per session). A session whose
        agent has not started (or that the owner does not run) has none."""
        known = self._screens.get(session_id)
        if self._may_have_screen(session_id) and session_id not in self._screen_fetch:
            with contextlib.suppress(RuntimeError):  # no running loop: nothing fetched
                task = asyncio.get_running_loop().create_task(self._fetch_screen(session_id))
                self._screen_fetch[session_id] = task
        return known[0] if known else -1

    def _may_have_screen(self, session_id: str) -> bool:
        """An agent screen exists only once the owner runs the agent: before
        gate 1 is confirmed, or for a row it does not run, nothing is asked."""
        detail = self._details.get(session_id)
        if detail is not None:
            s = detail.session
            return detail.live and (bool(s.pane) or s.state in _AGENT_STATES)
        row = self._rows.get(session_id)
        return row is None or (row.live and row.state in _AGENT_STATES)

    async def _fetch_screen(self, session_id: str) -> None:
        known = self._screens.get(session_id)
        try:
            answer = await self._request(
                Calls.agent_screen,
                ScreenParams(session_id=session_id, known_version=known[0] if known else -2),
            )
        except CorralError:
            return
        finally:
            self._screen_fetch.pop(session_id, None)
        if not answer.unchanged:
            self._screens[session_id] = (answer.version, answer.screen)

    def agent_screen(self, session_id: str) -> Screen | None:
        known = self._screens.get(session_id)
        return None if known is None else known[1]

    def attach_argv(self, session_id: str) -> builtins.list[str] | None:
        """The owner's tmux attach command: this terminal can attach too."""
        return self._ask(Calls.attach_argv, SessionParams(session_id=session_id))

    async def agent_scrollback(self, session_id: str, lines: int = 2000) -> builtins.list[str]:
        return await self._request(
            Calls.agent_scrollback, ScrollbackParams(session_id=session_id, lines=lines)
        )

    async def resize_agent(self, session_id: str, width: int, height: int) -> None:
        await self._request(
            Calls.agent_resize, ResizeParams(session_id=session_id, width=width, height=height)
        )

    async def send_keys_to_agent(self, session_id: str, keys: builtins.list[str]) -> None:
        await self._request(Calls.agent_keys, KeysParams(session_id=session_id, keys=keys))


def _split_json(split: Split | dict[str, object] | str) -> dict[str, Any]:
    """A split as the owner reads it: a JSON object (the owner validates it)."""
    if isinstance(split, Split):
        return split.model_dump(mode="json")
    if isinstance(split, str):
        try:
            split = json.loads(split)
        except ValueError as exc:
            raise CorralError(f"the split is not JSON: {exc}") from exc
    if not isinstance(split, dict):
        raise CorralError("a split is a JSON object")
    return dict(split)


def _implements(attached: AttachedSupervisor) -> OwnerSurface:
    return attached  # mypy proves the attached console answers all the owner's surface
