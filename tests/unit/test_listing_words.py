"""`corral sessions` says what the board says: a session waiting on the
operator, a dormant one and one whose host does not answer are not listed as
plain `working`."""

from __future__ import annotations

from typing import Any

from corral.supervisor.models import CoderSession, SessionSummary
from corral.supervisor.session.summaries import stored_summary
from corral.supervisor.states import CoderState, NeedsYou
from corral.tui.cli.sessions import status_words


def row(state: CoderState = CoderState.RUNNING, **update: Any) -> SessionSummary:
    base = stored_summary(CoderSession(id="s1", repo="/r", intent="do it", state=state))
    return base.model_copy(update={"live": True, **update})


def test_each_running_kind_has_its_own_words() -> None:
    assert status_words(row(agent_status="running")) == "agent running"
    assert status_words(row(needs_you=NeedsYou.QUESTION, agent_status="waiting")) == (
        "needs you: question"
    )
    assert status_words(row(dormant=True)) == "dormant"
    assert status_words(row(agent_status="unreachable", agent_reason="lo: timeout")) == (
        "host unreachable"
    )
    assert status_words(row(agent_status="auth")) == "agent signed out"
    assert status_words(row(live=False)) == "working"  # as stored: nothing live is claimed


def test_gates_and_endings_keep_their_state() -> None:
    # one word for a delivered session on the board, the header, the preview and the CLI
    assert status_words(row(CoderState.MERGED)) == "delivered"
    gated = row(CoderState.NEEDS_APPROVAL, needs_you=NeedsYou.MERGE)
    assert status_words(gated) == "needs you: approval"


def test_the_preview_says_why_a_session_shows_no_terminal() -> None:
    from corral.tui.widgets.preview import no_terminal_reason

    gate1 = row(CoderState.CONTRACT_PROPOSED, needs_you=NeedsYou.CONTRACT)
    assert "starts once you confirm the contract (c)" in no_terminal_reason(gate1)
    assert "R revives" in no_terminal_reason(row(dormant=True))
    assert "has ended (delivered)" in no_terminal_reason(row(CoderState.MERGED))
    assert "stored state" in no_terminal_reason(row(live=False))
    native = row(engine="native")
    assert no_terminal_reason(native) == "No agent terminal: native does not run in a terminal."
