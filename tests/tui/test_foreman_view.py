"""A foreman session in the console: one board row with its progress, and in
the session view its split (gate 1), then its placements as a small tree."""

from __future__ import annotations

from textual.content import Content

from corral.supervisor.models import (
    CoderSession,
    ForemanView,
    Placement,
    SessionDetail,
    Split,
    Subtask,
)
from corral.supervisor.session.summaries import stored_summary
from corral.supervisor.states import CoderState
from corral.tui import rows as R
from corral.tui.screens.session import foreman_tree


def session(state: CoderState, **kw: object) -> CoderSession:
    return CoderSession(
        id="0123456789abcdef", repo="/r", intent="x", state=state, engine="foreman:demo", **kw
    )


def detail(s: CoderSession, view: ForemanView | None) -> SessionDetail:
    return SessionDetail(
        session=s,
        live=True,
        next_seq=0,
        steering_available=False,
        question_prompt=None,
        needs_you=None,
        needs_you_label=None,
        foreman=view,
    )


def plain(shown: Content) -> str:
    """What the tree shows (it is built as text, never parsed from markup)."""
    return shown.plain


def test_the_board_row_of_a_foreman_session_counts_its_verified_subtasks() -> None:
    s = session(CoderState.RUNNING, foreman_progress="3/5 subtasks verified")
    row = stored_summary(s).model_copy(update={"live": True})
    assert R.state_text(row).plain == "working · 3/5 subtasks verified"
    assert (
        R.state_text(
            stored_summary(session(CoderState.RUNNING)).model_copy(update={"live": True})
        ).plain
        == "working"
    )


def test_gate_one_shows_the_split_and_how_to_replace_it() -> None:
    split = Split(
        subtasks=[
            Subtask(id="s1", intent="set module a\nmore", files=["mod_a/"], checks=["a"]),
            Subtask(id="s2", intent="set module b", checks=["b", "c"]),
        ],
        proposed_by="model m",
    )
    text = plain(
        foreman_tree(detail(session(CoderState.CONTRACT_PROPOSED), ForemanView(split=split)))
    )
    assert text.splitlines() == [
        "Split (model m): runs in parallel once the contract is confirmed; replace it with "
        "`corral split 89abcdef FILE`",
        "├─ s1 — set module a [mod_a/] · checks: a",
        "└─ s2 — set module b · checks: b, c",
    ]


def test_after_the_run_the_view_shows_each_placement_and_its_result() -> None:
    rows = [
        Placement(
            session_id="p",
            subtask="s1",
            position=0,
            child_id="p-s1",
            worktree="/w/corral-1",
            result="integrated",
            files=["mod_a/value.txt"],
        ),
        Placement(
            session_id="p",
            subtask="s2",
            position=1,
            child_id="p-s2",
            worktree="/w/corral-2",
            result="failed",
            reason="external agent 'custom' failed: exit 3",
            attempt=2,
            first_reason="external agent 'custom' failed: exit 3",
            first_worktree="/w/corral-2a",
        ),
    ]
    s = session(CoderState.NEEDS_APPROVAL, foreman_progress="1/2 subtasks verified")
    text = plain(foreman_tree(detail(s, ForemanView(placements=rows))))
    assert text.splitlines() == [
        "Foreman: 1/2 subtasks verified",
        "├─ s1 · local · corral-1 · integrated (mod_a/value.txt)",
        "└─ s2 · local · corral-2 · failed — external agent 'custom' failed: exit 3 · "
        "attempt 2 (the first failed: external agent 'custom' failed: exit 3)",
    ]
    assert foreman_tree(detail(session(CoderState.RUNNING), None)) == ""  # not a foreman session
