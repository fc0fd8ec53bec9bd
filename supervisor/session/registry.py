"""The session registry: every session this supervisor knows, live or stored.

It is the only place that changes a session's state, and it always persists
before it announces: a transition is written to the store, then its
`state_changed` event is emitted, then its side effects follow (a terminal
session's agent pane is stopped). A failed write leaves the state unchanged
and nothing announced. The registry also builds the board rows, feeds `watch`
registrations and owns the tasks it spawns for a session, so cancel and close
can reach every one of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import time
import uuid
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

from ..agents.base import AgentUnavailable
from ..agents.profiles import profile_for
from ..agents.provider_home import session_env
from ..cancelling import cancel_and_wait
from ..config import SupervisorConfig
from ..errors import CorralError, DiskFullError
from ..events import (
    MESSAGE_ACCEPTED,
    MESSAGE_QUEUED,
    OPERATOR,
    AgentStatusData,
    CoderEvent,
    EventData,
    MessageData,
    PlanTextData,
    StateChangedData,
)
from ..models import (
    CoderSession,
    SessionDetail,
    SessionSummary,
    SubscribeResult,
    TokenUse,
)
from ..panes.manager import PaneManager
from ..panes.stop_mark import agents_dir
from ..paths import ensure_private_dir
from ..states import (
    CoderState,
    FailureKind,
    IllegalTransition,
    can_transition,
    label,
    not_live_message,
)
from ..status import AgentStatus, StatusReading
from ..store import OwnerLock, Store
from ..store.listing import UNFINISHED
from ..store.retention import StoredRef, collectable_by_age
from .active_context import refresh_due_notice
from .board import BoardFeed
from .identity import can_go_dormant, mark_dormant, note_hook
from .journal import EventLog, Journal, Subscription, last_journal_seq, read_journal
from .live import LiveSession
from .messages import PENDING_FILE, Mailboxes, Message, refusal
from .summaries import live_summary, stored_summary, summary_json

IMPOSSIBLE_HOOK = "impossible"  # `corral hook impossible`: the task cannot be done as specified
MAX_IMPOSSIBLE_CHARS = 2000


def impossible_reason(text: str) -> str:
    """The agent's reason as one plain line the operator reads: control
    characters gone, capped; an empty one says so."""
    cleaned = " ".join("".join(ch if ch.isprintable() else " " for ch in text).split())
    if len(cleaned) > MAX_IMPOSSIBLE_CHARS:
        cleaned = cleaned[: MAX_IMPOSSIBLE_CHARS - 1] + "…"
    return cleaned or "(the agent gave no reason)"


S = CoderState
log = logging.getLogger("corral.supervisor")
T = TypeVar("T")


def new_session_id() -> str:
    """Sortable by creation time (hex seconds first), unique by the random tail."""
    return f"{int(time.time()):x}{uuid.uuid4().hex[:16]}"


def _retrieve(task: asyncio.Task[Any]) -> None:
    """Mark a background task's exception as seen; callers that wait get it."""
    if not task.cancelled():
        task.exception()


HISTORY_LIMIT = 5000  # journal events a session screen shows at most


class SessionRegistry:
    def __init__(
        self,
        state_dir: Path,
        *,
        config: SupervisorConfig,
        clock: Callable[[], float],
        panes: PaneManager | None,
    ) -> None:
        self.state_dir = state_dir
        self.config = config
        self.clock = clock
        self.panes = panes
        self.store: Store | None = None
        self.board = BoardFeed(self.summary, shed_secs=config.watcher_shed_secs)
        self.closing = False  # read by engines: agents in panes live on past a close
        self._lock = OwnerLock(state_dir)
        self._live: dict[str, LiveSession] = {}
        self._stored: dict[str, CoderSession] = {}  # parsed: live, unfinished or asked for
        self._rows: dict[str, SessionSummary] = {}  # finished, listed but not parsed yet
        # Told of every session that reaches a final state, after it is stored
        # (a discussion records what its runs delivered). Must not raise.
        self.on_finished: Callable[[CoderSession], None] = lambda _session: None
        self._stopping: set[asyncio.Task[bool]] = set()  # agents being stopped
        # sessions whose agent close() left running on purpose (re-adopted next time)
        self.left_running: list[str] = []
        # messages between sessions, queued per target; pending replies stored
        self.mailboxes = Mailboxes(store=state_dir / PENDING_FILE)

    # -- owning the state dir ------------------------------------------------------------

    def open(self) -> tuple[list[CoderSession], list[str]]:
        """Take ownership of the state dir and load the stored sessions: the
        board rows of all of them (without parsing finished ones: they are
        parsed when something asks for one), and in full those that are not
        finished. Returns what recovery needs (the unfinished sessions in
        full, and the finished ones that had an agent pane, enough to stop a
        leftover agent), newest first, and the ids of rows that do not parse,
        which stay on disk untouched."""
        ensure_private_dir(self.state_dir)
        self._lock.acquire()
        try:
            store = self.store = Store(self.state_dir, summarize=summary_json)
            listing = store.summaries(stored_summary)
            unfinished, broken = store.load_sessions(UNFINISHED)
            with_panes = store.finished_panes()
            if listing.stale:
                store.keep_summaries(listing.stale)
        except Exception:
            self._lock.release()
            raise
        self.closing = False
        self._rows = {row.session_id: row for row in listing.rows}
        for session in unfinished:
            self._stored[session.id] = session
            self._rows.pop(session.id, None)
        self.mailboxes.restore({s.id for s in unfinished})
        return [*unfinished, *with_panes], sorted({*broken, *listing.unreadable})

    def known_ids(self) -> set[str]:
        """Every session stored or live (parsed or not)."""
        return set(self._stored) | set(self._rows)

    async def stop_sessions(self) -> None:
        """Stop in-process work. An agent in a tmux pane whose session can
        continue (running, or waiting at a gate) keeps running on purpose and
        is re-adopted by the next owner (`left_running` names them); other
        unfinished sessions not waiting at a gate are recorded as failed
        (their worktrees are kept) and the agent of every finished session
        is stopped before this returns."""
        self.closing = True
        self.left_running = []
        for live in list(self._live.values()):
            tasks = [t for t in [live.task, *live.ops] if t is not None and not t.done()]
            await cancel_and_wait(tasks, what=f"a task of {live.id}")
            s = live.session
            detached = (
                s.state is S.RUNNING
                and s.pane is not None
                and s.pane.get("state") == "live"
                and self.panes is not None
                and self.panes.backend.name == "tmux"
            )
            at_gate = s.state in (S.CONTRACT_PROPOSED, S.NEEDS_APPROVAL)
            if detached:
                self.persist(live)
            elif not s.state.is_terminal and not at_gate:
                if can_go_dormant(s) and not self._agent_left(s):
                    self.mark_dormant(s)
                else:
                    self.mark_orphan_failed(s)
            if s.state.is_terminal:
                self.stop_agent(s)
            elif self._agent_left(s) and (detached or at_gate):
                self.left_running.append(s.id)
            live.log.close()
        self._live.clear()
        if self._stopping:
            await asyncio.wait(set(self._stopping), timeout=15)

    def detach(self, live: LiveSession) -> None:
        """Let go of a live session as it is (stored, its log closed), for a
        later owner to take up (an adopted pane left running on close)."""
        self.persist(live)
        live.log.close()
        self._live.pop(live.id, None)

    def _agent_left(self, session: CoderSession) -> bool:
        """Whether this session's agent outlives the close (tmux only)."""
        return (
            self.panes is not None
            and self.panes.backend.name == "tmux"
            and self.panes.record(session.id) is not None
            and self.panes.records[session.id].alive
        )

    def release(self) -> None:
        """Close the store and give up the state dir."""
        if self.store is not None:
            self.store.close()
            self.store = None
        self._lock.release()

    def mark_orphan_failed(self, session: CoderSession) -> None:
        """A session that cannot continue because its process went away: failed,
        worktree kept, stored without an announcement (nobody is live to hear it)."""
        kept = f"; its worktree is kept at {session.worktree}" if session.worktree else ""
        doing = {
            S.CREATED: "drafting this session's contract",
            S.CONTRACT_CONFIRMED: "starting this session's agent",
        }.get(session.state, f"this session was {session.state.value}")
        session.error = f"corral stopped while {doing}, so it could not continue{kept}"
        session.failure_kind = FailureKind.INFRASTRUCTURE
        session.keep_workspace_on_failure = True
        session.state = S.FAILED
        session.updated_at = self.clock()
        self._require_store().save_session(session)
        self.on_finished(session)

    def mark_dormant(self, session: CoderSession) -> None:
        """A running session whose agent is gone but can be resumed: kept as
        it is (worktree, state), stored as dormant, never a needs-you."""
        mark_dormant(session)
        session.updated_at = self.clock()
        live = self._live.get(session.id)
        if live is not None:
            self.persist(live)
        else:
            self._require_store().save_session(session)
        self._stored[session.id] = session

    # -- registering, persisting, announcing ---------------------------------------------

    def register(self, session: CoderSession) -> LiveSession:
        """Make a session live: its event log continues after both its stored
        cursor and the last event of its journal (events announced after the
        last save were written there), so no `seq` is ever handed out twice;
        every event folds into its attention before any subscriber sees it."""
        holder: list[LiveSession] = []
        journal = self.journal_path(session.id)
        last = last_journal_seq(journal)
        session.event_cursor = max(session.event_cursor, -1 if last is None else last + 1)
        log = EventLog(
            session.id,
            cap=self.config.max_replay_events,
            journal=Journal(journal),
            start_seq=session.event_cursor,
            observer=lambda event: self._observe(holder[0], event),
            backlog=self.config.subscriber_backlog,
            clock=self.clock,
        )
        live = LiveSession(session=session, log=log)
        holder.append(live)
        self._live[session.id] = live
        self._stored[session.id] = session
        self._rows.pop(session.id, None)
        return live

    def persist(self, live: LiveSession, *, announcing: int = 0) -> None:
        """Store the snapshot. The cursor saved is the `seq` the next event gets,
        after the `announcing` events about to be emitted for this very change
        (a transition saves its `state_changed` number with the new state)."""
        live.session.event_cursor = live.log.next_seq + announcing
        self._require_store().save_session(live.session)

    def emit(self, live: LiveSession, data: EventData) -> None:
        """Announce one event (its payload names its kind)."""
        live.log.append(data)

    def transition(self, live: LiveSession, dst: CoderState) -> None:
        """Persist, then announce, then stop a finished session's agent pane."""
        session = live.session
        src = session.state
        if not can_transition(src, dst):
            raise IllegalTransition(src, dst)
        before = session.updated_at
        session.state = dst
        session.updated_at = max(self.clock(), before)
        try:
            self._persist_change(live, ending=dst.is_terminal)
        except Exception:
            session.state = src
            session.updated_at = before
            raise
        if src is not dst:  # a revised contract stays proposed: nothing changed to say
            self.emit(live, StateChangedData(from_=src, to=dst))
        if dst.is_terminal:
            self.on_finished(session)
        if dst.is_terminal:
            self.stop_agent(session)
            self._settle_replies(session.id)

    def _settle_replies(self, session_id: str) -> None:
        """A finished session owes and awaits no reply any more: the other
        side's row is told."""
        others = {
            m.sender if m.target == session_id else m.target
            for m in self.mailboxes.awaiting()
            if session_id in (m.sender, m.target)
        }
        self.mailboxes.forget(session_id)
        for other in others:
            if other in self._live:
                self.board.notify(other)

    def fail_unstored(self, live: LiveSession, error: str) -> None:
        """A session whose failure cannot be stored (the disk is full and the
        space set aside is used up) still fails here, so nobody waits on it
        for ever; the store keeps its last saved state, which the next corral
        finds orphaned and fails with its own sentence."""
        session = live.session
        src = session.state
        if src.is_terminal:
            return
        session.error = f"{error} (this failure could not be stored)"
        session.failure_kind = FailureKind.INFRASTRUCTURE
        session.state = CoderState.FAILED
        session.updated_at = max(self.clock(), session.updated_at)
        log.warning("session %s failed but could not be stored: %s", session.id, error)
        self.emit(live, StateChangedData(from_=src, to=CoderState.FAILED))
        self.on_finished(session)
        self.stop_agent(session)

    def _persist_change(self, live: LiveSession, *, ending: bool) -> None:
        """Store a transition. A full disk makes the store give back the space
        it set aside, so how a session ended is stored on a second try; other
        changes are not given that space."""
        try:
            self.persist(live, announcing=1)
        except DiskFullError:
            if not ending:
                raise
            self.persist(live, announcing=1)

    def stop_agent(self, session: CoderSession) -> None:
        """A finished session's agent is stopped, whoever started it (this
        process, or an earlier owner whose pane was re-adopted or left at a
        gate). Closing waits for it."""
        if self.panes is None or (session.pane is None and not self.panes.record(session.id)):
            return
        task = asyncio.get_running_loop().create_task(
            self.panes.stop_agent(session.id, session.pane)
        )
        self._stopping.add(task)
        task.add_done_callback(self._stopping.discard)
        task.add_done_callback(_retrieve)
        task.add_done_callback(
            lambda done: None if done.cancelled() or done.exception() else self.stopped(session)
        )

    def has_agent_pane(self, session: CoderSession) -> bool:
        return self.panes is not None and (
            session.pane is not None or self.panes.record(session.id) is not None
        )

    def stopped(self, session: CoderSession) -> None:
        """A failed or abandoned session's agent is seen stopped: recorded
        (`execution_stopped`), so a follow-up may carry on from its worktree."""
        if session.execution_stopped or session.state not in (
            CoderState.FAILED,
            CoderState.ABANDONED,
        ):
            return
        session.execution_stopped = True
        live = self._live.get(session.id)
        try:
            if live is not None and live.session is session:
                self.persist(live)
            elif self.store is not None:
                self.store.save_session(session)
        except Exception as exc:  # not stored: a follow-up finds it unconfirmed, as before
            session.execution_stopped = False
            log.warning("could not record that %s stopped: %s", session.id, exc)

    def amend(self, session_id: str, change: Callable[[CoderSession], None]) -> SessionSummary:
        """Change what the operator owns of a session (its name, archived or
        not), live or stored: stored first, then the board is told. Its place
        on the board (`updated_at`) is left as it was."""
        live = self._live.get(session_id)
        session = live.session if live is not None else self.stored(session_id)
        if session is None:
            raise CorralError(f"no corral session '{session_id}'")
        before = session.model_copy()
        change(session)
        try:
            if live is not None:
                self.persist(live)
            else:
                self._require_store().save_session(session)
        except Exception:  # not stored: not changed
            for field in type(session).model_fields:
                setattr(session, field, getattr(before, field))
            raise
        self.board.notify(session_id)
        row = self.summary(session_id)
        assert row is not None
        return row

    def notify(self, session_id: str) -> None:
        """Push a fresh board row for a change that emits no event."""
        self.board.notify(session_id)

    def note_message(self, message: Message, status: str, reason: str | None = None) -> None:
        """Log one step of a message in the target's journal and the sender's."""
        if status == MESSAGE_ACCEPTED:
            self.mailboxes.read(message)
        self.mailboxes.ended(message, status)
        for sid in {message.target, message.sender}:
            live = self._live.get(sid)
            if live is not None:
                self.emit(live, message.data(status, reason))
                self.board.notify(sid)  # a reply owed or awaited may have changed

    def send_message(
        self,
        sender: str,
        target: str,
        text: str,
        *,
        expects_reply: bool = False,
        responds_to: str | None = None,
        speaks_acp: bool = False,
    ) -> MessageData:
        """Queue a message for `target`'s agent (from the operator or from a
        session); refuses, with the reason, one nothing would deliver."""
        why = refusal(
            self._stored.get(target), target, live=target in self._live, speaks_acp=speaks_acp
        )
        if why is not None:
            raise CorralError(why)
        if sender != OPERATOR:
            origin = self._stored.get(sender)
            if origin is None:
                raise CorralError(f"no corral session '{sender}' to send a message from")
            if origin.state.is_terminal:
                raise CorralError(
                    f"{label(sender)} already finished (state: {origin.state.value}): it sends "
                    "no more messages"
                )
        message = self.mailboxes.admit(
            sender, target, text, expects_reply=expects_reply, responds_to=responds_to
        )
        self.note_message(message, MESSAGE_QUEUED)
        return message.data()

    def note_messages(self, messages: list[Message], status: str, reason: str | None) -> None:
        for message in messages:
            self.note_message(message, status, reason)

    def note_impossible(self, session_id: str, reason: str) -> str:
        """The session's agent says the task cannot be done as specified (its
        hook, its control connection, the built-in engine's tool): kept for
        the run loop, which asks the operator when the agent's turn ends.
        Returns what the agent is told; refused unless the session runs."""
        live = self.live(session_id)
        if live.session.state is not CoderState.RUNNING:
            raise CorralError(
                f"{label(session_id)} is not running (state: {live.session.state.value}): "
                "there is no task to report impossible"
            )
        text = impossible_reason(reason)
        live.impossible = text
        live.session.impossible_report = text  # a restart asks the operator again
        self.persist(live)
        self.emit(
            live,
            PlanTextData(text=f"The agent says the task cannot be done as specified: {text}"),
        )
        self.notify(session_id)
        return (
            "recorded: when you stop, corral asks the operator (nothing is verified or sent "
            "back for repair until they answer). Stop now."
        )

    def note_agent_hook(self, session_id: str, event: dict[str, object]) -> None:
        """Keep the agent's own session identity from its hooks, stored at once
        (a restart needs it to resume the conversation). An `impossible` hook
        is the agent's report that the task cannot be done as specified."""
        live = self._live.get(session_id)
        if live is None:
            return
        if event.get("hook_event_name") == IMPOSSIBLE_HOOK:
            reason = event.get("reason") or event.get("raw") or ""
            with contextlib.suppress(CorralError):  # not running: nothing to report on
                self.note_impossible(session_id, str(reason))
            return
        agent = str((live.session.pane or {}).get("agent") or live.session.engine)
        agent = agent.removeprefix("external:")
        locate = None
        with contextlib.suppress(AgentUnavailable):
            profile = profile_for(agent)
            if profile.locates_conversations:
                # where this session's agent keeps it: its own provider home
                env = session_env(agent, agents_dir(self.state_dir) / session_id, os.environ)
                locate = functools.partial(profile.conversation_file, env=env)
        if note_hook(live.session, agent, event, locate):
            self.persist(live)

    def note_reported_usage(self, session_id: str, model: str, use: TokenUse) -> None:
        """An engine's report of its agent's tokens so far (an ACP agent's
        `usage`): shown at once, priced and stored by the usage watch."""
        live = self._live.get(session_id)
        if live is None or live.session.agent_usage.get(model) == use:
            return
        live.session.agent_usage[model] = use
        self.board.notify(session_id)

    def note_agent_status(self, session_id: str, reading: StatusReading) -> None:
        """The pane manager's reading of what the agent is doing."""
        live = self._live.get(session_id)
        if live is None:
            return
        before, live.agent_status = live.agent_status, reading
        if _same_outage(before, reading):
            # its reason only counts down to the next reconnect: the board shows
            # that; the journal keeps the change of state and the recovery, once each
            self.board.notify(session_id)
            return
        question = reading.question
        self.emit(
            live,
            AgentStatusData(
                status=reading.status,
                reason=reading.reason,
                source=reading.source,
                question=question.prompt if question else None,
            ),
        )
        limit = self.config.context_refresh_after_active_secs
        if live.active_context.observe(live.session, reading.status, self.clock(), limit):
            self.emit(
                live,
                PlanTextData(text=refresh_due_notice(session_id, live.session.active_context_secs)),
            )
            try:  # stored now: a restart neither repeats the notice nor loses the count
                self.persist(live)
            except Exception as exc:
                log.warning("could not store %s's active-time count: %s", session_id, exc)
        self.board.notify(session_id)

    def _observe(self, live: LiveSession, event: CoderEvent) -> None:
        if live.attention.observe(event):
            self.board.notify(live.id)

    # -- tasks ----------------------------------------------------------------------------

    def spawn(self, live: LiveSession, coro: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        """A supervisor-owned task for one session: a caller that goes away never
        cancels it; cancel and close do."""
        task = asyncio.get_running_loop().create_task(coro)
        live.ops.add(task)
        task.add_done_callback(live.ops.discard)
        task.add_done_callback(_retrieve)
        return task

    def spawn_background(self, coro: Coroutine[Any, Any, object]) -> None:
        """Housekeeping no caller waits for (stopping a pane, removing worktrees)."""
        task = asyncio.get_running_loop().create_task(coro)
        task.add_done_callback(_retrieve)

    # -- looking sessions up -------------------------------------------------------------

    def get_live(self, session_id: str) -> LiveSession | None:
        return self._live.get(session_id)

    def live(self, session_id: str) -> LiveSession:
        """The live session, or the sentence saying why there is none."""
        live = self._live.get(session_id)
        if live is not None:
            return live
        row = self.summary(session_id)
        if row is None:
            raise CorralError(f"no corral session '{session_id}'")
        raise CorralError(not_live_message(session_id, row.state))

    def stored(self, session_id: str) -> CoderSession | None:
        """The latest snapshot of any known session, live or not (a finished
        one listed at start-up is parsed now, once)."""
        session = self._stored.get(session_id)
        if session is None and session_id in self._rows and self.store is not None:
            session = self.store.load_session(session_id)
            if session is not None:
                self._stored[session_id] = session
                del self._rows[session_id]
        return session

    def is_live(self, session_id: str) -> bool:
        return session_id in self._live

    def live_ids(self) -> set[str]:
        return set(self._live)

    def stored_sessions(self) -> list[CoderSession]:
        """Every stored session in full (parses those not parsed yet)."""
        for sid in list(self._rows):
            self.stored(sid)
        return list(self._stored.values())

    def stored_refs(self) -> list[StoredRef]:
        """Every stored session's id, state and last update (retention's view),
        without parsing any."""
        refs = [StoredRef(s.id, s.state, s.updated_at) for s in self._stored.values()]
        refs += [StoredRef(r.session_id, r.state, r.updated_at) for r in self._rows.values()]
        return refs

    def summary(self, session_id: str) -> SessionSummary | None:
        """The board row of one session: live rows may offer actions, stored ones never."""
        live = self._live.get(session_id)
        if live is not None:
            row = live_summary(live)
            owed, awaited = (
                self.mailboxes.owed_by(session_id),
                self.mailboxes.awaited_by(session_id),
            )
            if owed or awaited:
                row = row.model_copy(update={"replies_owed": owed, "replies_awaited": awaited})
            return row
        stored = self._stored.get(session_id)
        if stored is not None:
            return stored_summary(stored)
        return self._rows.get(session_id)

    def summaries(self) -> list[SessionSummary]:
        """Every board row, most recently updated first."""
        rows = [self.summary(sid) for sid in self._stored]
        rows += self._rows.values()
        return sorted((r for r in rows if r), key=lambda r: r.updated_at, reverse=True)

    def detail(self, session_id: str) -> SessionDetail:
        """One session in full; only a live one may offer an action."""
        live = self._live.get(session_id)
        if live is None:
            stored = self.stored(session_id)
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
        row = live_summary(live)
        return SessionDetail(
            session=live.session,
            live=True,
            next_seq=live.log.next_seq,
            steering_available=row.steering_available,
            question_prompt=row.question_prompt,
            question_options=list(live.question.options) if live.question.is_pending else [],
            needs_you=row.needs_you,
            needs_you_label=row.needs_you_label,
            auth_message=row.auth_message,
            agent_status=row.agent_status,
            agent_reason=row.agent_reason,
            agent_source=row.agent_source,
        )

    def subscribe(
        self, session_id: str, from_seq: int = 0
    ) -> tuple[SubscribeResult, Subscription[CoderEvent] | None]:
        """Replay from `from_seq` and register for what follows, atomically; a
        stored session has no event stream, only its state."""
        live = self._live.get(session_id)
        if live is None:
            row = self.summary(session_id)
            if row is None:
                raise CorralError(f"no corral session '{session_id}'")
            return SubscribeResult(
                state=row.state,
                events_replayed=0,
                events_skipped=0,
                live=False,
                replay_available=False,
            ), None
        sub, replayed, skipped = live.log.subscribe(from_seq)
        return SubscribeResult(
            state=live.session.state,
            events_replayed=replayed,
            events_skipped=skipped,
            live=True,
            replay_available=True,
        ), sub

    async def wait_for(
        self,
        session_id: str,
        states: set[CoderState] | None = None,
        *,
        needs: bool = False,
        timeout: float | None = 30,
    ) -> SessionSummary:
        """Wait until a session reaches one of `states` (or, with `needs`, needs
        the operator, or is terminal), watching the board feed."""

        def done(row: SessionSummary | None) -> bool:
            if row is None:
                return False
            if states and row.state in states:
                return True
            return needs and (row.needs_you is not None or row.state.is_terminal)

        watcher = self.board.register()
        try:
            row = self.summary(session_id)
            async with asyncio.timeout(timeout):
                while not done(row):
                    for changed in await watcher.get():
                        if changed.session_id == session_id:
                            row = changed
            assert row is not None
            return row
        finally:
            self.board.unregister(watcher)

    def journal_path(self, session_id: str) -> Path:
        return self.state_dir / "journals" / f"{session_id}.events.jsonl"

    def history(self, session_id: str, limit: int = HISTORY_LIMIT) -> list[CoderEvent]:
        """A session's journal as written, its last `limit` events: what a
        session that is not live (stored, finished, dormant) did."""
        if session_id not in self._stored:
            raise CorralError(f"no corral session '{session_id}'")
        return read_journal(self.journal_path(session_id), session_id=session_id)[-limit:]

    # -- leaving memory and disk ------------------------------------------------------------

    def forget_finished(self) -> list[str]:
        """Drop finished sessions from memory after the retention window, only
        when their snapshot is stored and no task of theirs is still running.
        They stay listed, as stored rows."""
        now = self.clock()
        store = self._require_store()
        gone: list[str] = []
        for sid, live in list(self._live.items()):
            s = live.session
            if live.task_running or live.ops:
                continue
            if not collectable_by_age(
                s.state.is_terminal, s.updated_at, now, self.config.finished_retention_secs
            ):
                continue
            if store.load_session(sid) is None:
                continue
            live.log.close()
            del self._live[sid]
            gone.append(sid)
        return gone

    def forget(self, session_id: str) -> None:
        """Delete one finished session for good (the operator's delete): out
        of memory, the store and its journal; every board resyncs without it."""
        live = self._live.pop(session_id, None)
        if live is not None:
            live.log.close()
        self.forget_stored([session_id])
        self.board.resync()

    def forget_stored(self, session_ids: list[str]) -> None:
        """Delete stored sessions and their journals for good."""
        if not session_ids:
            return
        self._require_store().delete_sessions(session_ids)
        for sid in session_ids:
            self._stored.pop(sid, None)
            self._rows.pop(sid, None)
            self.journal_path(sid).unlink(missing_ok=True)

    def _require_store(self) -> Store:
        if self.store is None:
            raise CorralError("the supervisor is not open: call open() first")
        return self.store


def _same_outage(before: StatusReading | None, now: StatusReading) -> bool:
    """Whether `now` only restates an outage `before` already reported."""
    return (
        before is not None
        and before.status is AgentStatus.UNREACHABLE
        and now.status is AgentStatus.UNREACHABLE
        and before.source == now.source
    )
