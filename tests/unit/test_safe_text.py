"""Untrusted text is shown, never obeyed: whatever an agent, a model or a
check writes (markup of every kind, escape sequences, invalid UTF-8, bidi and
zero-width characters, 1 MB lines), the console's renderer never raises, keeps
every bracket as text, adds no style or link of the input's, and leaves no
character a terminal would act on or the eye would miss."""

from __future__ import annotations

import sys
import time
import unicodedata

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.text import Text

from corral.supervisor.events import PlanTextData, PlanTextEvent
from corral.tui.event_text import describe
from corral.tui.safe_text import made_visible, safe_content, safe_markup, safe_text
from corral.tui.visible import LIMIT, visible
from corral.tui.widgets.board_table import _as_text

MARKUP = [
    "[b]", "[/b]", "[/]", "[0m", "[0m]", "[link=http://evil.example]x[/link]",
    "[link='http://a']", "[@click=app.quit]", "[@click=screen.dismiss()]", "[on red]",
    "[$accent]", "$accent", "[red", "]", "[[", "\\[b]", "\\", "[b][/i]", ":smile:",
    "[reverse blink]", "**bold**", "<b>x</b>", "{}", "{0}", "%s",
]  # fmt: skip
ESCAPES = [
    "\x1b]52;c;cHduZWQ=\x07", "\x1b]2;owned\x07", "\x1b]8;;http://evil\x1b\\x\x1b]8;;\x1b\\",
    "\x1b[2J\x1b[H", "\x1b[31m", "\x9b31m", "\x9d0;t\x9c", "\x1bP+q\x1b\\", "\r", "\x08\x08",
    "\x00", "\x07", "\x7f", "\x85",
]  # fmt: skip
INVISIBLE = ["\u202e", "\u2066", "\u200b", "\u200d", "\ufeff", "\u2028", "\U000e0041", "\u00ad"]
PIECES = MARKUP + ESCAPES + INVISIBLE + ["a", " ", "é", "界", "\ud800", "\n", "\t"]

hostile = st.lists(st.sampled_from(PIECES) | st.text(max_size=8), max_size=12).map("".join)


def obeyable(text: str, multiline: bool) -> list[str]:
    """Characters a terminal would act on or the eye would miss (private-use
    characters are drawn as they are: icon fonts)."""
    allowed = "\n\t" if multiline else ""
    return [
        ch
        for ch in text
        if not ch.isprintable()
        and ch not in allowed
        and ch != " "
        and unicodedata.category(ch) != "Co"
    ]


@settings(max_examples=400, deadline=None)
@given(value=hostile, multiline=st.booleans())
def test_visible_never_leaves_an_obeyable_character(value: str, multiline: bool) -> None:
    shown = visible(value, multiline=multiline)
    assert obeyable(shown, multiline) == []
    if value.isprintable():
        assert shown == value  # printable text is left exactly as written


@settings(max_examples=400, deadline=None)
@given(value=hostile | st.binary(max_size=40), style=st.sampled_from(["", "bold", "red"]))
def test_safe_text_is_the_value_as_text_in_corrals_style_only(value: object, style: str) -> None:
    text = safe_text(value, style)
    assert text.plain == visible(value)
    assert text.spans == [] and str(text.style) == style


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values=st.lists(hostile, min_size=1, max_size=3), multiline=st.booleans())
def test_safe_markup_fills_slots_with_text_in_the_templates_styles(
    values: list[str], multiline: bool
) -> None:
    template = " · ".join(f"[b]{i}[/b] [red]{{}}[/red]" for i in range(len(values)))
    content = safe_markup(template, *values, multiline=multiline)
    expected = " · ".join(f"{i} {visible(v, multiline=multiline)}" for i, v in enumerate(values))
    assert content.plain == expected  # every bracket of the values is still there
    styles = {str(span.style) for span in content.spans}
    assert styles <= {"b", "red"}  # no style, link or action from a value
    assert obeyable(content.plain, multiline) == []


def test_the_crash_shape_is_text() -> None:
    shaped = "[0m [link=http://evil.example/x]click[/link]"
    assert safe_markup("[b]Contract[/b]: {}", shaped).plain == f"Contract: {shaped}"
    assert safe_content(shaped).plain == shaped


@settings(max_examples=200, deadline=None)
@given(value=hostile)
def test_an_event_line_and_a_board_cell_show_the_words_and_obey_none(value: str) -> None:
    event = PlanTextEvent(session_id="s" * 24, seq=1, ts=0.0, data=PlanTextData(text=value))
    line = describe(event)
    assert obeyable(line.plain, multiline=True) == []
    for cell in (_as_text(value), _as_text(Text(value, style="bold"))):
        assert obeyable(cell.plain, multiline=False) == []


def test_a_built_text_keeps_its_own_styles_where_its_words_were() -> None:
    line = Text("12:00 ", style="dim")
    line.append("tool x\x1b[2J", style="cyan").append(" said \u202e ok")
    shown = made_visible(line)
    assert shown.plain == "12:00 tool x␛[2J said ⟨U+202E⟩ ok"
    assert [(s.start, s.end, s.style) for s in shown.spans] == [(6, 16, "cyan")]


@pytest.mark.slow
def test_every_character_a_terminal_acts_on_or_the_eye_misses_is_marked() -> None:
    """The whole of Unicode: Cc, Cf, Cs, Zl, Zp, Cn and the odd spaces."""
    missed = [
        hex(code)
        for code in range(sys.maxunicode + 1)
        if obeyable(visible(chr(code)), multiline=False)
    ]
    assert missed == []
    assert visible("\x1b") == "␛" and visible("\x9b") == "\\x9b" and visible("\u202e") == "⟨U+202E⟩"
    assert visible(b"ok \xff\xfe") == "ok \ufffd\ufffd"
    assert unicodedata.category(visible("\ud800")) == "So"  # the replacement character


def test_a_one_megabyte_line_is_cut_quickly_and_says_so() -> None:
    line = ("[0m\x1b]2;x\x07\u202e" * 120_000)[:1_000_000]
    started = time.perf_counter()
    shown = safe_text(line)
    markup = safe_markup("[b]{}[/b]", line)
    took = time.perf_counter() - started
    assert len(shown.plain) < LIMIT * 9  # each character is at most one 8-character mark
    assert shown.plain.endswith("more characters not shown)")
    assert markup.plain.endswith("more characters not shown)")
    assert took < 1.0, f"{took:.2f} s for a 1 MB line"


def test_nothing_raises_on_values_that_cannot_even_be_read() -> None:
    class Broken:
        def __str__(self) -> str:
            raise RuntimeError("no")

    assert visible(Broken()) == "⟨unprintable value⟩"
    assert safe_text(Broken()).plain == "⟨unprintable value⟩"
    assert "⟨unprintable value⟩" in safe_markup("[b]{}[/b]", Broken()).plain
    assert safe_markup("[b]{}[/b] {}", "only one").plain  # a wrong template is shown, not raised


def test_the_agents_terminal_keeps_its_colours_and_loses_its_links() -> None:
    """The pane's screen is the agent's: its colours are shown, but a link
    (OSC 8) would send a click to the agent's URL, and a stray control
    character would reach the operator's terminal."""
    from corral.tui.widgets.terminal import _without_default_colours

    ansi = "\x1b]8;;http://evil.example\x1b\\click\x1b]8;;\x1b\\ \x1b[31mred\x1b[0m \x07bell\x0e"
    text = _without_default_colours(Text.from_ansi(ansi))
    assert "click" in text.plain and "red" in text.plain
    assert obeyable(text.plain, multiline=True) == []
    styles = [s.style for s in text.spans if not isinstance(s.style, str)]
    assert all(style.link is None for style in styles)
    assert any(style.color is not None for style in styles)  # the colour is kept
