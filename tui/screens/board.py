"""The board: one row per session across every repo, fed by `watch`.

Nothing is polled: a watcher task receives coalesced summaries and the table
is updated in place (a full re-order only when the order changes).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.text import Text
from textual import events, getters, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Container, Vertical
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Footer, Input, Static

from corral.supervisor.actions import SessionFacts, why_not

from .. import grouping
from .. import rows as R
from ..console_app import ConsoleApp
from ..guard import guarded
from ..key_actions import BOARD_KEYS, bindings, by_handler, check_handlers, named
from ..safe_text import safe_text
from ..widgets.board_table import BoardTable, Column
from ..widgets.painted import PaintedStatic
from ..widgets.preview import AgentPreview

if TYPE_CHECKING:
    from corral.supervisor.models import SessionSummary


@dataclass(frozen=True)
class BoardColumn:
    """One board column, said once: the table's column (name, width, how it
    gives way), its cell for a row, and when the board shows it.

    `cell(row)`: what the row shows in it, kept while the row's summary is
    the same. `ticks`: the cell changes with the clock alone (an age), so it
    is `ticking(row, now)`, made at every draw (such columns come last).
    `shown(with_hosts)`: whether the board shows it at all."""

    column: Column
    cell: Callable[[SessionSummary], object] | None = None
    ticking: Callable[[SessionSummary, float], object] | None = None
    shown: Callable[[bool], bool] = lambda with_hosts: True

    @property
    def ticks(self) -> bool:
        return self.ticking is not None


def _iterations(row: SessionSummary) -> str:
    return f"{row.iterations}/{row.max_iterations}" if row.iterations else ""


def _age(row: SessionSummary, now: float) -> str:
    return R.age(now - row.updated_at)


INTENT_WANTED = 30  # cells of intent kept on a narrow terminal before columns give way
NEEDS_WANTED = 30  # cells of needs-you kept whole ("contract awaiting confirmation")

# the drop order: least useful first (at 80 columns the board keeps state,
# needs-you, the intent and its age)
COLUMNS: tuple[BoardColumn, ...] = (
    BoardColumn(Column("glyph", " "), R.glyph),
    BoardColumn(Column("state", "State", cap=16), R.state_text),
    BoardColumn(
        Column("needs", "Needs you", cap=20, soft_cap=NEEDS_WANTED),
        R.needs_text,
    ),
    BoardColumn(Column("intent", "Intent", flex=True), R.intent_text),
    BoardColumn(Column("repo", "Repo", drop_order=3), R.repo_name),
    BoardColumn(
        Column("host", "Host", drop_order=0),
        R.host_name,
        shown=lambda with_hosts: with_hosts,  # only where [[hosts]] are configured
    ),
    BoardColumn(Column("engine", "Engine", drop_order=1), R.engine_text),
    # git stats: narrow when there are none; the preview beside the board comes
    # first (an over-budget row says so in its needs-you cell too)
    BoardColumn(
        Column("changes", "±", drop_order=4, unbudgeted=True),
        R.changes_text,
    ),
    # tokens and USD from the agents' own records: left out until one recorded any
    BoardColumn(
        Column("cost", "$", drop_order=5, unbudgeted=True, vanishing=True),
        R.cost_text,
    ),
    BoardColumn(Column("iter", "Iter", drop_order=2), _iterations),
    BoardColumn(Column("updated", "Updated", drop_order=6), ticking=_age),
)

# the board's action names where the supervisor's table names them otherwise


def facts_of(row: SessionSummary) -> SessionFacts:
    return SessionFacts(
        session_id=row.session_id,
        state=row.state,
        needs_you=row.needs_you,
        dormant=row.dormant,
        live=row.live,
        worktree=row.worktree,
        result_branch=row.result_branch,
    )


ANNOUNCE_GATHER = 0.3  # seconds: needs-you changes this close together make one toast
FIRST_PAINT_ROWS = 200  # rows laid out for the first frame of a big board (more than fit)
CELLS_AT_A_TIME = 500  # rows whose cells are made between two turns of the event loop
CELLS_PAUSE = 0.01  # seconds between those batches
PREVIEW_MIN = (120, 30)  # the preview shows from the start on a terminal at least this big
PREVIEW_BESIDE_WIDTH = 160  # ... beside the board from this width, below it under it
PREVIEW_FOLLOW_SECS = 0.06  # the preview follows the cursor once it rests this long
PREVIEW_BESIDE_SHARE = 0.45  # at most this share of the width beside the board ...
PREVIEW_BESIDE_MIN = 40  # ... and never narrower than this (below the board instead)


class BoardScreen(Screen[None]):
    app = getters.app(ConsoleApp)

    # help and quit first: a narrow footer cuts from the right, never them
    BINDINGS = bindings(BOARD_KEYS)

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        super().__init__()
        self.clock = clock
        # the time the ages are counted to: read on the ages' own tick (and on a
        # whole snapshot), not on each row's change (a second that passed would
        # change every age, and repaint every line, on each update)
        self._age_now = clock()
        # the keys of the row actions, as pressed: a key that does not apply says why
        # (the keys `[keys]` gave them, once the app is known: see on_mount)
        self.row_keys: dict[str, str] = {}
        self.summaries: dict[str, SessionSummary] = {}
        self.order: list[str] = []  # the shown sessions' ids, top to bottom
        self.grouped = False  # rows under a heading per repo (`g`; this console run only)
        self._lines: list[str] = []  # the table's keys: `order`, with headings when grouped
        self._titles: dict[str, Text] = {}  # heading key → its title
        self.filter = "all"
        self.search = ""
        self.found: frozenset[str] = frozenset()  # ids the supervisor's search matched
        self._footer_keys: object = object()  # what the footer last showed keys for
        self._pending_select: str | None = None  # a session just started: the cursor goes there
        self._announcing: dict[str, SessionSummary] = {}
        self._announce_timer: Timer | None = None
        self.preview_wanted = False
        self._preview_width: int | None = None  # cells beside the board (None: below it)
        self._first_paint = False  # only the rows that fit are in the table (see replace_all)
        self._preview_timer: Timer | None = None
        self.with_hosts = False  # a Host column (set when composed)
        self._set_columns(self.with_hosts)
        self._kept_cells: dict[str, tuple[SessionSummary, tuple[object, ...]]] = {}
        self._counts_shown: str | None = None  # the counts line as last written

    def compose(self) -> ComposeResult:
        # the Host column only where [[hosts]] are configured
        self.with_hosts = bool(self.app.host_names())
        self._set_columns(self.with_hosts)
        with Vertical():
            yield PaintedStatic("", id="counts")
            with Container(id="board-area"):
                yield BoardTable(
                    [c.column for c in self.board_columns], flex_wanted=INTENT_WANTED, id="board"
                )
                preview = AgentPreview(id="preview")
                preview.display = False
                yield preview
            empty = Static(
                "No sessions yet. Press n to start one: describe the task, review the contract "
                "that defines done, and corral runs the agent in its own worktree.",
                id="empty",
            )
            empty.display = False  # until the first rows say the board is empty
            yield empty
            search = Input(
                placeholder="search intent, repo, host:NAME or id — enter also searches events "
                "and transcripts, escape clears",
                id="search",
                select_on_focus=False,  # what was typed before it had the focus stays
            )
            search.display = False
            yield search
        yield Footer()

    @property
    def table(self) -> BoardTable:
        return self.query_one("#board", BoardTable)

    @property
    def preview(self) -> AgentPreview:
        return self.query_one("#preview", AgentPreview)

    def on_mount(self) -> None:
        keys = self.app.keys
        self.row_keys = {
            keys.get(b.id or "", b.key.split(",")[0]): b.action
            for b in self.BINDINGS
            if isinstance(b, Binding) and b.action in self.ROW_ACTIONS
        }
        size = self.app.size
        self.show_preview(size.width >= PREVIEW_MIN[0] and size.height >= PREVIEW_MIN[1])
        self.follow_board()
        self.age_timer = self.set_interval(5, self._refresh_ages)

    @work(exclusive=True, group="board-watch")
    @guarded("The board")
    async def follow_board(self) -> None:
        app = self.app
        if not app.opened.is_set():
            # the stored rows, said to be so ("opening…"), only until the
            # supervisor has opened; then its live rows replace them
            if app.first_rows is not None:
                self.replace_all(app.first_rows)
            await app.opened.wait()
        from corral.supervisor.interface import WatchDropped  # after the first frame

        supervisor = app.supervisor
        while True:
            rows, watcher = supervisor.watch()
            self.replace_all(rows)
            try:
                while True:
                    self.apply(await watcher.get())
            except WatchDropped:
                continue  # resync with a fresh snapshot
            finally:
                supervisor.unwatch(watcher)

    # -- rendering ----------------------------------------------------------

    def _set_columns(self, with_hosts: bool) -> None:
        """The columns shown, and their cells' makers in order (kept, then ticking)."""
        self.board_columns = tuple(c for c in COLUMNS if c.shown(with_hosts))
        kept = [c.cell for c in self.board_columns if c.cell is not None]
        ticking = [c.ticking for c in self.board_columns[len(kept) :] if c.ticking is not None]
        assert len(kept) + len(ticking) == len(self.board_columns), "ticking columns come last"
        self._kept_cells_of = kept
        self._ticking_cells_of = ticking

    def _cells_of(self, session_id: str) -> tuple[object, ...]:
        """A row's cells: all but its age are kept while its summary is the
        same object (a changed session brings a new one) or an equal one (the
        live rows replacing the stored ones), so a board update does not remake
        10,000 rows' cells."""
        title = self._titles.get(session_id)
        if title is not None:
            return (title,)
        row = self.summaries[session_id]
        kept = self._kept_cells.get(session_id)
        if kept is None or (kept[0] is not row and kept[0] != row):
            kept = (row, self._fixed_cells(row))
            self._kept_cells[session_id] = kept
        return (*kept[1], *self._ticking_cells(row))

    def _cells(self, row: SessionSummary) -> tuple[object, ...]:
        return (*self._fixed_cells(row), *self._ticking_cells(row))

    def _fixed_cells(self, row: SessionSummary) -> tuple[object, ...]:
        return tuple([cell(row) for cell in self._kept_cells_of])

    def _ticking_cells(self, row: SessionSummary) -> tuple[object, ...]:
        now = self._age_now  # ages tick on their own timer, not with every row change
        return tuple([ticking(row, now) for ticking in self._ticking_cells_of])

    def replace_all(self, rows: list[SessionSummary]) -> None:
        """A whole snapshot. The first one of a big store paints the rows that
        fit on screen (and the counts of all) first; the other rows' cells are
        made a few hundred at a time, letting that frame out, and then shown."""
        first = not self.summaries and len(rows) > FIRST_PAINT_ROWS
        self._age_now = self.clock()
        self.summaries = {r.session_id: r for r in rows}
        self._kept_cells = {k: v for k, v in self._kept_cells.items() if k in self.summaries}
        self._first_paint = first
        self._rebuild()
        if first:
            self.run_worker(self._finish_first_paint(), exclusive=True, group="first-paint")
        elif not self.app.board_shown.is_set():
            self.query_one("#counts", PaintedStatic).when_painted(self._say_shown)

    def _say_shown(self) -> None:
        """The board's frame is out: what waits for it (building the
        supervisor) may start. A frame drawn while the app's mount handler runs
        is never written (Textual batches it): then the next one counts."""
        if self.app.mount_done:
            self.app.board_shown.set()
        else:
            self.query_one("#counts", PaintedStatic).when_painted(self._say_shown)

    async def _finish_first_paint(self) -> None:
        order = list(self.order)
        for start in range(FIRST_PAINT_ROWS, len(order), CELLS_AT_A_TIME):
            # a pause, not just a turn: the first frame waits for the app's
            # start-up and the footer to settle, which wait for the loop
            await asyncio.sleep(CELLS_PAUSE)
            for sid in order[start : start + CELLS_AT_A_TIME]:
                if sid in self.summaries:
                    self._cells_of(sid)
        self._first_paint = False
        self._rebuild()
        self.query_one("#counts", PaintedStatic).when_painted(self._say_shown)

    def _announce(self, row: SessionSummary) -> None:
        """A session started needing the operator. Announcements arriving
        together become one toast (and one bell), and none is made for the
        session the operator is already looking at."""
        self._announcing[row.session_id] = row
        if self._announce_timer is None:
            self._announce_timer = self.set_timer(ANNOUNCE_GATHER, self._flush_announcements)

    def _flush_announcements(self) -> None:
        self._announce_timer = None
        on_screen = getattr(self.app.screen, "session_id", None)
        rows = [r for sid, r in self._announcing.items() if sid != on_screen]
        self._announcing = {}
        text = R.announcement(rows)
        if text is None:
            return
        title, body = text
        self.app.bell()
        # on a narrow terminal a toast covers rows that say the same ("!"): brief there
        self.notify(body, title=title, timeout=6 if self.app.size.width >= 100 else 3)
        headline = rows[0].needs_you_label if len(rows) == 1 else title
        self.app.desktop_notify(f"corral: {headline}", body)

    def shown_rows(self) -> list[SessionSummary]:
        """The rows the filter and search let through, in board order (not
        `visible`: that is Textual's own property, read for the focus chain)."""
        rows = R.filtered(list(self.summaries.values()), self.filter, self.search, self.found)
        return R.ordered(rows)

    def apply(self, changed: list[SessionSummary]) -> None:
        for row in changed:
            before = self.summaries.get(row.session_id)
            if row.needs_you is not None and (before is None or before.needs_you != row.needs_you):
                self._announce(row)
            self.summaries[row.session_id] = row
        self._rebuild()

    def _rebuild(self) -> None:
        """Show the visible rows in order; the table changes only what differs.
        Once the operator has picked a row the cursor stays on that session as
        rows move; until then it stays on the top row (the most urgent one)."""
        table = self.table
        selected = self.selected_id() if table.cursor_chosen else None
        shown = self.shown_rows()
        self.order = [r.session_id for r in shown]
        if self._first_paint:
            shown = shown[:FIRST_PAINT_ROWS]
        if self.grouped:
            self._lines, self._titles = grouping.group_lines(shown)
        else:
            self._lines, self._titles = [r.session_id for r in shown], {}
        table.show(self._lines, self._cells_of, frozenset(self._titles))
        index = table.index_of(selected) if selected else None
        if index is not None and index != table.cursor_row:
            table.move_cursor(row=index, chosen=False)
        self._select_pending()
        self._update_counts()
        self._sync_bindings()  # the selected row's state may have changed
        if self.preview_wanted:
            self._place_preview()  # the board's columns may want more (or less) now
        self.preview.follow(self.selected_id())

    def refresh_header(self) -> None:
        if self.is_mounted:
            self._update_counts()

    def _update_counts(self) -> None:
        rows = list(self.summaries.values())
        line = R.counts_line(rows)
        spent = R.spend_line(rows)
        if spent:
            line += f"  ·  {spent}"
        if not self.app.opened.is_set():
            line += "  ·  opening… (stored rows; keys that act on sessions wait)"
        if self.grouped:
            line += "  ·  grouped by repo (g: one list)"
        if self.app.agents_note:
            line += f"  ·  {self.app.agents_note}"
        if self.filter != "all" or self.search:
            shown = f"showing {len(self.order)}: {R.filter_words(self.filter)}"
            if self.search:
                shown = f"{len(self.order)} matching “{self.search}”"
                if self.filter != "all":
                    shown += f" in {R.filter_words(self.filter)}"
                shown += " (esc clears)"
            line += f"  ·  {shown}"
        if line != self._counts_shown:
            # one line, its height set by the stylesheet: a repaint, never a layout
            self._counts_shown = line
            self.query_one("#counts", Static).update(safe_text(line), layout=False)
        empty = self.query_one("#empty", Static)
        empty.display = not rows
        table = self.table
        if table.display != bool(rows):  # the hint sits under the counts, not the empty table
            table.display = bool(rows)
            self.query_one("#board-area").display = bool(rows)
            if rows and self.focused is None:
                table.focus()
        want = self.preview_wanted and bool(rows)
        if self.preview.display != want:
            self.preview.show(want)

    def _refresh_ages(self) -> None:
        """Ages tick; only the cells whose text changed are rewritten."""
        self._age_now = self.clock()
        self.table.show(self._lines, self._cells_of, frozenset(self._titles))

    # -- actions --------------------------------------------------------------

    def selected_id(self) -> str | None:
        return self.table.key_at(self.table.cursor_row)

    def selected(self) -> SessionSummary | None:
        sid = self.selected_id()
        return self.summaries.get(sid) if sid else None

    def action_cycle_filter(self) -> None:
        names = R.filter_cycle(list(self.summaries.values()))
        at = names.index(self.filter) if self.filter in names else -1
        self.filter = names[(at + 1) % len(names)]
        self._rebuild()

    def action_toggle_groups(self) -> None:
        """Rows under one heading per repo, or one list again."""
        self.grouped = not self.grouped
        self._rebuild()

    def action_search(self) -> None:
        search = self.query_one("#search", Input)
        search.display = True
        search.focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        """As you type: the rows narrow at each key (events and transcripts are
        searched too once Enter is pressed)."""
        if event.input.id == "search" and event.input.display:
            self.search = event.value.strip()
            self.found = frozenset()
            self._rebuild()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "search":
            self.search = event.value.strip()
            self.found = frozenset()
            event.input.display = False
            self.table.focus()
            self._rebuild()
            if self.search:
                self._search_everywhere(self.search)

    @work(exclusive=True, group="board-search")
    @guarded("The search")
    async def _search_everywhere(self, text: str) -> None:
        """Sessions whose events or agent transcript hold the words, too."""
        await self.app.opened.wait()
        found = await self.app.supervisor.search(text)
        if self.search == text:
            self.found = frozenset(found)
            self._rebuild()

    def on_key(self, event: events.Key) -> None:
        search = self.query_one("#search", Input)
        if self._search_on_its_way() and event.is_printable:
            # typed right after `/`, before the field took the focus: it is the
            # search's text, never a board key (an `x` there cancelled a session)
            search.focus()
            search.insert_text_at_cursor(event.character or "")
            event.stop()
            event.prevent_default()
            return
        action = self.row_keys.get(event.key)
        if action is not None and self.app.opened.is_set():
            why = self.refusal(action)
            if why is not None:  # a key that does not apply says why, once pressed
                self.notify(why[0].upper() + why[1:] + ".", severity="warning", timeout=4)
                event.stop()
                return
        if event.key == "escape" and (search.display or self.search):
            search.value = ""
            search.display = False
            self.search = ""
            self.found = frozenset()
            self.table.focus()
            self._rebuild()
            event.stop()

    def action_next_needs_you(self) -> None:
        shown = self.table.row_keys()
        if not shown:
            return
        start = max(self.table.cursor_row, 0)
        n = len(shown)
        for step in range(1, n + 1):
            idx = (start + step) % n
            row = self.summaries.get(shown[idx])  # None: a repo's heading
            if row is not None and row.needs_you is not None:
                self.table.move_cursor(row=idx)
                return
        self.notify("Nothing needs you right now.", timeout=3)

    def on_board_table_row_highlighted(self, event: BoardTable.RowHighlighted) -> None:
        self._sync_bindings()
        # the cursor's frame goes out alone; the preview (a whole agent screen
        # to draw) follows once the cursor rests, not for every row passed
        if self._preview_timer is not None:
            self._preview_timer.stop()
        self._preview_timer = self.set_timer(PREVIEW_FOLLOW_SECS, self._preview_follows)

    def _preview_follows(self) -> None:
        self._preview_timer = None
        self.preview.follow(self.selected_id())

    # -- the live preview of the selected agent -----------------------------------

    def show_preview(self, visible: bool) -> None:
        """Beside the board on a wide terminal, below it otherwise."""
        self.preview_wanted = visible
        self._place_preview()
        self.preview.follow(self.selected_id())
        self.preview.show(visible and bool(self.summaries))

    def _place_preview(self) -> None:
        """Beside the board when it still leaves the board the width its
        columns want (state and needs-you whole, the intent its 30 cells), at
        most PREVIEW_BESIDE_SHARE of the screen; below the board otherwise."""
        width = self.app.size.width
        room = min(int(width * PREVIEW_BESIDE_SHARE), width - self.table.wanted_width())
        beside = width >= PREVIEW_BESIDE_WIDTH and room >= PREVIEW_BESIDE_MIN
        self.query_one("#board-area").set_class(beside, "-beside")
        wanted = room if beside else None
        if wanted != self._preview_width:
            self._preview_width = wanted
            self.preview.styles.width = wanted  # None: the stylesheet's (the full width)

    def on_resize(self) -> None:
        self._place_preview()

    def action_toggle_preview(self) -> None:
        self.show_preview(not self.preview_wanted)

    def _sync_bindings(self) -> None:
        """Redraw the footer only when the selected row's keys change: the
        footer rebuilds its widgets, too slow to do on every move or update."""
        row = self.selected()
        shown = (
            None
            if row is None
            else (row.needs_you, row.state, row.archived, row.dormant, row.worktree is not None)
        )
        keys = (self.app.opened.is_set(), shown)
        if keys != self._footer_keys:
            self._footer_keys = keys
            self.refresh_bindings()

    # the keys the supervisor's table rules on (the selected row's), by handler
    ROW_ACTIONS = {k.handler: k for k in BOARD_KEYS if k.guard is not None}
    ROW_GUARDS = by_handler(ROW_ACTIONS.values())

    LOOK_ACTIONS = named(
        BOARD_KEYS, "cycle_filter", "toggle_groups", "search", "toggle_preview", "next_needs_you"
    )

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The footer offers a session's keys only when the selected row can
        take them (a contract to confirm, a diff or finding to approve ...).
        While the supervisor opens, only the keys that look are offered."""
        if not self.app.opened.is_set() and action not in self.LOOK_ACTIONS:
            return False
        if self._search_on_its_way():
            return False  # a key typed right after `/` is the search's text (see on_key)
        if action not in self.ROW_GUARDS:
            return True
        return self.refusal(action) is None

    def _search_on_its_way(self) -> bool:
        """The search field is shown but has not taken the focus yet."""
        try:
            search = self.query_one("#search", Input)
        except NoMatches:
            return False
        return bool(search.display) and self.focused is not search

    def refusal(self, action: str) -> str | None:
        """Why the selected row cannot take `action` now (the supervisor's
        table), None when it can."""
        row = self.selected()
        if row is None:
            return "select a session first"
        guard = self.ROW_GUARDS[action].guard
        assert guard is not None
        return why_not(guard, facts_of(row))

    def on_board_table_row_selected(self, event: BoardTable.RowSelected) -> None:
        if not self.app.opened.is_set():
            self.notify("Opening the store: the session opens in a moment; press enter again.")
            return
        self.action_open()

    def action_open(self) -> None:
        row = self.selected()
        if row is not None:
            from .session import SessionScreen

            self.app.push_screen(SessionScreen(row.session_id))

    def action_tasks(self) -> None:
        from .tasks import TasksScreen

        self.app.push_screen(TasksScreen())

    def action_adopt(self) -> None:
        from .adopt import AdoptScreen

        self.app.push_screen(AdoptScreen())

    def action_review_diff(self) -> None:
        row = self.selected()
        if row is None or row.needs_you != "merge":
            self.notify("Select a session with a diff ready for approval.", severity="warning")
            return
        from .diff import DiffScreen

        self.app.push_screen(DiffScreen(row.session_id))

    def action_open_worktree(self, editor: bool = False) -> None:
        row = self._selected_or_warn()
        if row is not None:
            self.app.actions.open_worktree(row.session_id, row.worktree, editor=editor)

    def action_discuss(self) -> None:
        from pathlib import Path

        from .discuss import DiscussScreen

        row = self.selected()
        repo = self.app.default_repo or (Path(row.repo) if row else None)
        if repo is None:
            self.notify("Open corral in a repository to discuss it.", severity="warning")
            return
        self.app.push_screen(DiscussScreen(Path(repo)))

    def action_new(self) -> None:
        from .new_session import NewSessionScreen

        self.app.push_screen(NewSessionScreen())

    def _selected_or_warn(self) -> SessionSummary | None:
        row = self.selected()
        if row is None:
            self.notify("Select a session first.", severity="warning")
        return row

    def _run(self, label: str, coro_factory: Callable[[str], Awaitable[object]]) -> None:
        if (row := self._selected_or_warn()) is not None:
            self.app.actions.run(label, coro_factory(row.session_id))

    def action_confirm(self) -> None:
        if (row := self._selected_or_warn()) is not None:
            self.app.actions.confirm_contract(row.session_id)

    def action_approve(self) -> None:
        row = self._selected_or_warn()
        if row is not None and row.needs_you == "finding":
            self.app.actions.approve("Accept finding", row.session_id, accept_finding=True)
        elif row is not None and not self._reviewed_first(row.session_id):
            self.app.actions.approve("Approve", row.session_id, delivery="branch")

    def action_approve_checkout(self) -> None:
        row = self._selected_or_warn()
        if row is not None and not self._reviewed_first(row.session_id):
            self.app.actions.approve("Apply to checkout", row.session_id, delivery="checkout")

    def _reviewed_first(self, session_id: str) -> bool:
        """A quick approve of a pass that needed a re-run opens its review
        instead (the diff, with *flaky* under the check): a person decides
        that having seen it, never in one keystroke from the board."""
        if not self.app.actions.flaky_lines(session_id):
            return False
        from .diff import DiffScreen

        self.notify(
            "A check passed only on its re-run: review it here, then approve (ctrl+a).",
            title="Flaky",
            severity="warning",
            timeout=8,
        )
        self.app.push_screen(DiffScreen(session_id))
        return True

    def action_reverify(self) -> None:
        """Says at once that it started, and then how the checks came out."""
        row = self._selected_or_warn()
        if row is None:
            return
        if row.needs_you != "merge":
            self.notify(
                "Re-verify needs a session with a diff waiting for approval.", severity="warning"
            )
            return
        self.notify(
            f"Re-verifying {row.label}: the contract re-runs on its worktree as it is now.",
            title="Re-verify",
            timeout=4,
        )
        self.app.actions.run(
            "Re-verify", self.app.supervisor.reverify(row.session_id), outcome=R.checks_outcome
        )

    def action_revive(self) -> None:
        sup = self.app.supervisor
        self._run("Revive", lambda sid: sup.revive(sid))

    def action_reject(self) -> None:
        if (row := self._selected_or_warn()) is not None:
            self.app.actions.reject(row.session_id)

    def action_cancel_session(self) -> None:
        if (row := self.selected()) is not None:
            self.app.actions.cancel(row.session_id)

    def action_retry(self) -> None:
        """R brings a session back: a dormant one's agent resumes its own
        conversation; a failed or cancelled one starts again afresh."""
        if (row := self._selected_or_warn()) is None:
            return
        if row.dormant:
            self.action_revive()
        else:
            self.app.actions.retry(
                row.session_id, then=lambda r: self.select_when_shown(r.session_id)
            )

    def action_archive(self) -> None:
        if (row := self._selected_or_warn()) is not None:
            self.app.actions.toggle_archive(row.session_id)

    def action_delete_session(self) -> None:
        if (row := self._selected_or_warn()) is not None:
            self.app.actions.delete(row.session_id)

    def action_push_branch(self) -> None:
        if (row := self._selected_or_warn()) is not None:
            self.app.actions.push(row.session_id)

    def action_pull_request(self) -> None:
        if (row := self._selected_or_warn()) is not None:
            self.app.actions.pull_request(row.session_id)

    def action_rename(self) -> None:
        if (row := self._selected_or_warn()) is not None:
            self.app.actions.rename(row.session_id)

    # -- after Start in the new-session form, the cursor goes to the new session

    def select_when_shown(self, session_id: str) -> None:
        """Put the cursor on `session_id` now, or as soon as its row arrives."""
        self._pending_select = session_id
        self._select_pending()

    def _select_pending(self) -> None:
        sid = self._pending_select
        index = self.table.index_of(sid) if sid else None
        if index is not None:
            self._pending_select = None
            self.table.move_cursor(row=index)


check_handlers(BoardScreen, BOARD_KEYS)
