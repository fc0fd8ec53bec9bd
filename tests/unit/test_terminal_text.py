"""What `corral run` prints of an agent's words reaches the operator's
terminal: an escape sequence in them (retitling the window, moving the
cursor, rewriting what is on screen) is shown as text, never obeyed."""

from __future__ import annotations

import pytest

from corral.supervisor.events import PlanTextData, PlanTextEvent
from corral.tui.cli.run import _print_event
from corral.tui.visible import visible

HOSTILE = "done\x1b]0;pwned\x07 \x1b[2J\x1b[Hall checks pass\rverified\x9b31m"


def test_an_agents_escape_sequences_are_printed_as_text(capsys: pytest.CaptureFixture[str]) -> None:
    event = PlanTextEvent(session_id="s" * 24, seq=1, ts=0.0, data=PlanTextData(text=HOSTILE))
    _print_event(event, as_json=False)
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "\r" not in out and "\x9b" not in out
    assert "␛]0;pwned" in out  # what the agent sent is still there to read
    assert out.endswith("\n")


def test_newlines_and_tabs_stay_as_they_are() -> None:
    assert visible("a\tb\nc", multiline=True) == "a\tb\nc"
