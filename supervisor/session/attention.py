"""Attention folded from a session's events.

`observe` says whether the board should get a fresh summary. Narration (plan
text, tool calls, per-check progress) never does; anything that changes what
the operator should do does. Any event except `auth_required` and the
agent's own status readings clears an outstanding sign-in request, and that
clearing fans out too (a signed-out agent's screen keeps changing; only a
sign of progress, which the engine reports, ends the request).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..events import SHELL_WRITE, BlockedData, BoundaryData, CoderEvent, ModelFallbackData
from ..models import EventKind
from ..states import ApprovalKind

FANS_OUT: frozenset[EventKind] = frozenset(
    {
        EventKind.CONTRACT_PROPOSED,
        EventKind.CONTRACT_REVISION_REJECTED,
        EventKind.AUTH_REQUIRED,
        EventKind.ITERATION_STARTED,
        EventKind.USER_INPUT_REQUESTED,
        EventKind.USER_INPUT_EXPIRED,
        EventKind.DIFF_READY,
        EventKind.FINDING_PROPOSED,
        EventKind.MERGE_COMPLETED,
        EventKind.BUDGET_EXHAUSTED,
        EventKind.ERROR,
        EventKind.STATE_CHANGED,
    }
)


@dataclass
class AttentionState:
    auth_message: str | None = None
    auth_wait_secs: int | None = None
    budget_exhausted: bool = False
    approval_kind: ApprovalKind | None = None
    iteration: int = 0
    model_notice: str | None = None  # a rejected key and who answered instead
    boundary_notice: str | None = None  # the last thing an agent tried that needs a person
    # the approval gate's sentence for an approve it refused (a judge change,
    # a flaky pass): what is held for a person and the command that accepts it
    held: str | None = None

    @property
    def auth_outstanding(self) -> bool:
        return self.auth_message is not None

    def observe(self, event: CoderEvent) -> bool:
        kind = event.kind
        had_auth = self.auth_message is not None
        if kind is EventKind.AGENT_STATUS:
            return False
        if isinstance(event.data, ModelFallbackData):  # not progress: a sign-in request stays
            if not event.data.notice:
                return False
            self.model_notice = event.data.sentence()
            return True
        if isinstance(event.data, BoundaryData):  # an attempt, not progress: nothing clears
            self.boundary_notice = event.data.message
            return True
        if isinstance(event.data, BlockedData) and event.data.what.startswith(SHELL_WRITE):
            # the agent believes it wrote there: the board says it did not
            self.boundary_notice = f"blocked: {event.data.what} (contained by corral's sandbox)"
            return True
        if event.kind is EventKind.AUTH_REQUIRED:
            self.auth_message = event.data.message
            self.auth_wait_secs = event.data.wait_secs
            return True
        self.auth_message = None
        self.auth_wait_secs = None
        if event.kind is EventKind.ITERATION_STARTED:
            self.iteration = max(self.iteration, event.data.n)
        elif kind is EventKind.DIFF_READY:
            self.approval_kind = ApprovalKind.MERGE
            self.held = None  # a new verification: judged afresh
        elif kind is EventKind.FINDING_PROPOSED:
            self.approval_kind = ApprovalKind.FINDING
            self.held = None
        elif kind is EventKind.BUDGET_EXHAUSTED:
            self.budget_exhausted = True
        return had_auth or kind in FANS_OUT
