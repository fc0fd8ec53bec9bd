"""The agent's screen as the preview and the terminal view draw it: each row
of a streaming screen is parsed once, not at every capture, and only the
rows shown are parsed; what is drawn is what parsing every row drew."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from rich.text import Text

from corral.supervisor.panes.base import Screen
from corral.tui.widgets import terminal
from corral.tui.widgets.terminal import screen_text


def _streaming(start: int, rows: int = 50) -> Screen:
    """A 50-row agent screen after `start` lines of coloured output (each
    capture scrolled one line further), cursor on the prompt below them."""
    lines = [
        f"\x1b[3{n % 8}mline {n}\x1b[39m: reading \x1b[1mfile_{n}.py\x1b[0m"
        for n in range(start, start + rows - 2)
    ]
    lines += ["\x1b[32m> \x1b[39m", ""]
    plain = [re.sub(r"\x1b\[[0-9;]*m", "", row) for row in lines]
    return Screen(lines=plain, ansi=lines, cursor_x=2, cursor_y=rows - 2, width=80, height=rows)


def _drawn_the_old_way(screen: Screen, *, cursor: bool, last: int) -> Text:
    """Every row parsed, then trimmed and cut (what screen_text drew before)."""
    texts = [terminal._without_default_colours(Text.from_ansi(r)) for r in screen.ansi]
    if cursor and 0 <= screen.cursor_y < len(texts):
        line = texts[screen.cursor_y]
        x = screen.cursor_x
        if x >= len(line.plain):
            line.append(" " * (x - len(line.plain) + 1))
        line.stylize("reverse", x, x + 1)
    while texts and not texts[-1].plain.strip() and len(texts) - 1 > screen.cursor_y:
        texts.pop()
    return Text("\n").join(texts[-last:] if last > 0 else [])


@pytest.fixture
def parsed(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The rows Text.from_ansi parses, in order (a fresh row cache)."""
    rows: list[str] = []
    real = Text.from_ansi

    def counted(text: str, *args: object, **kw: object) -> Text:
        rows.append(text)
        return real(text, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(terminal, "_parsed_rows", {})
    monkeypatch.setattr(Text, "from_ansi", staticmethod(counted))
    yield rows


def test_a_streaming_screen_parses_only_its_new_row(parsed: list[str]) -> None:
    """The preview redraws the selected agent at its capture pace: with 100
    streaming sessions every redraw parsed all 50 rows of the screen again
    (~20 ms under load, on the console's loop, beside the keys). Now the
    first draw parses the rows it shows, and the next capture (one line
    scrolled in) parses that one line."""
    screen_text(_streaming(0), last=20)
    assert len(parsed) <= 21  # the 20 rows shown (and the blank row trimmed below the cursor)
    parsed.clear()
    screen_text(_streaming(1), last=20)
    assert parsed == [_streaming(1).ansi[47]]


@pytest.mark.parametrize("cursor", [False, True])
@pytest.mark.parametrize("last", [0, 1, 20, 49, 50, 80])
def test_what_is_drawn_is_what_parsing_every_row_drew(
    parsed: list[str], cursor: bool, last: int
) -> None:
    for start in (0, 1, 0):  # again after the cached rows were drawn with a cursor
        screen = _streaming(start)
        got = screen_text(screen, cursor=cursor, last=last)
        want = _drawn_the_old_way(screen, cursor=cursor, last=last)
        assert got.plain == want.plain
        assert got.spans == want.spans
    # the cursor drawn once is never drawn again on a screen without it
    plain = screen_text(_streaming(0), cursor=False, last=80)
    assert all("reverse" not in str(span.style) for span in plain.spans)
