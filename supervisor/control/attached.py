"""A console attached to another process's owner: `AttachedSupervisor` answers
what the console asks of the in-process `Supervisor`, over the control socket.

The board is a local mirror: one `watch` stream keeps every row, and a local
`BoardFeed` fans changes out to the console's watchers, so `watch()` stays
synchronous as the console expects. Other synchronous reads (`get`,
`question_options`, …) are one blocking round trip on a second connection
(well under a millisecond on a unix socket). Actions are the owner's calls.

The agent's pane stays with the owner; its screen is fetched when its version
moves, keys and resizes are the owner's calls, and `attach_argv` is the owner's
tmux command (any terminal of the same user can attach). Its discussions are
its own, not the owner's.
"""

from __future__ import annotations

import asyncio
import builtins
import json
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
from .client import AsyncControlClient, ControlClient, OwnerGone
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
        self._mirror: asyncio.Task[None] | None = None
        self.owner_gone: str | None = None  # the sentence once the owner went away

    # -- owning nothing: attach and detach ---------------------------------------------

    async def open(self) -> None:
        self._sync = await asyncio.to_thread(ControlClient, self.state_dir)
        self._async = await AsyncControlClient.connect(self.state_dir)
        if not self.mirror_board:
            return
        rows, watcher = await self._async.watch()
        self._rows.update({r.session_id: r for r in rows})
        self._mirror = asyncio.get_running_loop().create_task(self._follow(watcher))

    async def _follow(self, watcher: Watcher) -> None:
        assert self._async is not None
        try:
            while True:
                try:
                    for row in await watcher.get():
                        self._rows[row.session_id] = row
                        self.board.notify(row.session_id)
                except WatchDropped:
                    if not self._async.connected:
                        break
                    self._async.unwatch(watcher)
                    rows, watcher = await self._async.watch()
                    gone = set(self._rows) - {row.session_id for row in rows}
                    for row in rows:
                        self._rows[row.session_id] = row
                        self.board.notify(row.session_id)
                    if gone:  # deleted at the owner: the console resyncs without them
                        for sid in gone:
                            del self._rows[sid]
                        self.board.resync()
        except CorralError:
            pass  # the connection closed while resyncing
        self.owner_gone = "the owner of this state dir went away"

    async def close(self) -> None:
        if self._mirror is not None:
            self._mirror.cancel()
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
        """One blocking round trip (the console's synchronous reads)."""
        if self._sync is None:
            raise CorralError("not attached to the owner: call open() first")
        return self._sync.request(call, params)

    async def _request(self, call: Call[P, R], params: P) -> R:
        return await self._client().request(call, params)

    def _client(self) -> AsyncControlClient:
        if self._async is None:
            raise CorralError("not attached to the owner: call open() first")
        return self._async

    # -- reading -----------------------------------------------------------------------

    def list(self) -> builtins.list[SessionSummary]:
        return sorted(self._rows.values(), key=lambda r: r.updated_at, reverse=True)

    def watch(self) -> tuple[builtins.list[SessionSummary], Watcher]:
        return self.list(), self.board.register()

    def unwatch(self, watcher: Watcher) -> bool:
        return self.board.unregister(watcher)

    def get(self, session_id: str) -> SessionDetail:
        """The owner's answer; once the owner is gone, the last one seen (the
        console's views keep drawing what they had, and say the owner left)."""
        try:
            detail = self._ask(Calls.get, SessionParams(session_id=session_id))
        except OwnerGone:
            last = self._details.get(session_id)
            if last is None:
                raise
            return last
        self._details[session_id] = detail
        return detail

    def _info(self, session_id: str) -> SessionInfo:
        return self._ask(Calls.session_info, SessionParams(session_id=session_id))

    def is_live(self, session_id: str) -> bool:
        return self._info(session_id).live

    def needs_you_of(self, session_id: str) -> str | None:
        return self._info(session_id).needs_you

    def journal_path(self, session_id: str) -> Path:
        return Path(self._info(session_id).journal_path)

    def _engines(self) -> EngineInfo:
        return self._ask(Calls.engines, NoParams())

    def disk_full(self) -> str | None:
        return self._engines().disk_full

    def question_options(self, session_id: str) -> builtins.list[str]:
        try:
            return self._ask(Calls.question_options, SessionParams(session_id=session_id))
        except OwnerGone:
            return []

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
        """One round trip: the version, and the screen itself when it moved
        (the terminal view polls this a few times a second)."""
        known = self._screens.get(session_id)
        try:
            answer = self._ask(
                Calls.agent_screen,
                ScreenParams(session_id=session_id, known_version=known[0] if known else -2),
            )
        except CorralError:
            return known[0] if known else -1
        if not answer.unchanged:
            self._screens[session_id] = (answer.version, answer.screen)
        return answer.version

    def agent_screen(self, session_id: str) -> Screen | None:
        if session_id not in self._screens:
            self.agent_screen_version(session_id)
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
