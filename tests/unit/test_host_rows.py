"""A session whose host does not answer reads "host unreachable" on the
board, with the reason, and is neither failed nor waiting for the operator."""

from __future__ import annotations

from corral.supervisor.models import SessionSummary
from corral.supervisor.states import CoderState
from corral.tui import rows


def row(status: str, reason: str, source: str) -> SessionSummary:
    return SessionSummary.model_construct(
        live=True,
        state=CoderState.RUNNING,
        agent_status=status,
        agent_reason=reason,
        agent_source=source,
        failure_kind=None,
        needs_you=None,
        needs_you_label=None,
        question_prompt=None,
        auth_message=None,
        error=None,
        model_notice=None,
    )


def test_an_unreachable_host_reads_as_such_with_its_reason() -> None:
    r = row("unreachable", "host box (gpu1) does not answer (timed out)", "host")
    assert rows.state_text(r).plain == "host unreachable"
    assert rows.needs_text(r).plain == "host box (gpu1) does not answer (timed out)"
    assert rows.agent_words(r.agent_status, r.agent_reason, r.agent_source) == (
        "host unreachable: host box (gpu1) does not answer (timed out)"
    )


def test_a_running_agent_still_reads_as_before() -> None:
    r = row("running", "output", "pane")
    assert rows.state_text(r).plain == "agent running (screen)"
    assert rows.needs_text(r).plain == ""
