"""The board's table: a Line-API list of keyed rows that renders only what shows.

Textual's `DataTable` measures every cell of every row it holds and renders
each visible cell through Rich's full layout. With a thousand stored sessions
that cost most of a second before the first board paint, and again on each
re-order (a running session's narration moves it to the top of its group).

This widget keeps the rows as plain data and turns only the visible lines into
strips, cached per row until the row, the layout or the styles change:

- column widths come from the cells' plain text (cheap), the intent column
  takes what is left of the width and truncates with an ellipsis, so the
  columns to its right stay on screen;
- on a narrow terminal the flexible column keeps at least `flex_wanted`
  cells: columns with a soft cap shrink to it first, then capped columns
  shrink to their cap (with an ellipsis), then
  droppable columns leave, least useful first (at 80 columns the board keeps
  state, needs-you, the intent and its age); a `vanishing` column is left
  out while no row has anything in it;
- `show(order, cells_of)` replaces the row order and rewrites only rows whose
  cells changed, and repaints only the lines on screen that differ (a row
  moved, its cells or the cursor changed): one streaming session's new state
  redraws its own line, not the table; the cursor is an index, and the board
  keeps it on its session;
- `headings` are keys drawn as one line across every column (a group's title):
  not measured, never under the cursor (it steps over them);
- keys: up/down, page up/down, home/end, enter selects; a click moves the
  cursor, a click on the cursor row selects it (like `DataTable`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ..safe_text import made_visible, safe_text

Cells = tuple[Any, ...]

PADDING = 1  # blank cells either side of every column
MIN_FLEX = 12  # the flexible column never shrinks below this
STRIP_CACHE_LIMIT = 4000


@dataclass(frozen=True)
class Column:
    """One column of the table, and how it gives way on a narrow terminal.

    `flex`: takes what is left of the width (one column). `cap`: never wider
    (cut with an ellipsis when there is no room). `soft_cap`: gives way to
    this first, and what `wanted_width` budgets for it. `drop_order`: it
    leaves when there is no room, lowest first (None: it stays).
    `unbudgeted`: shown when there is room, never asked for. `vanishing`:
    left out while every row's cell in it is empty."""

    key: str
    label: str
    flex: bool = False
    cap: int | None = None
    soft_cap: int | None = None
    drop_order: int | None = None
    unbudgeted: bool = False
    vanishing: bool = False


def _width_of(cell: Any) -> int:
    if isinstance(cell, Text):
        return cell.cell_len
    text = str(cell)
    return len(text) if text.isascii() else cell_len(text)  # ASCII: one cell a character


def _widths_of(cells: Cells) -> tuple[int, ...]:
    return tuple([_width_of(c) for c in cells])


def _as_text(cell: Any) -> Text:
    """A cell drawn: Rich text as it is; words with a `style` (rows.Styled) in it."""
    if isinstance(cell, Text):
        return made_visible(cell, multiline=False)
    return safe_text(str(cell), getattr(cell, "style", ""))  # an intent, a branch: never obeyed


class BoardTable(ScrollView, can_focus=True):
    """Rows keyed by session id, one flexible column, a header that stays put."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "cursor_up", "Up", show=False),
        Binding("down", "cursor_down", "Down", show=False),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("pagedown", "page_down", "Page down", show=False),
        Binding("home", "first", "First", show=False),
        Binding("end", "last", "Last", show=False),
        Binding("enter", "select", "Select", show=False),
    ]

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "board-table--header",
        "board-table--cursor",
        "board-table--even-row",
        "board-table--heading",
    }

    DEFAULT_CSS = """
    BoardTable {
        background: $surface;
        color: $foreground;
        overflow-x: hidden;
        &:focus {
            background-tint: $foreground 5%;
            & > .board-table--cursor {
                background: $block-cursor-background;
                color: $block-cursor-foreground;
                text-style: $block-cursor-text-style;
            }
        }
        &:dark > .board-table--even-row {
            background: $surface-darken-1 40%;
        }
        & > .board-table--header {
            text-style: bold;
            background: $panel;
            color: $foreground;
        }
        & > .board-table--even-row {
            background: $surface-lighten-1 50%;
        }
        & > .board-table--heading {
            text-style: bold;
            color: $accent;
        }
        & > .board-table--cursor {
            background: $block-cursor-blurred-background;
            color: $block-cursor-blurred-foreground;
            text-style: $block-cursor-blurred-text-style;
        }
    }
    """

    class RowSelected(Message):
        """Enter, or a click on the cursor row."""

        def __init__(self, table: BoardTable, key: str) -> None:
            super().__init__()
            self.table = table
            self.key = key

        @property
        def control(self) -> BoardTable:
            return self.table

    class RowHighlighted(Message):
        """The cursor moved to another row."""

        def __init__(self, table: BoardTable, key: str | None) -> None:
            super().__init__()
            self.table = table
            self.key = key

        @property
        def control(self) -> BoardTable:
            return self.table

    def __init__(
        self,
        columns: Sequence[Column],
        *,
        flex_wanted: int = 0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.columns = tuple(columns)
        self.column_keys = [c.key for c in columns]
        self.labels = [c.label for c in columns]
        flexible = [i for i, c in enumerate(columns) if c.flex]
        self.flex_index = flexible[0] if flexible else None
        self.flex_wanted = flex_wanted
        self.caps = {i: c.cap for i, c in enumerate(columns) if c.cap is not None}
        # widths a column gives way to first (a long failure reason before the
        # state words), and what `wanted_width` budgets for it
        self.soft_caps = {i: c.soft_cap for i, c in enumerate(columns) if c.soft_cap is not None}
        dropping = [(c.drop_order, i) for i, c in enumerate(columns) if c.drop_order is not None]
        self.droppable = [i for _, i in sorted(dropping)]
        # shown when there is room, never asked for (`wanted_width` leaves them out)
        self.unbudgeted = {i for i, c in enumerate(columns) if c.unbudgeted}
        # left out while every row's cell in it is empty
        self.vanishing = {i for i, c in enumerate(columns) if c.vanishing}
        self._empty: set[int] = set(self.vanishing)
        self.hidden: set[int] = set()  # columns that gave way for room
        self._left_out: set[int] = set(self._empty)  # not drawn: hidden, or vanishing and empty
        self._cells: dict[str, Cells] = {}
        self._row_widths: dict[str, tuple[int, ...]] = {}
        self._order: list[str] = []
        self._headings: frozenset[str] = frozenset()
        self._index: dict[str, int] = {}
        self._content_widths = [cell_len(label) for label in self.labels]
        self._widths: list[int] = list(self._content_widths)
        self._layout_width = 0
        self._strips: dict[tuple[str, str], Strip] = {}
        self._layout_epoch = 0  # counts the column layouts (each redraws every line)
        self.cursor_row = 0
        self.cursor_chosen = False

    # -- data ------------------------------------------------------------------

    def show(
        self,
        order: list[str],
        cells_of: Callable[[str], Cells],
        headings: frozenset[str] = frozenset(),
    ) -> None:
        """Show `order` top to bottom; `cells_of(key)` gives a row's cells (a
        heading's: one cell, its title)."""
        cells: dict[str, Cells] = {}
        widths: dict[str, tuple[int, ...]] = {}
        changed: set[str] = set()  # keys whose cells differ from what was drawn
        for key in order:
            new = cells_of(key)
            old = self._cells.get(key)
            if key in headings:
                if old != new:
                    self._forget(key)
                    changed.add(key)
                cells[key] = new
            elif old is not None and old == new and key in self._row_widths:
                cells[key], widths[key] = old, self._row_widths[key]
            else:
                cells[key], widths[key] = new, _widths_of(new)
                self._forget(key)
                changed.add(key)
        before = (self._order, self._headings, self.cursor_row, self._layout_epoch)
        self._cells, self._row_widths = cells, widths
        self._headings = headings
        self._order = list(order)
        self._index = {key: i for i, key in enumerate(self._order)}
        self._measure()
        self.virtual_size = Size(self._layout_width, len(self._order) + 1)
        self.cursor_row = self._off_heading(
            min(max(self.cursor_row, 0), max(len(self._order) - 1, 0)), 1
        )
        self._repaint_changed(*before, changed)

    def _repaint_changed(
        self,
        order: list[str],
        headings: frozenset[str],
        cursor_row: int,
        layout_epoch: int,
        changed: set[str],
    ) -> None:
        """Repaint the lines on screen that differ from what was drawn (a row
        moved, its cells changed, the cursor moved), not the whole table: with
        sessions streaming, one row's change must not redraw every row. A new
        layout, another row count or most lines changed: the whole table."""
        if layout_epoch != self._layout_epoch or len(order) != len(self._order):
            self.refresh()
            return
        top = int(self.scroll_y)
        visible = max(self.scrollable_content_region.height - 1, 1)
        lines = []
        for index in range(top, min(top + visible, len(self._order))):
            key = self._order[index]
            if (
                key in changed
                or order[index] != key
                or (key in headings) != (key in self._headings)
                or (index == cursor_row) != (index == self.cursor_row)
            ):
                lines.append(index)
        if len(lines) * 2 > visible:
            self.refresh()
            return
        for index in lines:
            self.refresh_line(index + 1)  # line 0 is the header

    @property
    def row_count(self) -> int:
        return len(self._order)

    def row_keys(self) -> list[str]:
        """The shown keys, top to bottom."""
        return list(self._order)

    def key_at(self, index: int) -> str | None:
        return self._order[index] if 0 <= index < len(self._order) else None

    def index_of(self, key: str) -> int | None:
        return self._index.get(key)

    def get_row_at(self, index: int) -> list[Any]:
        return list(self._cells[self._order[index]])

    # -- cursor ------------------------------------------------------------------

    def move_cursor(self, *, row: int, chosen: bool = True) -> None:
        """Move the cursor; `chosen=False` when the program (not the operator)
        moves it, so `cursor_chosen` tells whether the operator picked a row."""
        self.cursor_chosen = self.cursor_chosen or chosen
        if not self._order:
            return
        row = min(max(row, 0), len(self._order) - 1)
        row = self._off_heading(row, 1 if row >= self.cursor_row else -1)
        if row != self.cursor_row:
            self.refresh_line(self.cursor_row + 1)
            self.cursor_row = row
            self.refresh_line(row + 1)
            self.post_message(self.RowHighlighted(self, self.key_at(row)))
        self._scroll_to_cursor()

    def _off_heading(self, row: int, step: int) -> int:
        """The nearest row at or after `row` in the direction `step` that is
        not a heading (the other way at the end); `row` when all are."""
        for direction in (step, -step):
            at = row
            while 0 <= at < len(self._order):
                if self._order[at] not in self._headings:
                    return at
                at += direction
        return row

    def _scroll_to_cursor(self) -> None:
        rows_visible = max(self.scrollable_content_region.height - 1, 1)
        top = int(self.scroll_y)
        if self.cursor_row < top:
            self.scroll_to(y=self.cursor_row, animate=False)
        elif self.cursor_row >= top + rows_visible:
            self.scroll_to(y=self.cursor_row - rows_visible + 1, animate=False)

    def _page(self) -> int:
        return max(self.scrollable_content_region.height - 2, 1)

    def action_cursor_up(self) -> None:
        self.move_cursor(row=self.cursor_row - 1)

    def action_cursor_down(self) -> None:
        self.move_cursor(row=self.cursor_row + 1)

    def action_page_up(self) -> None:
        self.move_cursor(row=self.cursor_row - self._page())

    def action_page_down(self) -> None:
        self.move_cursor(row=self.cursor_row + self._page())

    def action_first(self) -> None:
        self.move_cursor(row=0)

    def action_last(self) -> None:
        self.move_cursor(row=len(self._order) - 1)

    def action_select(self) -> None:
        key = self.key_at(self.cursor_row)
        if key is not None:
            self.post_message(self.RowSelected(self, key))

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None or offset.y < 1:
            return
        row = int(self.scroll_y) + offset.y - 1
        if row >= len(self._order):
            return
        if row == self.cursor_row:
            self.action_select()
        else:
            self.move_cursor(row=row)

    # -- layout ------------------------------------------------------------------

    def _measure(self) -> None:
        """Each column as wide as its widest cell (row widths are kept per row,
        so only changed rows are measured)."""
        rows = [tuple(cell_len(label) for label in self.labels), *self._row_widths.values()]
        self._content_widths = [max(column) for column in zip(*rows, strict=False)]
        self._empty = {
            i for i in self.vanishing if not any(w[i] for w in self._row_widths.values())
        }
        self._lay_out(self._layout_width)

    def wanted_width(self) -> int:
        """The width that shows every column whole (capped and droppable ones
        too) with the flexible column at `flex_wanted` cells (less when its
        widest cell is shorter), plus room for the vertical scrollbar."""
        total = 0
        for i, w in enumerate(self._content_widths):
            if i in self.unbudgeted or i in self._empty:
                continue
            if i == self.flex_index:
                w = min(w, max(self.flex_wanted, MIN_FLEX))
            elif i in self.soft_caps:
                w = min(w, self.soft_caps[i])
            total += w + 2 * PADDING
        return total + self.styles.scrollbar_size_vertical

    def _lay_out(self, width: int) -> None:
        """Column widths for a line `width` cells wide (the flexible column
        gives way first)."""
        widths = list(self._content_widths)
        hidden: set[int] = set()
        if self.flex_index is not None and width:
            flex = self.flex_index
            wanted = min(max(self.flex_wanted, MIN_FLEX), widths[flex])

            def room() -> int:
                others = sum(
                    w + 2 * PADDING
                    for i, w in enumerate(widths)
                    if i != flex and i not in hidden and i not in self._empty
                )
                return width - others - 2 * PADDING

            for caps in (self.soft_caps, self.caps):
                if room() < wanted:
                    for i, cap in caps.items():
                        widths[i] = min(widths[i], cap)
            for i in self.droppable:
                if room() >= wanted:
                    break
                hidden.add(i)
            # past the flexible column's `wanted` cells, the room goes to the capped
            # columns first (a state or needs-you word whole beats more intent)
            # (each whole up to its soft cap first; a long failure reason last)
            spare = room() - wanted
            for i, soft in [
                *((i, True) for i in [*self.caps, *self.soft_caps]),
                *((i, False) for i in self.soft_caps),
            ]:
                limit = self._content_widths[i]
                if soft:
                    limit = min(limit, self.soft_caps.get(i, limit))
                grow = min(spare, limit - widths[i])
                if grow > 0:
                    widths[i] += grow
                    spare -= grow
            widths[flex] = min(widths[flex], max(room(), MIN_FLEX))
        left_out = hidden | self._empty
        if widths != self._widths or width != self._layout_width or left_out != self._left_out:
            self._widths, self._layout_width = widths, width
            self.hidden, self._left_out = hidden, left_out
            self._strips.clear()
            self._layout_epoch += 1

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._strips.clear()

    def _forget(self, key: str) -> None:
        for kind in ("odd", "even", "cursor", "heading"):
            self._strips.pop((key, kind), None)

    # -- rendering ----------------------------------------------------------------

    def _line(self, key: str, cells: Sequence[Any], style: Style, post: Style | None) -> Strip:
        console = self.app.console
        segments: list[Segment] = []
        for column, (width, cell) in enumerate(zip(self._widths, cells, strict=False)):
            if column in self._left_out:
                continue
            text = _as_text(cell).copy()
            text.truncate(width, overflow="ellipsis", pad=True)
            text.end = ""
            # each cell carries its place as meta (what a click lands on), which
            # also keeps cells apart in exported screenshots
            meta = Style.from_meta({"row_key": key, "column": column})
            pad = Segment(" " * PADDING, meta)
            segments.append(pad)
            # `Text.render` leaves the text's own style to the caller
            own = console.get_style(text.style, default=None) if text.style else None
            segments.extend(Segment.apply_style(text.render(console), own, meta))
            segments.append(pad)
        width = self._layout_width
        line = Segment.adjust_line_length(segments, width)
        return Strip(Segment.apply_style(line, style, post), width)

    def _heading_line(self, key: str, base: Style) -> Strip:
        strip = self._strips.get((key, "heading"))
        if strip is None:
            style = base + self.get_component_rich_style("board-table--heading")
            text = _as_text(self._cells[key][0]).copy()
            text.truncate(max(self._layout_width - PADDING, 0), overflow="ellipsis")
            meta = Style.from_meta({"row_key": key, "column": 0})
            segments = [Segment(" " * PADDING, meta)]
            segments.extend(Segment.apply_style(text.render(self.app.console), None, meta))
            line = Segment.adjust_line_length(segments, self._layout_width)
            strip = Strip(Segment.apply_style(line, style), self._layout_width)
            self._strips[(key, "heading")] = strip
        return strip

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        if width != self._layout_width:
            self._lay_out(width)
        base = self.rich_style
        if y == 0:  # the header: drawn once per layout, like the rows
            strip = self._strips.get(("", "header"))
            if strip is None:
                header = base + self.get_component_rich_style("board-table--header")
                strip = self._strips[("", "header")] = self._line("", self.labels, header, None)
            return strip
        index = int(self.scroll_y) + y - 1
        if index >= len(self._order):
            return Strip.blank(width, base)
        key = self._order[index]
        if key in self._headings:
            return self._heading_line(key, base)
        kind = "cursor" if index == self.cursor_row else ("odd" if index % 2 else "even")
        strip = self._strips.get((key, kind))
        if strip is None:
            if len(self._strips) > STRIP_CACHE_LIMIT:
                self._strips.clear()
            if kind == "cursor":
                post: Style | None = self.get_component_rich_style("board-table--cursor")
                style = base
            else:
                post = None
                style = base
                if kind == "even":
                    style = base + self.get_component_rich_style("board-table--even-row")
            strip = self._line(key, self._cells[key], style, post)
            self._strips[(key, kind)] = strip
        return strip
