"""The board's preview decodes only the lines it shows. An ACP session's
screen is its conversation's last 200 lines, read four times a second; the
preview decoded all 200 (Rich's ANSI decoder) to show a dozen, ~47 ms of
the console's loop a refresh with 50 ACP sessions streaming
(bench/status.py --acp-console --profile): every key waited behind it."""

from __future__ import annotations

from typing import Any

import pytest
from rich.text import Text

from corral.supervisor.panes.base import Screen
from corral.tui.widgets import terminal


@pytest.fixture
def decoded(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []

    class Counting(Text):
        @classmethod
        def from_ansi(cls, text: str, *args: Any, **kwargs: Any) -> Text:
            seen.append(text)
            return Text.from_ansi(text, *args, **kwargs)

    monkeypatch.setattr(terminal, "Text", Counting)
    return seen


def test_a_long_screen_is_decoded_only_as_far_as_the_preview_shows(decoded: list[str]) -> None:
    lines = [f"line {i}" for i in range(200)]
    coloured = [f"\x1b[2m{line}\x1b[0m" for line in lines]  # plain rows need no decoder
    shown = terminal.screen_text(Screen(lines=lines, ansi=coloured, cursor_y=199), last=12)
    assert shown.plain.splitlines() == lines[-12:]
    assert len(decoded) == 12


def test_a_plain_row_skips_the_ansi_decoder_and_reads_the_same(decoded: list[str]) -> None:
    rows = ["✻ Working… (esc to interrupt)", "narration line 7: reading"]
    for row in rows:
        assert terminal.row_text(row).plain == row
    assert decoded == []
    assert terminal.row_text("a\rb").plain == "b"  # a control character: decoded as before
    assert decoded == ["a\rb"]


def test_blank_lines_below_the_cursor_are_still_dropped_and_the_cursor_drawn(
    decoded: list[str],
) -> None:
    lines = [f"\x1b[31mline {i}\x1b[0m" for i in range(50)] + ["", "   ", ""]
    plain = [f"line {i}" for i in range(50)] + ["", "   ", ""]
    screen = Screen(lines=plain, ansi=lines, cursor_x=2, cursor_y=49)
    shown = terminal.screen_text(screen, last=5, cursor=True)
    assert shown.plain.splitlines() == plain[45:50]
    assert len(decoded) == 5
    assert any("reverse" in str(span.style) for span in shown.spans)
