"""Every agent status on the board and in the session view says where it
came from (hook, screen, process), and "waiting" or "signed out" never shows
without the question or the reason."""

from __future__ import annotations

from typing import Any

from corral.supervisor.models import CoderSession, SessionSummary
from corral.supervisor.session.summaries import stored_summary
from corral.supervisor.states import CoderState, NeedsYou, needs_you_label
from corral.tui import rows as R


def row(**update: Any) -> SessionSummary:
    base = stored_summary(
        CoderSession(id="s1", repo="/r", intent="do it", state=CoderState.RUNNING)
    )
    return base.model_copy(update={"live": True, **update})


def test_a_running_session_shows_the_agent_status_and_its_source() -> None:
    shown = R.state_text(row(agent_status="idle", agent_reason="turn ended", agent_source="hook"))
    assert shown.plain == "agent idle (hook)"
    shown = R.state_text(row(agent_status="running", agent_reason="busy", agent_source="pane"))
    assert shown.plain == "agent running (screen)"
    assert R.state_text(row()).plain == "working"  # nothing observed yet: no claim


def test_waiting_without_a_question_yet_shows_the_reason() -> None:
    r = row(agent_status="waiting", agent_reason="asks permission for Write", agent_source="hook")
    assert R.state_text(r).plain == "agent waiting (hook)"
    assert R.needs_text(r).plain == "waiting: asks permission for Write"


def test_a_pending_question_shows_its_text() -> None:
    r = row(
        agent_status="waiting",
        agent_source="pane",
        needs_you=NeedsYou.QUESTION,
        needs_you_label=needs_you_label(NeedsYou.QUESTION),
        question_prompt="Do you want to use this API key?",
    )
    assert R.needs_text(r).plain == "question: Do you want to use this API key?"


def test_a_signed_out_agent_shows_its_own_sentence() -> None:
    r = row(
        agent_status="auth",
        agent_reason="Not logged in · Please run /login",
        agent_source="pane",
        needs_you=NeedsYou.AUTH,
        needs_you_label=needs_you_label(NeedsYou.AUTH),
        auth_message="Claude Code: Not logged in · Please run /login",
    )
    assert R.state_text(r).plain == "agent signed out (screen)"
    assert R.needs_text(r).plain == "sign-in: Claude Code: Not logged in · Please run /login"
    words = R.agent_words(r.agent_status, r.agent_reason, r.agent_source)
    assert words == "agent signed out (screen): Not logged in · Please run /login"
