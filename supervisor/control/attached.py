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
from pathlib import Path
from typing import Any

from ..config import SupervisorConfig, load_config
from ..errors import CorralError
from ..events import CoderEvent
from ..git.patches import FilePatch, Hunk
from ..models import (
    AdoptablePane,
    ApproveResult,
    CancelResult,
    CheckResult,
    DeleteResult,
    OutcomeContract,
    PullRequestResult,
    PushResult,
    ReviseResult,
    ScheduledTask,
    SessionDetail,
    SessionSummary,
    StartResult,
    SubscribeResult,
    TaskRun,
    TranscriptTurn,
)
from ..panes.base import Screen
from ..session.board import BoardFeed, WatchDropped, Watcher
from ..session.events import Subscription
from ..states import CoderState
from .client import AsyncControlClient, ControlClient, OwnerGone


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

    def __init__(self, state_dir: Path, config: SupervisorConfig | None = None) -> None:
        self.state_dir = Path(state_dir)
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
    def store(self) -> None:
        return None  # the store is the owner's

    @property
    def left_running(self) -> builtins.list[str]:
        return []  # the owner keeps its agents

    def _call(self, method: str, **params: Any) -> Any:
        if self._sync is None:
            raise CorralError("not attached to the owner: call open() first")
        return self._sync.call(method, **params)

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
            detail = SessionDetail.model_validate(self._call("get", session_id=session_id))
        except OwnerGone:
            last = self._details.get(session_id)
            if last is None:
                raise
            return last
        self._details[session_id] = detail
        return detail

    def is_live(self, session_id: str) -> bool:
        return bool(self._call("session_info", session_id=session_id)["live"])

    def needs_you_of(self, session_id: str) -> str | None:
        value = self._call("session_info", session_id=session_id)["needs_you"]
        return None if value is None else str(value)

    def journal_path(self, session_id: str) -> Path:
        return Path(self._call("session_info", session_id=session_id)["journal_path"])

    def disk_full(self) -> str | None:
        value = self._call("engines")["disk_full"]
        return None if value is None else str(value)

    def question_options(self, session_id: str) -> builtins.list[str]:
        try:
            return builtins.list(self._call("question_options", session_id=session_id))
        except OwnerGone:
            return []

    def engine_choices(self) -> builtins.list[tuple[str, str]]:
        return [(str(a), str(b)) for a, b in self._call("engines")["choices"]]

    def host_choices(self) -> builtins.list[str]:
        return [str(h) for h in self._call("engines").get("hosts", [])]

    def command_engines(self) -> builtins.list[tuple[str, str, str]]:
        return [(str(a), str(b), str(c)) for a, b, c in self._call("engines")["command_engines"]]

    def engine_refusal(self, engine: str) -> str | None:
        value = self._call("engine_refusal", engine=engine)
        return None if value is None else str(value)

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
        return await self._client().wait_for(session_id, states, needs=needs, timeout=timeout)

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
        host: str | None = None,
    ) -> StartResult:
        return await self._client().start(
            intent,
            Path(repo).resolve(),
            model=model,
            host=host,
            engine=engine,
            base=base,
            wait=wait,
            contract=contract,
            max_iterations=max_iterations,
            constraints=constraints,
            discussion_id=discussion_id,
        )

    async def confirm(
        self, session_id: str, contract: OutcomeContract | None = None
    ) -> dict[str, str]:
        return await self._client().confirm(session_id, contract)

    async def revise(self, session_id: str, request: str) -> ReviseResult:
        return await self._client().revise(session_id, request)

    async def respond(self, session_id: str, text: str, *, steer: bool = False) -> dict[str, bool]:
        return await self._client().respond(session_id, text, steer=steer)

    async def approve(self, session_id: str, **kw: Any) -> ApproveResult:
        return await self._client().approve(session_id, **kw)

    async def cancel(self, session_id: str) -> CancelResult:
        return await self._client().cancel(session_id)

    async def send(self, sender: str, target: str, text: str) -> dict[str, Any]:
        return await self._client().send(sender, target, text)

    async def history(self, session_id: str) -> builtins.list[CoderEvent]:
        return await self._client().history(session_id)

    async def revive(self, session_id: str) -> None:
        await self._client().revive(session_id)

    async def search(self, text: str) -> builtins.list[str]:
        return await self._client().search(text)

    async def transcript(self, session_id: str, limit: int = 500) -> builtins.list[TranscriptTurn]:
        return await self._client().transcript(session_id, limit)

    async def adoptable(
        self, sockets: builtins.list[Path] | None = None
    ) -> builtins.list[AdoptablePane]:
        return await self._client().adoptable(sockets)

    async def adopt(self, target: str) -> str:
        return await self._client().adopt(target)

    async def release(self, session_id: str) -> None:
        await self._client().release(session_id)

    async def tasks(self) -> builtins.list[ScheduledTask]:
        return await self._client().tasks()

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
        return await self._client().add_task(
            name, action=action, params=params, at=at, every=every, cron=cron
        )

    async def remove_task(self, task_id: str) -> None:
        await self._client().remove_task(task_id)

    async def pause_task(self, task_id: str, paused: bool = True) -> ScheduledTask:
        return await self._client().pause_task(task_id, paused)

    async def run_task_now(self, task_id: str) -> TaskRun:
        return await self._client().run_task_now(task_id)

    async def task_runs(self, task_id: str) -> builtins.list[TaskRun]:
        return await self._client().task_runs(task_id)

    async def delete(self, session_id: str) -> DeleteResult:
        return await self._client().delete(session_id)

    async def push(self, session_id: str, remote: str = "origin") -> PushResult:
        return await self._client().push(session_id, remote)

    async def pull_request(self, session_id: str, remote: str = "origin") -> PullRequestResult:
        return await self._client().pull_request(session_id, remote)

    async def retry(
        self, session_id: str, *, wait: bool = False, keep_edits: bool = False
    ) -> StartResult:
        return await self._client().retry(session_id, keep_edits=keep_edits)

    async def reverify(self, session_id: str) -> builtins.list[CheckResult]:
        return await self._client().reverify(session_id)

    async def review_files(self, session_id: str) -> builtins.list[FilePatch]:
        files = await self._client().call("review_files", session_id=session_id)
        out = []
        for f in files:
            hunks = [Hunk(**h) for h in f.pop("hunks", [])]
            out.append(FilePatch(**f, hunks=hunks))
        return out

    # -- the agent's pane: the owner's, mirrored on demand ---------------------------

    def agent_screen_version(self, session_id: str) -> int:
        """One round trip: the version, and the screen itself when it moved
        (the terminal view polls this a few times a second)."""
        known = self._screens.get(session_id)
        try:
            answer = self._call(
                "agent_screen", session_id=session_id, known_version=known[0] if known else -2
            )
        except CorralError:
            return known[0] if known else -1
        if not answer.get("unchanged"):
            raw = answer.get("screen")
            self._screens[session_id] = (
                int(answer["version"]),
                None if raw is None else Screen(**raw),
            )
        return int(answer["version"])

    def agent_screen(self, session_id: str) -> Screen | None:
        if session_id not in self._screens:
            self.agent_screen_version(session_id)
        known = self._screens.get(session_id)
        return None if known is None else known[1]

    def attach_argv(self, session_id: str) -> builtins.list[str] | None:
        """The owner's tmux attach command: this terminal can attach too."""
        argv = self._call("attach_argv", session_id=session_id)
        return None if argv is None else [str(a) for a in argv]

    async def agent_scrollback(self, session_id: str, lines: int = 2000) -> builtins.list[str]:
        result = await self._client().call("agent_scrollback", session_id=session_id, lines=lines)
        return [str(line) for line in result]

    async def resize_agent(self, session_id: str, width: int, height: int) -> None:
        await self._client().call("agent_resize", session_id=session_id, width=width, height=height)

    async def send_keys_to_agent(self, session_id: str, keys: builtins.list[str]) -> None:
        await self._client().call("agent_keys", session_id=session_id, keys=keys)
