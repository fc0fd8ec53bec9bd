"""The supervisor's core: the live registry, persistence-before-announce
transitions, events, lifecycle (open/close, restart recovery) and retention."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol, TypeVar

from . import retention
from .board import BoardFeed
from .config import SupervisorConfig, load_config
from .contracts.drafting import (
    ContractDrafter,
)
from .engines.base import Engine
from .entry import SessionEntry
from .errors import CorralError
from .events import EventLog, Journal
from .git.delivery import review_identity
from .git.workspace import GitWorkspace
from .models import (
    CoderSession,
    EventKind,
    SessionSummary,
)
from .panes.manager import PaneManager
from .paths import default_state_dir, ensure_private_dir
from .states import (
    ApprovalKind,
    CoderState,
    FailureKind,
    IllegalTransition,
    can_transition,
    needs_you_label,
    not_live_message,
)
from .store import OwnerLock, Store
from .summaries import live_summary, stored_summary
from .workspaces import Workspaces

S = CoderState


T = TypeVar("T")
log = logging.getLogger("corral.supervisor")


class EngineRegistry(Protocol):
    def resolve(self, requested: str) -> tuple[str, str]: ...

    def create(self, label: str) -> Engine: ...


def new_session_id() -> str:
    return f"{int(time.time()):x}{uuid.uuid4().hex[:16]}"


def _retrieve(task: asyncio.Task[Any]) -> None:
    """Mark a background task's exception as seen; callers that wait get it."""
    if not task.cancelled():
        task.exception()


class SupervisorCore:
    def __init__(
        self,
        state_dir: Path | None = None,
        *,
        drafter: ContractDrafter,
        engines: EngineRegistry,
        config: SupervisorConfig | None = None,
        clock: Callable[[], float] = time.time,
        panes: PaneManager | None = None,
        id_factory: Callable[[], str] = new_session_id,
    ) -> None:
        self.state_dir = Path(state_dir) if state_dir else default_state_dir()
        self.config = config or load_config()
        self.drafter = drafter
        self.engines = engines
        self.clock = clock
        self.store: Store | None = None
        self._lock = OwnerLock(self.state_dir)
        self._live: dict[str, SessionEntry] = {}
        self._snapshots: dict[str, CoderSession] = {}
        self.board = BoardFeed(self._summary_for, shed_secs=self.config.watcher_shed_secs)
        self.broken_rows: list[str] = []
        self._last_disk_gc: float | None = None
        self._janitor: asyncio.Task[None] | None = None
        self.workspaces: Workspaces | None = None
        self.panes = panes
        self.id_factory = id_factory
        self._closing = False
        self.stray_panes: list[str] = []

    async def open(self) -> None:
        """Take ownership of the state dir, load stored sessions, and mark
        sessions that were mid-run when the last process died as failed."""
        ensure_private_dir(self.state_dir)
        self._lock.acquire()
        try:
            self.store = Store(self.state_dir)
            sessions, self.broken_rows = self.store.list_sessions()
        except Exception:
            self._lock.release()
            raise
        self.workspaces = Workspaces(self.state_dir, self.store.path)
        try:
            await asyncio.to_thread(self.workspaces.reconcile)
        except CorralError as exc:  # a vanished repo must not keep the console shut
            log.warning("worktree reconciliation: %s", exc)
        live_panes = await self._start_panes()
        for session in sessions:
            self._snapshots[session.id] = session
            if session.state is S.RUNNING and self._readopt(session, live_panes):
                continue
            if session.state in (S.CREATED, S.CONTRACT_CONFIRMED, S.RUNNING):
                self._mark_orphan_failed(session)
            elif session.state in (S.CONTRACT_PROPOSED, S.NEEDS_APPROVAL):
                await self._restore_gate(session)
        known = {s.pane.get("owner") for s in sessions if s.pane}
        self.stray_panes = sorted(o for o in live_panes if o not in known)
        for owner in self.stray_panes:
            log.warning("a corral pane with no matching session is running: %s (left alone)", owner)
        self._janitor = asyncio.get_running_loop().create_task(self._janitor_loop())

    async def _start_panes(self) -> dict[str, Any]:
        """Start the pane manager; returns our live panes by owner marker."""
        if self.panes is None:
            return {}
        self.panes.on_status = self._on_agent_status
        try:
            infos = await asyncio.to_thread(self.panes.backend.sweep)
        except Exception as exc:  # no tmux server yet, or none at all
            log.info("pane sweep at start-up: %s", exc)
            infos = {}
        await self.panes.start()
        return {owner: info for owner, info in infos.items() if info.alive}

    def _readopt(self, session: CoderSession, live_panes: dict[str, Any]) -> bool:
        """A running session whose agent pane is still alive (owner marker
        matches) resumes: status, output and the run go on."""
        owner = (session.pane or {}).get("owner")
        info = live_panes.get(owner) if owner else None
        if info is None or self.panes is None or not session.worktree:
            return False
        from .agents.profiles import profile_for

        try:
            profile = profile_for(str(session.pane.get("agent", "")))  # type: ignore[union-attr]
        except Exception:
            return False
        entry = self._register(session)
        entry.workspace = GitWorkspace(Path(session.repo), Path(session.worktree))
        self.panes.adopt(session.id, info.handle, profile)
        self._emit(
            entry,
            EventKind.PLAN_TEXT,
            {
                "text": (
                    f"corral restarted; the {profile.label} pane was still running and was re-adopted."
                )
            },
        )
        entry.task = asyncio.get_running_loop().create_task(self._run(entry))  # type: ignore[attr-defined]
        return True

    def _on_agent_status(self, session_id: str, reading: Any) -> None:
        entry = self._live.get(session_id)
        if entry is None:
            return
        entry.agent_status = reading
        question = reading.question
        self._emit(
            entry,
            EventKind.AGENT_STATUS,
            {
                "status": reading.status.value,
                "reason": reading.reason,
                "source": reading.source,
                "question": question.prompt if question else None,
            },
        )
        self.board.notify(session_id)

    async def run_in_scratch(
        self,
        repo: Path,
        commit: str,
        session_id: str,
        work: Callable[[Path], Awaitable[T]],
        prepare: Callable[[Path], None] | None = None,
    ) -> T:
        """Run `work` in a disposable worktree at `commit` (after the blocking
        `prepare`, e.g. applying a patch); the copy is always removed."""
        assert self.workspaces is not None
        cm = self.workspaces.scratch(repo, commit, session_id)
        path = await asyncio.to_thread(cm.__enter__)
        try:
            if prepare is not None:
                await asyncio.to_thread(prepare, path)
            return await work(path)
        finally:
            await asyncio.shield(asyncio.to_thread(cm.__exit__, None, None, None))

    async def _restore_gate(self, session: CoderSession) -> None:
        """Bring a session that was waiting at a gate back to life, but only
        when its worktree is intact (and, for a review, unchanged since it was
        verified). Otherwise it stays listed as stored, with no action offered."""
        if not session.worktree or not Path(session.worktree).is_dir():
            return
        if session.state is S.NEEDS_APPROVAL and session.no_change_finding is None:
            if session.review_tree is None:
                return
            try:
                now = await asyncio.to_thread(review_identity, Path(session.worktree))
            except CorralError:
                return
            if now != session.review_tree:
                return
        entry = self._register(session)
        entry.workspace = GitWorkspace(Path(session.repo), Path(session.worktree))
        if session.state is S.NEEDS_APPROVAL:
            entry.attention.approval_kind = (
                ApprovalKind.FINDING if session.no_change_finding else ApprovalKind.MERGE
            )
            text = (
                "Review restored after a restart: the worktree is exactly as verified. The saved "
                "verification results were not re-run; earlier activity is in the journal."
            )
        else:
            text = "Restored after a restart: the contract is waiting for confirmation again."
        self._emit(entry, EventKind.PLAN_TEXT, {"text": text})

    def _mark_orphan_failed(self, session: CoderSession) -> None:
        kept = f"; its worktree is kept at {session.worktree}" if session.worktree else ""
        session.error = (
            f"corral stopped while this session was {session.state.value}, so it could not "
            f"continue{kept}"
        )
        session.failure_kind = FailureKind.INFRASTRUCTURE
        session.keep_workspace_on_failure = True
        session.state = S.FAILED
        session.updated_at = self.clock()
        assert self.store is not None
        self.store.save_session(session)

    async def close(self) -> None:
        """Stop in-process work and release the state dir. Agents in tmux panes
        keep running and are re-adopted by the next console; in-process runs
        are recorded as failed (their worktrees are kept)."""
        self._closing = True
        if self._janitor is not None:
            self._janitor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._janitor
        for entry in list(self._live.values()):
            tasks = [t for t in [entry.task, *entry.ops] if t is not None and not t.done()]
            for t in tasks:
                t.cancel()
            for t in tasks:
                with contextlib.suppress(BaseException):
                    await t
            s = entry.session
            detached = (
                s.state is S.RUNNING
                and s.pane is not None
                and s.pane.get("state") == "live"
                and self.panes is not None
                and self.panes.backend.name == "tmux"
            )
            if detached:
                self._persist(entry)  # stays running: the next console re-adopts it
            elif not s.state.is_terminal and s.state not in (
                S.CONTRACT_PROPOSED,
                S.NEEDS_APPROVAL,
            ):
                self._mark_orphan_failed(s)
            entry.log.close()
        self._live.clear()
        if self.panes is not None:
            await self.panes.stop()
        if self.workspaces is not None:
            self.workspaces.close()
            self.workspaces = None
        if self.store is not None:
            self.store.close()
            self.store = None
        self._lock.release()

    async def __aenter__(self) -> SupervisorCore:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _entry(self, session_id: str) -> SessionEntry:
        entry = self._live.get(session_id)
        if entry is not None:
            return entry
        stored = self._snapshots.get(session_id)
        if stored is None:
            raise CorralError(f"no corral session '{session_id}'")
        raise CorralError(not_live_message(session_id, stored.state))

    def _summary_for(self, session_id: str) -> SessionSummary | None:
        entry = self._live.get(session_id)
        if entry is not None:
            return live_summary(entry)
        stored = self._snapshots.get(session_id)
        return stored_summary(stored) if stored else None

    def _persist(self, entry: SessionEntry) -> None:
        assert self.store is not None
        entry.session.event_cursor = entry.log.next_seq
        self.store.save_session(entry.session)

    def _emit(self, entry: SessionEntry, kind: EventKind, data: dict[str, Any] | None = None):
        return entry.log.append(kind, data)

    def _observe(self, entry: SessionEntry, event: Any) -> None:
        if entry.attention.observe(event):
            self.board.notify(entry.id)

    def _transition(self, entry: SessionEntry, dst: CoderState) -> None:
        """Persist, then announce. A failed write leaves the state unchanged."""
        session = entry.session
        src = session.state
        if not can_transition(src, dst):
            raise IllegalTransition(src, dst)
        before = session.updated_at
        session.state = dst
        session.updated_at = max(self.clock(), before)
        try:
            self._persist(entry)
        except Exception:
            session.state = src
            session.updated_at = before
            raise
        self._emit(entry, EventKind.STATE_CHANGED, {"from": src.value, "to": dst.value})
        if dst.is_terminal and self.panes is not None and self.panes.record(session.id):
            task = asyncio.get_running_loop().create_task(self.panes.kill(session.id))
            task.add_done_callback(_retrieve)

    def _register(self, session: CoderSession) -> SessionEntry:
        journal = Journal(self.journal_path(session.id))
        entry_holder: list[SessionEntry] = []
        log_ = EventLog(
            session.id,
            cap=self.config.max_replay_events,
            journal=journal,
            start_seq=session.event_cursor,
            observer=lambda ev: self._observe(entry_holder[0], ev),
            backlog=self.config.subscriber_backlog,
            clock=self.clock,
        )
        entry = SessionEntry(session=session, log=log_)
        entry_holder.append(entry)
        self._live[session.id] = entry
        self._snapshots[session.id] = session
        return entry

    def journal_path(self, session_id: str) -> Path:
        return self.state_dir / "journals" / f"{session_id}.events.jsonl"

    def _spawn(self, entry: SessionEntry, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        entry.ops.add(task)
        task.add_done_callback(entry.ops.discard)
        task.add_done_callback(_retrieve)
        return task

    def _prune_finished(self) -> list[str]:
        """Drop finished sessions from memory after the retention window, only
        when their snapshot is stored and their task has ended."""
        now = self.clock()
        gone: list[str] = []
        assert self.store is not None
        for sid, entry in list(self._live.items()):
            s = entry.session
            if entry.task_running or entry.ops:
                continue
            if not retention.collectable_by_age(
                s.state.is_terminal, s.updated_at, now, self.config.finished_retention_secs
            ):
                continue
            if self.store.load_session(sid) is None:
                continue
            entry.log.close()
            del self._live[sid]
            gone.append(sid)
        self._sweep_disk()
        return gone

    def _sweep_disk(self) -> None:
        mono = time.monotonic()
        interval = self.config.disk_gc_interval_secs
        if self._last_disk_gc is not None and mono - self._last_disk_gc < interval:
            return
        self._last_disk_gc = mono
        assert self.store is not None
        if self.workspaces is not None:
            with contextlib.suppress(RuntimeError):  # no running loop: skip this round
                task = asyncio.get_running_loop().create_task(
                    asyncio.to_thread(self._discard_expired_rejections)
                )
                task.add_done_callback(_retrieve)
        victims = retention.disk_gc_victims(
            list(self._snapshots.values()),
            set(self._live),
            now=self.clock(),
            max_sessions=self.config.retention.max_sessions,
            max_age_days=self.config.retention.max_age_days,
        )
        if not victims:
            return
        self.store.delete_sessions(victims)
        for sid in victims:
            self._snapshots.pop(sid, None)
            self.journal_path(sid).unlink(missing_ok=True)

    def _discard_expired_rejections(self) -> list[str]:
        """Worktrees of rejected sessions are kept for a day, then removed
        (blocking; only when git's listing still matches the lease)."""
        assert self.workspaces is not None
        removed: list[str] = []
        for lease in self.workspaces.expired_rejections(self.clock()):
            ok, _why = self.workspaces.remove(lease.path)
            if ok:
                removed.append(lease.path)
        return removed

    async def _janitor_loop(self) -> None:
        while True:
            await asyncio.sleep(60)
            try:
                self._prune_finished()
            except Exception:
                log.exception("retention sweep failed")

    def is_live(self, session_id: str) -> bool:
        return session_id in self._live

    def needs_you_of(self, session_id: str) -> str | None:
        row = self._summary_for(session_id)
        return None if row is None or row.needs_you is None else needs_you_label(row.needs_you)
