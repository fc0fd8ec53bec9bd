"""The state machine, `needs_you`, failure kinds and the gate sentences."""

from __future__ import annotations

import itertools

import pytest

from corral.supervisor.states import (
    LEGAL_TRANSITIONS,
    NEEDS_YOU_LABELS,
    TERMINAL_STATES,
    ApprovalKind,
    CoderState,
    FailureKind,
    IllegalTransition,
    LoopFailure,
    NeedsYou,
    already_happened,
    can_transition,
    failure_kind_for,
    fallback_allowed,
    label,
    needs_you,
    needs_you_label,
    not_live_message,
    short_id,
)

S = CoderState
SID = "65f1a2b3c4d5e6f7a8b9c0d1deadbeef"
NAME = "corral-deadbeef"


# --- transitions --------------------------------------------------------------

EXPECTED_EDGES = {
    (S.CREATED, S.CONTRACT_PROPOSED),
    (S.CREATED, S.FAILED),
    (S.CREATED, S.ABANDONED),
    (S.CONTRACT_PROPOSED, S.CONTRACT_PROPOSED),  # a successful revise
    (S.CONTRACT_PROPOSED, S.CONTRACT_CONFIRMED),
    (S.CONTRACT_PROPOSED, S.FAILED),
    (S.CONTRACT_PROPOSED, S.ABANDONED),
    (S.CONTRACT_CONFIRMED, S.RUNNING),
    (S.CONTRACT_CONFIRMED, S.FAILED),
    (S.CONTRACT_CONFIRMED, S.ABANDONED),
    (S.RUNNING, S.NEEDS_APPROVAL),
    (S.RUNNING, S.FAILED),
    (S.RUNNING, S.ABANDONED),
    (S.RUNNING, S.CONTRACT_PROPOSED),  # the agent said impossible; the operator revises
    (S.NEEDS_APPROVAL, S.MERGED),
    (S.NEEDS_APPROVAL, S.REPORTED),
    (S.NEEDS_APPROVAL, S.ABANDONED),
    (S.NEEDS_APPROVAL, S.FAILED),
    (S.NEEDS_APPROVAL, S.RUNNING),  # kept in the model for follow-ups
}


def test_legal_transitions_are_exactly_the_seed_edges() -> None:
    actual = {(src, dst) for src in S for dst in S if can_transition(src, dst)}
    assert actual == EXPECTED_EDGES
    assert set(LEGAL_TRANSITIONS) == set(S)


@pytest.mark.parametrize("src,dst", sorted(EXPECTED_EDGES))
def test_each_legal_edge_is_allowed(src: CoderState, dst: CoderState) -> None:
    assert can_transition(src, dst)


@pytest.mark.parametrize(
    "src,dst",
    [
        (S.CREATED, S.RUNNING),
        (S.CREATED, S.NEEDS_APPROVAL),
        (S.CONTRACT_PROPOSED, S.RUNNING),  # confirm always passes through confirmed
        (S.RUNNING, S.MERGED),  # delivery only from the approval gate
        (S.CONTRACT_CONFIRMED, S.CONTRACT_PROPOSED),
    ],
)
def test_illegal_edges_are_refused(src: CoderState, dst: CoderState) -> None:
    assert not can_transition(src, dst)


def test_only_the_four_terminal_states_are_terminal() -> None:
    assert {s for s in S if s.is_terminal} == {S.MERGED, S.REPORTED, S.FAILED, S.ABANDONED}
    assert frozenset({S.MERGED, S.REPORTED, S.FAILED, S.ABANDONED}) == TERMINAL_STATES
    for s in (S.CREATED, S.CONTRACT_PROPOSED, S.CONTRACT_CONFIRMED, S.RUNNING, S.NEEDS_APPROVAL):
        assert not s.is_terminal


@pytest.mark.parametrize("terminal", sorted(TERMINAL_STATES))
def test_terminal_states_are_absorbing(terminal: CoderState) -> None:
    assert LEGAL_TRANSITIONS[terminal] == frozenset()
    for dst in S:
        assert not can_transition(terminal, dst)


def test_non_terminal_states_all_have_an_exit() -> None:
    for s in S:
        if not s.is_terminal:
            assert LEGAL_TRANSITIONS[s], s
            # every non-terminal state can be abandoned or failed
            assert S.ABANDONED in LEGAL_TRANSITIONS[s] or S.FAILED in LEGAL_TRANSITIONS[s]


def test_illegal_transition_names_both_states() -> None:
    exc = IllegalTransition(S.MERGED, S.RUNNING)
    assert str(exc) == "illegal transition merged -> running"
    assert (exc.src, exc.dst) == (S.MERGED, S.RUNNING)


def test_wire_strings() -> None:
    assert [s.value for s in S] == [
        "created",
        "contract_proposed",
        "contract_confirmed",
        "running",
        "needs_approval",
        "merged",
        "reported",
        "failed",
        "abandoned",
    ]


# --- needs_you ----------------------------------------------------------------


def test_needs_you_values_and_labels() -> None:
    assert {n.value for n in NeedsYou} == {"contract", "question", "auth", "finding", "merge"}
    assert NEEDS_YOU_LABELS == {
        NeedsYou.CONTRACT: "contract awaiting confirmation",
        NeedsYou.QUESTION: "question waiting for your answer",
        NeedsYou.AUTH: "sign-in needed",
        NeedsYou.FINDING: "finding ready for review",
        NeedsYou.MERGE: "diff ready for approval",
    }
    assert needs_you_label(None) is None
    for value, text in NEEDS_YOU_LABELS.items():
        assert needs_you_label(value) == text


def test_needs_you_from_the_state_gate() -> None:
    assert needs_you(S.CONTRACT_PROPOSED, live=True) is NeedsYou.CONTRACT
    assert (
        needs_you(S.NEEDS_APPROVAL, live=True, approval_kind=ApprovalKind.MERGE) is NeedsYou.MERGE
    )
    assert (
        needs_you(S.NEEDS_APPROVAL, live=True, approval_kind=ApprovalKind.FINDING)
        is NeedsYou.FINDING
    )
    # the gate is folded from events, never inferred from the state alone
    assert needs_you(S.NEEDS_APPROVAL, live=True) is None
    for quiet in (S.CREATED, S.CONTRACT_CONFIRMED, S.RUNNING):
        assert needs_you(quiet, live=True) is None


def test_needs_you_precedence_question_then_auth_then_gate() -> None:
    for state in (S.CREATED, S.CONTRACT_PROPOSED, S.RUNNING, S.NEEDS_APPROVAL):
        assert (
            needs_you(
                state,
                live=True,
                question_pending=True,
                auth_outstanding=True,
                approval_kind=ApprovalKind.MERGE,
            )
            is NeedsYou.QUESTION
        )
        assert (
            needs_you(state, live=True, auth_outstanding=True, approval_kind=ApprovalKind.FINDING)
            is NeedsYou.AUTH
        )


@pytest.mark.parametrize("state", list(S))
def test_needs_you_is_never_set_for_a_non_live_session(state: CoderState) -> None:
    for question, auth, kind in itertools.product(
        (False, True), (False, True), (None, ApprovalKind.MERGE, ApprovalKind.FINDING)
    ):
        assert (
            needs_you(
                state,
                live=False,
                question_pending=question,
                auth_outstanding=auth,
                approval_kind=kind,
            )
            is None
        )


@pytest.mark.parametrize("state", sorted(TERMINAL_STATES))
def test_needs_you_is_never_set_for_a_terminal_session(state: CoderState) -> None:
    assert (
        needs_you(
            state,
            live=True,
            question_pending=True,
            auth_outstanding=True,
            approval_kind=ApprovalKind.MERGE,
        )
        is None
    )


# --- failure kinds --------------------------------------------------------------


@pytest.mark.parametrize(
    "failure,budget,auth,expected",
    [
        (LoopFailure.BUDGET_EXHAUSTED, False, False, FailureKind.BUDGET_EXHAUSTED),
        (LoopFailure.NEEDS_AUTH, False, False, FailureKind.AUTH_REQUIRED),
        (LoopFailure.CONFIGURATION, False, False, FailureKind.CONFIGURATION),
        (LoopFailure.INFRASTRUCTURE, False, False, FailureKind.INFRASTRUCTURE),
        (LoopFailure.ENGINE_UNAVAILABLE, False, False, FailureKind.INFRASTRUCTURE),
        (LoopFailure.EXECUTION, False, False, FailureKind.ERROR),
        (LoopFailure.VERIFICATION, False, False, FailureKind.ERROR),
        (LoopFailure.CANCELLED, False, False, FailureKind.ERROR),
        (None, False, False, FailureKind.ERROR),
        # flags are a backstop, in the same precedence
        (None, True, False, FailureKind.BUDGET_EXHAUSTED),
        (None, False, True, FailureKind.AUTH_REQUIRED),
        (None, True, True, FailureKind.BUDGET_EXHAUSTED),
        (LoopFailure.VERIFICATION, True, False, FailureKind.BUDGET_EXHAUSTED),
        (LoopFailure.EXECUTION, False, True, FailureKind.AUTH_REQUIRED),
        # budget beats auth beats configuration beats infrastructure
        (LoopFailure.NEEDS_AUTH, True, False, FailureKind.BUDGET_EXHAUSTED),
        (LoopFailure.CONFIGURATION, False, True, FailureKind.AUTH_REQUIRED),
        (LoopFailure.CONFIGURATION, True, True, FailureKind.BUDGET_EXHAUSTED),
        (LoopFailure.INFRASTRUCTURE, False, True, FailureKind.AUTH_REQUIRED),
        (LoopFailure.ENGINE_UNAVAILABLE, True, False, FailureKind.BUDGET_EXHAUSTED),
        (LoopFailure.BUDGET_EXHAUSTED, False, True, FailureKind.BUDGET_EXHAUSTED),
    ],
)
def test_failure_kind_for_table(
    failure: LoopFailure | None, budget: bool, auth: bool, expected: FailureKind
) -> None:
    assert failure_kind_for(failure, budget_flag=budget, auth_flag=auth) is expected


def test_failure_kind_for_covers_every_loop_failure() -> None:
    expected = {
        LoopFailure.BUDGET_EXHAUSTED: FailureKind.BUDGET_EXHAUSTED,
        LoopFailure.NEEDS_AUTH: FailureKind.AUTH_REQUIRED,
        LoopFailure.CONFIGURATION: FailureKind.CONFIGURATION,
        LoopFailure.INFRASTRUCTURE: FailureKind.INFRASTRUCTURE,
        LoopFailure.ENGINE_UNAVAILABLE: FailureKind.INFRASTRUCTURE,
        LoopFailure.EXECUTION: FailureKind.ERROR,
        LoopFailure.VERIFICATION: FailureKind.ERROR,
        LoopFailure.CANCELLED: FailureKind.ERROR,
    }
    assert set(expected) == set(LoopFailure)
    for failure, kind in expected.items():
        assert failure_kind_for(failure) is kind
    assert {k.value for k in FailureKind} == {
        "budget_exhausted",
        "auth_required",
        "configuration",
        "infrastructure",
        "error",
    }


@pytest.mark.parametrize("failure", [*LoopFailure, None])
@pytest.mark.parametrize("explicit", [False, True])
def test_fallback_allowed_table(failure: LoopFailure | None, explicit: bool) -> None:
    expected = failure is LoopFailure.ENGINE_UNAVAILABLE and not explicit
    assert fallback_allowed(failure, explicit=explicit) is expected


# --- gate sentences -------------------------------------------------------------


def test_labels_use_the_last_eight_characters() -> None:
    assert short_id(SID) == "deadbeef"
    assert label(SID) == NAME
    assert label("abc") == "corral-abc"


@pytest.mark.parametrize("action", ["confirm", "approve", "revise", "cancel"])
@pytest.mark.parametrize("gate", [S.CONTRACT_PROPOSED, S.NEEDS_APPROVAL, S.RUNNING])
def test_already_happened_after_merge(action: str, gate: CoderState) -> None:
    assert (
        already_happened(SID, S.MERGED, gate, action)
        == f"{NAME} was already delivered — nothing left to {action}"
    )


@pytest.mark.parametrize("state", [S.REPORTED, S.FAILED, S.ABANDONED])
@pytest.mark.parametrize("action", ["confirm", "approve", "revise", "cancel"])
def test_already_happened_after_other_terminals(state: CoderState, action: str) -> None:
    for gate in (S.CONTRACT_PROPOSED, S.NEEDS_APPROVAL, S.RUNNING):
        assert (
            already_happened(SID, state, gate, action)
            == f"{NAME} already finished (state: {state.value}) — nothing to {action}"
        )


@pytest.mark.parametrize("state", [S.CONTRACT_CONFIRMED, S.RUNNING, S.NEEDS_APPROVAL])
@pytest.mark.parametrize("action", ["confirm", "revise"])
def test_already_happened_past_the_contract_gate(state: CoderState, action: str) -> None:
    assert (
        already_happened(SID, state, S.CONTRACT_PROPOSED, action)
        == f"contract already confirmed for {NAME} (state: {state.value})"
    )


def test_already_happened_not_ready_yet() -> None:
    assert (
        already_happened(SID, S.CONTRACT_PROPOSED, S.NEEDS_APPROVAL, "approve")
        == f"{NAME} is not ready to approve yet (state: contract_proposed, expected needs_approval)"
    )
    assert (
        already_happened(SID, S.CREATED, S.CONTRACT_PROPOSED, "confirm")
        == f"{NAME} is not ready to confirm yet (state: created, expected contract_proposed)"
    )
    assert (
        already_happened(SID, S.RUNNING, S.NEEDS_APPROVAL, "approve")
        == f"{NAME} is not ready to approve yet (state: running, expected needs_approval)"
    )


def test_not_live_message() -> None:
    assert not_live_message(SID, None) == f"no live corral session '{SID}'"
    assert not_live_message(SID, S.MERGED) == f"{NAME} was already delivered"
    for state in (S.REPORTED, S.FAILED, S.ABANDONED):
        assert not_live_message(SID, state) == f"{NAME} already finished (state: {state.value})"
    for state in (S.CREATED, S.CONTRACT_PROPOSED, S.RUNNING, S.NEEDS_APPROVAL):
        assert (
            not_live_message(SID, state)
            == f"{NAME} did not survive a restart as a live session (state: {state.value})"
        )
