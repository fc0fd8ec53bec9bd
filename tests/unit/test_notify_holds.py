"""The notifier's edge rule for the approval gate's holds: an approve decided
ahead (`corral run --deliver`) that the gate refuses (a judge change, a flaky
pass) leaves a session that needs a person about something nobody decided,
so the hold is heard once, with the gate's sentence as the reason; a hold on
a diff the operator was already told about (their own refused approve), a
repaint of the same hold and a hold already so when watching starts are not.
On the old rule a decided-ahead need stayed silent whatever came after it."""

from __future__ import annotations

from corral.supervisor.models import SessionSummary
from corral.supervisor.notify import NEEDS_YOU, Edges
from corral.supervisor.states import CoderState, NeedsYou, needs_you_label

SID = "0123456789abcdef"
HOLD = "held: check tests passed only on a re-run; `corral approve 01234567 --accept-flaky` …"


def _row(
    state: CoderState = CoderState.RUNNING,
    needs: NeedsYou | None = None,
    held: str | None = None,
) -> SessionSummary:
    return SessionSummary(
        session_id=SID, label="corral-01234567", state=state, intent="make add faster",
        repo="/r", engine="external:claude", requested_engine=None, engine_ran=None,
        authored_by=[], iterations=0, max_iterations=8, created_at=0, updated_at=0,
        live=True, error=None, needs_you=needs, needs_you_label=held or needs_you_label(needs),
        steering_available=False, question_prompt=None, auth_message=None,
        auth_wait_secs=None, failure_kind=None, worktree=None, result_branch=None,
        result_commit=None, model=None, discussion_id=None, next_seq=None, approval_held=held,
    )  # fmt: skip


WAITING = _row(CoderState.NEEDS_APPROVAL, NeedsYou.MERGE)
HELD = _row(CoderState.NEEDS_APPROVAL, NeedsYou.MERGE, HOLD)


def _decided() -> Edges:
    edges = Edges()
    edges.baseline([])
    edges.decided_ahead(SID, {NeedsYou.CONTRACT.value, NeedsYou.MERGE.value})
    assert edges.observe(_row()) is None
    return edges


def test_a_hold_on_an_approve_decided_ahead_is_heard_once_with_its_sentence() -> None:
    edges = _decided()
    assert edges.observe(WAITING) is None  # decided ahead: the approve is on its way
    notice = edges.observe(HELD)
    assert notice is not None and notice.kind == NEEDS_YOU
    assert notice.needs_you == "merge" and notice.needs_you_label == HOLD
    assert notice.environment()["CORRAL_NEEDS_YOU_REASON"] == HOLD
    assert "--accept-flaky" in notice.body
    assert edges.observe(HELD) is None  # a repaint of the same hold


def test_a_hold_that_arrives_with_the_need_in_one_push_is_heard_too() -> None:
    edges = _decided()
    notice = edges.observe(HELD)  # the watcher coalesced the gate and its hold
    assert notice is not None and notice.needs_you_label == HOLD


def test_a_hold_on_a_diff_the_operator_was_told_about_is_their_own_refusal() -> None:
    edges = Edges()
    edges.baseline([])
    edges.observe(_row())
    told = edges.observe(WAITING)
    assert told is not None and told.needs_you_label == needs_you_label(NeedsYou.MERGE)
    assert edges.observe(HELD) is None


def test_a_hold_already_so_when_watching_starts_is_no_news() -> None:
    edges = Edges()
    edges.baseline([HELD])
    edges.decided_ahead(SID, {NeedsYou.MERGE.value})
    assert edges.observe(HELD) is None


def test_a_second_hold_after_the_first_was_heard_is_no_news() -> None:
    edges = _decided()
    edges.observe(WAITING)
    assert edges.observe(HELD) is not None
    other = _row(CoderState.NEEDS_APPROVAL, NeedsYou.MERGE, HOLD.replace("flaky", "judge"))
    assert edges.observe(other) is None  # they were told it needs them; the row says the rest
