"""Session states, legal transitions, the single `needs_you` derivation, failure
kinds and the gate sentences.

Everything a board shows about "what should I do next" comes from here, so two
views can never disagree.
"""

from __future__ import annotations

from enum import StrEnum


class CoderState(StrEnum):
    CREATED = "created"
    CONTRACT_PROPOSED = "contract_proposed"
    CONTRACT_CONFIRMED = "contract_confirmed"
    RUNNING = "running"
    NEEDS_APPROVAL = "needs_approval"
    MERGED = "merged"
    REPORTED = "reported"
    FAILED = "failed"
    ABANDONED = "abandoned"

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL_STATES


TERMINAL_STATES: frozenset[CoderState] = frozenset(
    {CoderState.MERGED, CoderState.REPORTED, CoderState.FAILED, CoderState.ABANDONED}
)

_S = CoderState
# Legal edges. Terminal states have none (absorbing). Revise is a legal
# self-edge on contract_proposed; needs_approval -> running exists in the seed's
# model but the run task has ended by then, so it is kept only for follow-ups.
LEGAL_TRANSITIONS: dict[CoderState, frozenset[CoderState]] = {
    _S.CREATED: frozenset({_S.CONTRACT_PROPOSED, _S.FAILED, _S.ABANDONED}),
    _S.CONTRACT_PROPOSED: frozenset(
        {_S.CONTRACT_PROPOSED, _S.CONTRACT_CONFIRMED, _S.FAILED, _S.ABANDONED}
    ),
    _S.CONTRACT_CONFIRMED: frozenset({_S.RUNNING, _S.FAILED, _S.ABANDONED}),
    # running -> contract_proposed: the agent said the task cannot be done as
    # specified and the operator chose to revise the contract (gate 1 again)
    _S.RUNNING: frozenset({_S.NEEDS_APPROVAL, _S.FAILED, _S.ABANDONED, _S.CONTRACT_PROPOSED}),
    _S.NEEDS_APPROVAL: frozenset({_S.MERGED, _S.REPORTED, _S.ABANDONED, _S.FAILED, _S.RUNNING}),
    _S.MERGED: frozenset(),
    _S.REPORTED: frozenset(),
    _S.FAILED: frozenset(),
    _S.ABANDONED: frozenset(),
}


def can_transition(src: CoderState, dst: CoderState) -> bool:
    return dst in LEGAL_TRANSITIONS[src]


class IllegalTransition(Exception):
    """Raised when a transition is not a legal edge (e.g. leaving a terminal)."""

    def __init__(self, src: CoderState, dst: CoderState) -> None:
        super().__init__(f"illegal transition {src.value} -> {dst.value}")
        self.src = src
        self.dst = dst


class NeedsYou(StrEnum):
    CONTRACT = "contract"
    QUESTION = "question"
    AUTH = "auth"
    FINDING = "finding"
    MERGE = "merge"


NEEDS_YOU_LABELS: dict[NeedsYou, str] = {
    NeedsYou.CONTRACT: "contract awaiting confirmation",
    NeedsYou.QUESTION: "question waiting for your answer",
    NeedsYou.AUTH: "sign-in needed",
    NeedsYou.FINDING: "finding ready for review",
    NeedsYou.MERGE: "diff ready for approval",
}


class ApprovalKind(StrEnum):
    MERGE = "merge"
    FINDING = "finding"


def needs_you(
    state: CoderState,
    *,
    live: bool,
    question_pending: bool = False,
    auth_outstanding: bool = False,
    approval_kind: ApprovalKind | None = None,
) -> NeedsYou | None:
    """The one place that decides whether a session needs the operator.

    A session with no live supervisor entry never advertises an action it
    could not take. Precedence: a pending question, then sign-in, then the
    state's own gate.
    """
    if not live or state.is_terminal:
        return None
    if question_pending:
        return NeedsYou.QUESTION
    if auth_outstanding:
        return NeedsYou.AUTH
    if state is CoderState.CONTRACT_PROPOSED:
        return NeedsYou.CONTRACT
    if state is CoderState.NEEDS_APPROVAL:
        if approval_kind is ApprovalKind.FINDING:
            return NeedsYou.FINDING
        if approval_kind is ApprovalKind.MERGE:
            return NeedsYou.MERGE
    return None


def needs_you_label(value: NeedsYou | None) -> str | None:
    return None if value is None else NEEDS_YOU_LABELS[value]


class FailureKind(StrEnum):
    BUDGET_EXHAUSTED = "budget_exhausted"
    AUTH_REQUIRED = "auth_required"
    CONFIGURATION = "configuration"
    INFRASTRUCTURE = "infrastructure"
    ERROR = "error"


class LoopFailure(StrEnum):
    """Why an engine run ended without success (the typed failure decides)."""

    BUDGET_EXHAUSTED = "budget_exhausted"
    NEEDS_AUTH = "needs_auth"
    CONFIGURATION = "configuration"
    INFRASTRUCTURE = "infrastructure"
    ENGINE_UNAVAILABLE = "engine_unavailable"
    EXECUTION = "execution"
    VERIFICATION = "verification"
    CANCELLED = "cancelled"


def failure_kind_for(
    failure: LoopFailure | None, *, budget_flag: bool = False, auth_flag: bool = False
) -> FailureKind:
    """Seed precedence: budget > auth > configuration > infrastructure > error."""
    if failure is LoopFailure.BUDGET_EXHAUSTED or budget_flag:
        return FailureKind.BUDGET_EXHAUSTED
    if failure is LoopFailure.NEEDS_AUTH or auth_flag:
        return FailureKind.AUTH_REQUIRED
    if failure is LoopFailure.CONFIGURATION:
        return FailureKind.CONFIGURATION
    if failure in (LoopFailure.INFRASTRUCTURE, LoopFailure.ENGINE_UNAVAILABLE):
        return FailureKind.INFRASTRUCTURE
    return FailureKind.ERROR


def fallback_allowed(failure: LoopFailure | None, *, explicit: bool) -> bool:
    """Fall back to the built-in engine only when the agent is unavailable and
    the operator did not name it explicitly."""
    return failure is LoopFailure.ENGINE_UNAVAILABLE and not explicit


# --- gate sentences: what a caller hears when it acts past a gate -----------


def short_id(session_id: str) -> str:
    return session_id[-8:]


def label(session_id: str) -> str:
    """The operator-facing name of a session: `corral-<last 8 of id>`."""
    return f"corral-{short_id(session_id)}"


_CONFIRMED_OR_LATER = frozenset(
    {CoderState.CONTRACT_CONFIRMED, CoderState.RUNNING, CoderState.NEEDS_APPROVAL}
)


# The one word (or two) for each state that every screen and command says to
# a person: board, session header, preview, CLI lines, README. Machine output
# (JSON, the journal, events) keeps the state's name.
STATE_WORDS: dict[CoderState, str] = {
    CoderState.CREATED: "drafting contract",
    CoderState.CONTRACT_PROPOSED: "contract proposed",
    CoderState.CONTRACT_CONFIRMED: "starting",
    CoderState.RUNNING: "working",
    CoderState.NEEDS_APPROVAL: "needs approval",
    CoderState.MERGED: "delivered",
    CoderState.REPORTED: "reported",
    CoderState.FAILED: "failed",
    CoderState.ABANDONED: "abandoned",
}


def said(state: CoderState) -> str:
    """A state as every screen and command says it to a person (`merged` is
    said "delivered": a delivery to the checkout merges nothing)."""
    return STATE_WORDS[state]


def already_happened(session_id: str, state: CoderState, gate: CoderState, action: str) -> str:
    """The sentence for acting past a gate (confirm, approve, revise, cancel)."""
    name = label(session_id)
    if state is CoderState.MERGED:
        return f"{name} was already delivered — nothing left to {action}"
    if state.is_terminal:
        return f"{name} already finished (state: {state.value}) — nothing to {action}"
    if gate is CoderState.CONTRACT_PROPOSED and state in _CONFIRMED_OR_LATER:
        return f"contract already confirmed for {name} (state: {state.value})"
    return f"{name} is not ready to {action} yet (state: {state.value}, expected {gate.value})"


def not_live_message(session_id: str, state: CoderState | None) -> str:
    """Why a stored session that this process is not running cannot act."""
    name = label(session_id)
    if state is None:
        return f"no live corral session '{session_id}'"
    if state is CoderState.MERGED:
        return f"{name} was already delivered"
    if state.is_terminal:
        return f"{name} already finished (state: {state.value})"
    return f"{name} did not survive a restart as a live session (state: {state.value})"
