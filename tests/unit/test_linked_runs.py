"""The rules a discussion's runs decide at its next start: where a follow-up
starts, and whether another run may start at all."""

from __future__ import annotations

import pytest

from corral.supervisor.discuss.linked_runs import (
    SAME_TIMESTAMP,
    UNKNOWN_DELIVERY,
    first_unfinished,
    followup_base_from,
    linked_rows,
    unfinished_work,
)
from corral.supervisor.errors import CorralError
from corral.supervisor.models import CoderSession
from corral.supervisor.states import CoderState


def test_checkout_followup_uses_current_files_but_requires_a_known_delivery() -> None:
    checkout = {"state": "merged", "result_delivery": "checkout", "result_commit": "saved"}
    assert followup_base_from([checkout]) is None  # the checkout's files already hold it
    with pytest.raises(CorralError) as unknown:
        followup_base_from([{"state": "merged", "result_delivery": "checkout"}])
    assert str(unknown.value) == UNKNOWN_DELIVERY
    branch = {"state": "merged", "result_delivery": "branch", "result_commit": "saved"}
    assert followup_base_from([branch]) == "saved"


def test_followup_never_substitutes_head_for_known_work() -> None:
    with pytest.raises(CorralError) as same:
        followup_base_from(
            [
                {"state": "merged", "updated_at": 1, "result_commit": "one"},
                {"state": "merged", "updated_at": 1, "result_commit": "two"},
            ]
        )
    assert str(same.value) == SAME_TIMESTAMP
    with pytest.raises(CorralError, match="predates saved result revisions"):
        followup_base_from([{"state": "merged", "result_branch": "moved"}])
    with pytest.raises(CorralError, match="unfinished changes at /retained"):
        followup_base_from([{"state": "failed", "worktree": "/retained"}])
    rows = [
        {"state": "failed", "worktree": None},
        {"state": "merged", "result_commit": "fixed-revision"},
    ]
    assert followup_base_from(rows) == "fixed-revision"
    assert followup_base_from([]) is None  # nothing delivered: the checkout
    assert followup_base_from([{"state": "reported"}, {"state": "abandoned"}]) is None


def _session(sid: str, state: CoderState, updated_at: float, **kw: object) -> CoderSession:
    return CoderSession(
        id=sid,
        repo="/r",
        intent="x",
        state=state,
        updated_at=updated_at,
        discussion_id="disc-" + "0" * 32,
        **kw,  # type: ignore[arg-type]
    )


def test_the_session_overrides_its_record_and_rows_are_newest_first() -> None:
    recorded = [
        {"session_id": "a", "state": "merged", "updated_at": 5, "result_commit": "old"},
        {"session_id": "gone", "state": "merged", "updated_at": 1, "result_commit": "first"},
        {"session_id": "lost", "state": "running", "updated_at": 9},  # never seen finishing
    ]
    sessions = [_session("a", CoderState.MERGED, 7, result_commit="new", result_delivery="branch")]
    rows = linked_rows(recorded, sessions)
    assert [r["session_id"] for r in rows] == ["a", "gone"]
    assert followup_base_from(rows) == "new"
    assert first_unfinished(rows) is None


def test_an_unfinished_run_is_found_and_named() -> None:
    sessions = [
        _session("1234567890abcdef", CoderState.CONTRACT_PROPOSED, 3),
        _session("b", CoderState.MERGED, 2, result_commit="c"),
    ]
    busy = first_unfinished(linked_rows([], sessions))
    assert busy is not None and busy["state"] == "contract_proposed"
    assert unfinished_work(busy["session_id"], busy["state"]) == (
        "Conversation already has unfinished work in corral-90abcdef (contract_proposed). "
        "Open it from the board to continue or cancel it before starting another task."
    )


def test_a_resumed_run_speaks_for_its_predecessor() -> None:
    sessions = [
        _session("old", CoderState.FAILED, 1),
        _session("new", CoderState.MERGED, 2, resumed_from="old", result_commit="c"),
    ]
    rows = linked_rows([], sessions, {"old": "/kept"})
    assert [r["session_id"] for r in rows] == ["new"]
