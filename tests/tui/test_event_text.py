"""The console's event lines read as they did before events were typed: every
line of a journal written by that version renders to the same text and styles,
and falls under the same log filters."""

from __future__ import annotations

import json
from pathlib import Path

from rich.text import Text

from corral.supervisor.session.journal import read_journal
from corral.tui.event_text import describe
from corral.tui.screens.session import LOG_FILTERS, log_filter_matches

DATA = Path(__file__).parents[1] / "unit" / "data"
STAMP = len("HH:MM:SS ")


def _unstamped(line: Text) -> Text:
    """The line without its local-time stamp (the recorded lines' clock differs)."""
    text = Text(line.plain[STAMP:], style=line.style)
    for span in line.spans:
        text.stylize(span.style, span.start - STAMP, span.end - STAMP)
    return text


def test_every_kind_renders_the_line_it_rendered_before() -> None:
    events = read_journal(DATA / "journal_v1.jsonl", session_id="s")
    then = json.loads((DATA / "journal_v1.describe.json").read_text(encoding="utf-8"))
    assert len(events) == len(then)
    for event, before in zip(events, then, strict=True):
        assert _unstamped(describe(event)).markup == before["line"], event
        assert [n for n in LOG_FILTERS if log_filter_matches(n, event)] == before["filters"]


def test_a_guidance_line_shows_where_the_guidance_is() -> None:
    from corral.supervisor.events import parse_event

    def line(data: dict[str, object]) -> str:
        row = {"session_id": "s", "seq": 1, "ts": 1.0, "kind": "operator_guidance", "data": data}
        return describe(parse_event(row)).plain[STAMP:]

    assert line({"text": "Keep the API"}) == "guidance queued: Keep the API"  # no status
    assert line({"text": "Keep the API", "status": "delivered"}) == (
        "guidance delivered: Keep the API"
    )
    assert line({"text": "Keep the API", "status": "not_delivered", "reason": "it ended"}) == (
        "guidance NOT delivered (it ended): Keep the API"
    )


def test_an_agent_started_line_says_whether_it_is_confined() -> None:
    from corral.supervisor.events import parse_event

    data = {"agent": "claude", "pane": "%3", "incarnation": 1, "started": "claude"}
    row = {"session_id": "s", "seq": 1, "ts": 1.0, "kind": "external_event", "data": data}
    assert describe(parse_event(row)).plain[STAMP:] == "started claude in pane %3"
    confined = {**data, "confined": True, "sandbox": "confined (bubblewrap): writes its worktree"}
    line = describe(parse_event({**row, "data": confined})).plain[STAMP:]
    assert line == "started claude in pane %3 — confined (bubblewrap): writes its worktree"


def _line(data: object) -> str:
    from corral.supervisor.events import parse_event

    kind = data.KIND.value  # type: ignore[attr-defined]
    dumped = data.model_dump(mode="json", by_alias=True)  # type: ignore[attr-defined]
    row = {"session_id": "s", "seq": 1, "ts": 1.0, "kind": kind, "data": dumped}
    return describe(parse_event(row)).plain[STAMP:]


def test_checks_that_cannot_run_and_setup_runs_read_as_such() -> None:
    from corral.supervisor.events import CheckCompletedData, SetupCompletedData
    from corral.supervisor.models import CheckResult, CheckVerdict, SetupOutcome

    blocked = CheckResult(
        name="lint",
        passed=False,
        exit_code=127,
        verdict=CheckVerdict.CANNOT_RUN,
        reason="command not found: ruff",
    )
    line = _line(CheckCompletedData(result=blocked))
    assert "CANNOT RUN lint: command not found: ruff" in line
    failed = SetupOutcome(
        ok=False, exit_code=3, failed_command="pip install -e .", output_tail="x\nERROR: boom"
    )
    text = _line(SetupCompletedData(outcome=failed))
    assert "setup (baseline) failed: pip install -e . exited 3" in text and "ERROR: boom" in text
    cached = SetupOutcome(ok=True, cached=True, phase="verification")
    assert "setup (verification): reused cached environment" in _line(
        SetupCompletedData(outcome=cached)
    )


def test_a_model_fallback_line_names_its_real_cause() -> None:
    from corral.supervisor.events import FALLBACK_CAUSES, ModelFallbackData

    server = ModelFallbackData(from_="bad", to="good", reason="server_error", notice=False)
    assert _line(server) == "model bad answered with a server error; good answers instead"
    key = ModelFallbackData(from_="bad", to="good", reason="auth_rejected", detail="401")
    assert _line(key) == "model bad rejected its key; good answers instead — 401"
    lines = {
        _line(ModelFallbackData(from_="a", to="b", reason=r, notice=False)) for r in FALLBACK_CAUSES
    }
    assert len(lines) == len(FALLBACK_CAUSES)  # every cause says something of its own
    assert sum("key" in line for line in lines) == 1
