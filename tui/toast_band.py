"""Toasts never cover the line in focus.

Textual stacks toasts at the bottom right of the screen, over whatever is
there. On an 80×24 board that is the lower half, often the row the operator
is on. Here the toast rack is placed in the band of the screen that does not
hold the focused line (the board's cursor row, a table's cursor row, or the
focused field): below it when the line is in the upper half, above it when
in the lower half, never taller than that band. On a short terminal (under
`COMPACT_BELOW` rows) toasts are compact (no padding, no gap) and the rack
takes at most a third of the screen, so the start-up toasts (the demo says
two things) leave the board readable while they last; the newest toast is
the one in view.

The rack is placed again whenever a toast comes, the focus or a cursor moves,
or the screen is resized.
"""

from __future__ import annotations

from typing import NamedTuple

from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import DataTable
from textual.widgets._toast import ToastRack

from .widgets.board_table import BoardTable

COMPACT_BELOW = 40  # rows: under this, toasts are compact and take at most a third
FOOTER_ROWS = 1  # the footer's line stays readable under a bottom rack


class Band(NamedTuple):
    """Where the toast rack goes: at the top or the bottom, and how tall at most."""

    top: bool
    height: int


def focused_line(screen: Screen[object]) -> tuple[int, int] | None:
    """(first row, row after the last) on the screen of the line in focus:
    a table's cursor row, else the focused widget; None when nothing is."""
    focused = screen.focused
    if focused is None:
        return None
    area = focused.content_region
    if isinstance(focused, BoardTable):  # line 0 is its header, which stays put
        y = area.y + 1 + focused.cursor_row - int(focused.scroll_y)
        return y, y + 1
    if isinstance(focused, DataTable) and focused.row_count:
        row = focused._get_row_region(focused.cursor_row)
        y = area.y + row.y - int(focused.scroll_y)
        return y, y + max(row.height, 1)
    region = focused.region
    return region.y, region.y + max(region.height, 1)


def band_for(height: int, line: tuple[int, int] | None) -> Band:
    """The band of a screen `height` rows tall that leaves `line` uncovered."""
    cap = height // 3 if height < COMPACT_BELOW else height
    if line is None:
        return Band(top=False, height=max(1, min(cap, height - FOOTER_ROWS)))
    first, after = line
    above = max(first, 0)
    below = max(height - after - FOOTER_ROWS, 0)
    if below >= above:
        return Band(top=False, height=max(1, min(cap, below)))
    return Band(top=True, height=max(1, min(cap, above)))


def _rack(screen: Screen[object]) -> Widget | None:
    try:
        return screen.get_child_by_type(ToastRack)
    except NoMatches:
        return None


def keep_toasts_clear(screen: Screen[object]) -> None:
    """Place `screen`'s toast rack in the band that leaves the focused line uncovered."""
    rack = _rack(screen)
    if rack is None or not screen.is_attached:
        return
    height = screen.size.height
    band = band_for(height, focused_line(screen))
    styles = rack.styles
    styles.dock = "top" if band.top else "bottom"
    styles.align_vertical = "top" if band.top else "bottom"
    styles.margin = (0, 0, 0, 0) if band.top else (0, 0, FOOTER_ROWS, 0)
    styles.max_height = band.height
    rack.set_class(height < COMPACT_BELOW, "-compact")
