"""`Supervisor`: the one public facade over sessions.

start → (draft) → contract_proposed ⇄ revise → confirm → running → runtime
verification → needs_approval → approve | reject, with cancel at any point.

Long work (drafting, baselines, engines, git) runs on supervisor-owned asyncio
tasks, so a caller that goes away (a closed screen) never cancels it. Errors
are `CorralError` carrying the seed's sentences. The behaviour lives in
`core` (registry, persistence, lifecycle), `contract_gate` (gate 1),
`run_loop` (engine + runtime verification) and `approval` (gate 2, cancel).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from .approval import Approval, commit_message
from .board import Watcher
from .contract_gate import DRAFTING_CANCELLED, NOT_EXPRESSIBLE, ContractGate
from .core import EngineRegistry, SupervisorCore, new_session_id
from .errors import CorralError
from .events import Subscription
from .git.delivery import task_patch
from .git.patches import FilePatch, parse_patch
from .models import (
    SessionDetail,
    SessionSummary,
    SubscribeResult,
)
from .panes.base import Screen
from .run_loop import RunLoop, UserInputExpired
from .states import (
    CoderState,
)
from .summaries import live_summary


class Supervisor(ContractGate, RunLoop, Approval, SupervisorCore):
    def list(self) -> list[SessionSummary]:
        rows = [self._summary_for(sid) for sid in self._snapshots]
        return sorted((r for r in rows if r), key=lambda r: r.updated_at, reverse=True)

    def get(self, session_id: str) -> SessionDetail:
        entry = self._live.get(session_id)
        if entry is None:
            stored = self._snapshots.get(session_id)
            if stored is None:
                raise CorralError(f"no corral session '{session_id}'")
            return SessionDetail(
                session=stored,
                live=False,
                next_seq=None,
                steering_available=False,
                question_prompt=None,
                needs_you=None,
                needs_you_label=None,
            )
        row = live_summary(entry)
        return SessionDetail(
            session=entry.session,
            live=True,
            next_seq=entry.log.next_seq,
            steering_available=row.steering_available,
            question_prompt=row.question_prompt,
            needs_you=row.needs_you,
            needs_you_label=row.needs_you_label,
        )

    def agent_screen(self, session_id: str) -> Screen | None:
        """The agent pane's last captured screen (in memory; no tmux call)."""
        return None if self.panes is None else self.panes.screen(session_id)

    def agent_screen_version(self, session_id: str) -> int:
        record = None if self.panes is None else self.panes.record(session_id)
        return -1 if record is None else record.version

    def attach_argv(self, session_id: str) -> list[str] | None:
        """A command that attaches a real terminal to the agent's pane."""
        record = None if self.panes is None else self.panes.record(session_id)
        return None if record is None else self.panes.backend.attach_argv(record.handle)  # type: ignore[union-attr]

    async def agent_scrollback(self, session_id: str, lines: int = 2000) -> list[str]:
        """The agent pane's history plus screen (ANSI kept), oldest first."""
        if self.panes is None or self.panes.record(session_id) is None:
            return []
        return await self.panes.scrollback(session_id, lines)

    async def resize_agent(self, session_id: str, width: int, height: int) -> None:
        """Resize the agent's pane (owner-checked), e.g. to fit the console's view."""
        record = None if self.panes is None else self.panes.record(session_id)
        if record is not None:
            await asyncio.to_thread(self.panes.backend.resize, record.handle, width, height)  # type: ignore[union-attr]

    async def send_keys_to_agent(self, session_id: str, keys: list[str]) -> None:
        """Keystrokes from the console's terminal view (owner-checked)."""
        if self.panes is None or self.panes.record(session_id) is None:
            raise CorralError(f"{session_id[-8:]} has no live agent pane")
        await self.panes.send_keys(session_id, keys)

    async def review_files(self, session_id: str) -> list[FilePatch]:
        """The verified change as files and hunks, for partial approval
        (read from the worktree, not from the size-capped event)."""
        entry = self._live.get(session_id)
        if entry is None:
            raise CorralError(self._not_live_approve(session_id))
        s = entry.session
        if s.state is not CoderState.NEEDS_APPROVAL or not s.worktree or not s.start_commit:
            raise CorralError(f"{session_id[-8:]} has no diff waiting for approval")
        patch = await asyncio.to_thread(task_patch, Path(s.worktree), s.start_commit)
        return parse_patch(patch)

    def engine_choices(self) -> list[tuple[str, str]]:
        """Engines a new session can use here (for the new-session form)."""
        available = getattr(self.engines, "available", None)
        return available() if available else [("auto", "auto")]

    def question_options(self, session_id: str) -> list[str]:
        entry = self._live.get(session_id)
        return list(entry.gate.options) if entry and entry.gate.is_pending else []

    def watch(self) -> tuple[list[SessionSummary], Watcher]:
        """The whole board and a registration for changes, atomically."""
        watcher = self.board.register()
        return self.list(), watcher

    def unwatch(self, watcher: Watcher) -> bool:
        return self.board.unregister(watcher)

    def subscribe(
        self, session_id: str, from_seq: int = 0
    ) -> tuple[SubscribeResult, Subscription | None]:
        entry = self._live.get(session_id)
        if entry is None:
            stored = self._snapshots.get(session_id)
            if stored is None:
                raise CorralError(f"no corral session '{session_id}'")
            return SubscribeResult(
                state=stored.state,
                events_replayed=0,
                events_skipped=0,
                live=False,
                replay_available=False,
            ), None
        sub, replayed, skipped = entry.log.subscribe(from_seq)
        return SubscribeResult(
            state=entry.session.state,
            events_replayed=replayed,
            events_skipped=skipped,
            live=True,
            replay_available=True,
        ), sub

    def unsubscribe(self, sub: Subscription) -> None:
        sub.close()

    async def wait_for(
        self,
        session_id: str,
        states: set[CoderState] | None = None,
        *,
        needs: bool = False,
        timeout: float | None = 30,
    ) -> SessionSummary:
        """Wait until a session reaches one of `states` (or, with `needs`, needs
        the operator, or is terminal). For scripts and tests."""

        def done(row: SessionSummary | None) -> bool:
            if row is None:
                return False
            if states and row.state in states:
                return True
            return needs and (row.needs_you is not None or row.state.is_terminal)

        watcher = self.board.register()
        try:
            row = self._summary_for(session_id)
            async with asyncio.timeout(timeout):
                while not done(row):
                    for changed in await watcher.get():
                        if changed.session_id == session_id:
                            row = changed
            assert row is not None
            return row
        finally:
            self.board.unregister(watcher)


__all__ = [
    "DRAFTING_CANCELLED",
    "NOT_EXPRESSIBLE",
    "EngineRegistry",
    "Supervisor",
    "UserInputExpired",
    "commit_message",
    "new_session_id",
]
