"""A session whose agent worked past `context_refresh_after_active_secs`
says so on its board row, below anything that needs the operator now."""

from __future__ import annotations

from corral.supervisor.models import CoderSession, SessionSummary
from corral.supervisor.session.summaries import stored_summary
from corral.supervisor.states import CoderState
from corral.tui.rows import needs_text


def row(**update: object) -> SessionSummary:
    session = CoderSession(id="s1", repo="/r", intent="x", state=CoderState.RUNNING)
    return stored_summary(session).model_copy(update={"live": True, **update})


def test_a_row_says_a_fresh_context_is_due() -> None:
    assert needs_text(row()).plain == ""
    due = needs_text(row(context_refresh_due=True)).plain
    assert due == "fresh context due: long active work (see its log)"
    # a question is the operator's first: it is shown instead
    asked = row(context_refresh_due=True, needs_you="question", question_prompt="Which one?")
    assert needs_text(asked).plain == "question: Which one?"
    # a finished session owes nothing
    ended = row(context_refresh_due=True, state=CoderState.MERGED)
    assert needs_text(ended).plain == ""
