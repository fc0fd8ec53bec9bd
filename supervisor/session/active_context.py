"""How long a session's agent has been actively working, and when a fresh
context is due.

An agent's context grows with every turn it works; past some amount of work
its answers get slower, costlier and vaguer, and a fresh start on the same
worktree (cancel, then `corral retry --keep-edits`: a new agent, the old
edits) serves better. The operator sets that amount (`context_refresh_after_active_secs`, 0
= never). Time counts only while the agent reads `running`; when the total
reaches the limit, the notice is given once, at the next moment the agent is
idle at its prompt (a turn ended: a safe boundary, nothing half done), never
mid-turn and never while it waits on a question.

Departure from the seed (ouija's "refresh due" notice, which the agent gets
and acts on by restarting itself): here the notice is the operator's — on the
session's log and its row (`context_refresh_due`) — because an agent does
not restart itself in corral and corral never types into an agent's pane on
its own; restarting (cancel, then `retry --keep-edits`) is the operator's call. The count
is kept on the session, so a restart of corral does not reset it.
"""

from __future__ import annotations

from ..models import CoderSession
from ..status import AgentStatus


def refresh_due_notice(session_id: str, active_secs: float) -> str:
    return (
        f"this agent has worked {_duration(active_secs)} of active time in one context: a fresh "
        f"start may serve better — cancel it, then `corral retry --keep-edits {session_id}` "
        "starts a new agent on this worktree's edits (said once; nothing was stopped)"
    )


def _duration(secs: float) -> str:
    minutes = int(secs // 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min" if hours else f"{minutes} min"


class ActiveContext:
    """The active-time count of one live session's agent."""

    def __init__(self) -> None:
        self._segment_from: float | None = None  # when the current running stretch began

    def observe(
        self, session: CoderSession, status: AgentStatus, now: float, limit_secs: float
    ) -> bool:
        """Fold one status reading; True exactly once, at the idle reading
        where the notice is due (the caller says it)."""
        if status is AgentStatus.RUNNING:
            if self._segment_from is None:
                self._segment_from = now
            return False
        if self._segment_from is not None:
            session.active_context_secs += max(0.0, now - self._segment_from)
            self._segment_from = None
        if (
            limit_secs <= 0
            or session.context_refresh_due
            or session.active_context_secs < limit_secs
            or status is not AgentStatus.IDLE
        ):
            return False
        session.context_refresh_due = True
        return True
