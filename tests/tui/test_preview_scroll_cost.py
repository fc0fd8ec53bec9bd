"""The board's preview of a streaming agent composes only the lines that are
new. An ACP session's preview scrolls by a few rows four times a second;
Textual keeps a widget's composed lines per y, so each scroll composed all
48 lines again (border, padding, the app's colour filter): with 50 sessions
streaming, most of the frames a keystroke's repaint waited behind
(`bench/status.py --acp-console --trace`). The same strips must come out."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from textual._styles_cache import StylesCache
from textual.app import ComposeResult
from textual.strip import Strip

from corral.tui.console_app import ConsoleApp
from corral.tui.widgets.preview import AgentPreview

ROWS = 48  # the preview's content lines at 200x50 beside the board


class PreviewApp(ConsoleApp):
    def compose(self) -> ComposeResult:
        preview = AgentPreview()
        preview.styles.width = 100
        yield preview


def rows(first: int) -> list[str]:
    """A conversation's lines from `first` on; every tenth a coloured tool call."""
    return [
        f"\x1b[33mtool Edit notes_{i}.py\x1b[0m completed"
        if i % 10 == 0
        else f"line {i}: the agent says what it does next"
        for i in range(first, first + ROWS)
    ]


def paint(preview: AgentPreview, shown: list[str]) -> list[list[Any]]:
    """Show `shown` and render the whole preview, as a frame does."""
    preview._rows, preview._said = shown, None
    preview.refresh()
    strips = preview.render_lines(preview.outer_size.region)
    return [list(strip) for strip in strips]


def fresh(preview: AgentPreview) -> list[list[Any]]:
    """The same rows composed from nothing (nothing kept)."""
    preview._styles_cache = StylesCache()
    return paint(preview, preview._rows)


async def test_a_scrolled_screen_composes_only_its_new_rows_and_draws_the_same() -> None:
    app = PreviewApp()
    async with app.run_test(size=(200, 50)) as pilot:
        preview = app.query_one(AgentPreview)
        assert preview._timer is not None
        preview._timer.pause()  # no supervisor here: the rows are set by hand
        await pilot.pause()
        assert preview.outer_size.height == ROWS + 2
        paint(preview, rows(0))
        composed: list[int] = []
        original: Callable[..., Strip] = StylesCache.render_line

        def counting(self: StylesCache, styles: Any, y: int, *args: Any) -> Strip:
            composed.append(y)
            return original(self, styles, y, *args)

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(StylesCache, "render_line", counting)
            scrolled = paint(preview, rows(2))  # two new lines at the bottom
        # the two new rows and the two border lines; before, all 50 lines
        assert len(composed) <= 4, f"{len(composed)} lines composed for a scroll of two"
        cached = preview._styles_cache
        assert scrolled == fresh(preview)  # the very strips Textual composes from nothing
        # a restyle is never answered with the lines kept from before it
        preview._styles_cache = cached
        preview.styles.border = ("round", "red")
        await pilot.pause()
        restyled = paint(preview, rows(4))
        assert restyled == fresh(preview)
        assert restyled != scrolled
