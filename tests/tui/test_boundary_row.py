"""An agent's refused attempt at a person's gate is something the operator
sees: first on its board row, and as a line of the session's log."""

from __future__ import annotations

from corral.supervisor.events import parse_event
from corral.supervisor.models import CoderSession
from corral.supervisor.session.summaries import stored_summary
from corral.supervisor.states import CoderState, NeedsYou, needs_you_label
from corral.tui import rows as R
from corral.tui.event_text import describe
from corral.tui.screens.session import log_filter_matches

TRIED = "the agent tried to approve its own diff"


def test_the_row_says_what_the_agent_tried_before_what_it_needs() -> None:
    row = stored_summary(
        CoderSession(id="s1", repo="/r", intent="do it", state=CoderState.NEEDS_APPROVAL)
    ).model_copy(
        update={
            "live": True,
            "needs_you": NeedsYou.MERGE,
            "needs_you_label": needs_you_label(NeedsYou.MERGE),
            "boundary_notice": TRIED,
        }
    )
    assert R.needs_text(row).plain == f"⚠ {TRIED}"


def test_the_log_shows_the_attempt_among_the_problems() -> None:
    event = parse_event(
        {
            "session_id": "s1",
            "seq": 7,
            "ts": 0.0,
            "kind": "boundary",
            "data": {"method": "approve", "caller": "s1", "target": "s1", "message": TRIED},
        }
    )
    assert describe(event).plain.endswith(f"refused: {TRIED}")
    assert log_filter_matches("problems", event)
