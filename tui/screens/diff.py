"""Gate 2: the verified diff, with per-file and per-hunk approval.

Left: files with +/− counts and change kind, each with a tick. Middle: the
selected file's hunks, each with a tick. Right: that file's diff, syntax
highlighted (only the selected file is rendered, so big diffs stay quick),
and the runtime verification results. `ctrl+a` delivers the ticked part to
a branch, `ctrl+o` applies it to the checkout (never a letter: typing cannot
pass the gate); the supervisor re-runs the contract
on a partial selection before delivering it.

When the work changed how it is judged (a test, test configuration or test
script; added code reaching into the test harness), that is listed first, in
its own block, with the checks' results on the agent's versions; approving
here accepts it (this screen is where a person sees it).

Under 100 columns the file list starts folded away (`f` toggles it; the
operator's choice then holds across resizes) and the diff takes the width.
Everything needed to decide stays on screen: a line under the header names
the file shown (its tick, counts, n of m), `n`/`p` step through the files,
space ticks the file shown, and the runtime verification (with any change
to how the work is judged) heads the diff's own scroll area.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.syntax import Syntax
from textual import events, getters, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, ScrollableContainer, Vertical
from textual.content import Content
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from corral.supervisor.errors import CorralError
from corral.supervisor.interface import FilePatch, unseen_regressions

from ..console_app import ConsoleApp
from ..guard import guarded
from ..rows import ATTRIBUTE_DRIVERS_WORDS
from ..safe_text import safe_content, safe_markup, safe_text, visible

if TYPE_CHECKING:
    from corral.supervisor.remote import OwnerSurface

MAX_RENDER_LINES = 4000
MAX_LINE_CHARS = 2000  # characters of one diff line shown (a 1 MB line is cut)
NARROW = 120  # columns under which the file list gives the diff most of the width
FOLDED_BELOW = 100  # columns under which the file list starts folded away
TICK, UNTICK, PARTIAL = "☑", "☐", "◩"


def selection_of(files: list[FilePatch], ticked: dict[str, set[int] | None]) -> dict | None:
    """None when everything is ticked (deliver all), else path → hunks."""
    full = all(
        f.path in ticked and (ticked[f.path] is None or ticked[f.path] == set(range(len(f.hunks))))
        for f in files
    )
    return None if full else dict(ticked)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _verification_notes(flaky: list[str], already: list[str], placed: int = 0) -> list[Content]:
    """Under a check at gate 2: tests that failed then passed on an immediate
    re-run (flaky, not counted as a regression, never passed silently), and
    tests that already failed at gate 1 (a regression in them cannot be seen)."""
    notes: list[Content] = []
    if flaky:
        notes.append(
            safe_markup(
                "  [bold yellow]flaky[/bold yellow]: failed, then passed on an immediate re-run "
                "(not counted as a regression): {}",
                ", ".join(flaky[:5]) + (f" and {len(flaky) - 5} more" if len(flaky) > 5 else ""),
            )
        )
    if already:
        notes.append(
            safe_markup(
                "  [yellow]already failing at gate 1[/yellow]: {} ({})",
                ", ".join(already[:5])
                + (f" and {len(already) - 5} more" if len(already) > 5 else ""),
                unseen_regressions(len(already), placed),
            )
        )
    return notes


class DiffScreen(Screen[None]):
    app = getters.app(ConsoleApp)

    BINDINGS = [
        Binding("escape", "back", "Back"),
        Binding("space", "toggle_tick", "Tick / untick", priority=True),
        # what passes the gate is on control keys: letters typed here do nothing
        Binding("ctrl+a", "approve('branch')", "Approve → branch"),
        Binding("ctrl+o", "approve('checkout')", "Apply to checkout"),
        Binding("d", "toggle_discard", "Keep/discard rest"),
        Binding("f", "toggle_files", "Files"),
        Binding("n", "step_file(1)", "Next file", show=False),  # the strip says n/p
        Binding("p", "step_file(-1)", "Prev file", show=False),
        Binding("ctrl+r", "reject", "Reject"),
        Binding("question_mark", "app.help", "Help"),
    ]

    def __init__(self, session_id: str) -> None:
        super().__init__()
        self.session_id = session_id
        self.files: list[FilePatch] = []
        self.ticked: dict[str, set[int] | None] = {}
        self.current: FilePatch | None = None
        self.discard_rest = False
        self.files_shown: bool | None = None  # the operator's `f` (None: by the width)

    def compose(self) -> ComposeResult:
        yield Static("", id="diff-header")
        yield Static("", id="diff-strip")  # the file shown, while the file list is folded
        with Horizontal(id="diff-main"):
            with Vertical(id="diff-left"):
                files: DataTable[object] = DataTable(id="diff-files", cursor_type="row")
                files.add_columns("", "File", "+", "−", "Change")
                yield files
                hunks: DataTable[object] = DataTable(id="diff-hunks", cursor_type="row")
                hunks.add_columns("", "Hunk", "+", "−")
                yield hunks
                yield Static("", id="diff-verification")
            # scrolls both ways (arrows once focused, tab reaches it): long lines are read whole
            with ScrollableContainer(id="diff-body"):
                yield Static("", id="diff-verification-inline")  # while the list is folded
                yield Static("", id="diff-text", expand=False, shrink=False)
        yield Footer()

    @property
    def supervisor(self) -> OwnerSurface:
        return self.app.supervisor

    def on_mount(self) -> None:
        self._fit(self.app.size.width)
        self.load()

    def on_resize(self, event: events.Resize) -> None:
        self._fit(event.size.width)

    def _fit(self, width: int) -> None:
        """Under 120 columns the file list is narrower, under 100 it starts
        folded (unless the operator chose with `f`), so the diff keeps the width."""
        self.set_class(width < NARROW, "-narrow")
        shown = self.files_shown if self.files_shown is not None else width >= FOLDED_BELOW
        self._show_files(shown)

    def _show_files(self, shown: bool) -> None:
        left = self.query_one("#diff-left")
        left.display = shown
        self.query_one("#diff-strip").display = not shown
        self.query_one("#diff-verification-inline").display = not shown
        if not shown and self.focused is not None and left in self.focused.ancestors:
            self.query_one("#diff-body").focus()

    @work(exclusive=True, group="diff-load")
    @guarded("Loading the diff")
    async def load(self) -> None:
        try:
            self.files = await self.supervisor.review_files(self.session_id)
        except CorralError as exc:
            self.query_one("#diff-header", Static).update(safe_markup("[red]{}[/red]", exc))
            return
        self.ticked = {f.path: None for f in self.files}
        self._render_files()
        if self.files:
            self._select(self.files[0])
        self._render_verification()
        if not self.query_one("#diff-left").display:
            self.query_one("#diff-body").focus()

    # -- rendering ------------------------------------------------------------

    def _header(self) -> None:
        detail = self.supervisor.get(self.session_id)
        total = len(self.files)
        chosen = sum(1 for f in self.files if f.path in self.ticked)
        partial = selection_of(self.files, self.ticked) is not None
        if partial:
            left_out = sum(
                len(f.hunks) - len(kept)
                for f in self.files
                if isinstance(kept := self.ticked.get(f.path), set)
            )
            scope = f"part of the diff: {chosen} of {_count(total, 'file')}" + (
                f", {_count(left_out, 'hunk')} left out" if left_out else ""
            )
        else:
            scope = "everything"
        rest = "discarded" if self.discard_rest else "kept in the worktree"
        authorship = detail.session.authorship()
        self.query_one("#diff-header", Static).update(
            safe_markup("[b]{}[/b]\n", detail.session.intent.splitlines()[0])
            + (safe_content(authorship + "\n", multiline=True) if authorship else Content())
            + Content(f"Approving {scope}")
            + Content(
                f" — the rest is {rest}; the contract is re-run on the approved part first"
                if partial
                else ""
            )
        )

    def _render_files(self) -> None:
        table = self.query_one("#diff-files", DataTable)
        cursor = table.cursor_row
        table.clear()
        for f in self.files:
            ticked = self.ticked.get(f.path, "absent")
            mark = TICK if ticked is None else (UNTICK if ticked == "absent" else PARTIAL)
            # Text, not str: a DataTable reads str cells as markup, and paths may hold brackets
            table.add_row(
                mark, safe_text(f.path), str(f.added), str(f.removed), f.change, key=f.path
            )
        if self.files:
            table.move_cursor(row=min(max(cursor, 0), len(self.files) - 1))
        self._header()
        self._render_strip()

    def _render_strip(self) -> None:
        """One line that names the file shown while the list is folded away."""
        f = self.current
        if f is None:
            return
        ticked = self.ticked.get(f.path, "absent")
        mark = TICK if ticked is None else (UNTICK if ticked == "absent" else PARTIAL)
        place = f"{self.files.index(f) + 1} of {_count(len(self.files), 'file')}"
        self.query_one("#diff-strip", Static).update(
            Content(f"{mark} ")
            + safe_content(f.path)
            + Content(f"  +{f.added} −{f.removed} {f.change}  ·  {place}  ·  n/p: next/previous")
        )

    def _render_hunks(self, f: FilePatch) -> None:
        table = self.query_one("#diff-hunks", DataTable)
        table.clear()
        kept = self.ticked.get(f.path, "absent")
        for i, h in enumerate(f.hunks):
            on = kept is None or (isinstance(kept, set) and i in kept)
            label = f"@@ -{h.old_start} +{h.new_start} {h.section.strip()}"[:60]
            table.add_row(
                TICK if on else UNTICK, safe_text(label), str(h.added), str(h.removed), key=str(i)
            )
        table.display = f.hunk_selectable and len(f.hunks) > 1

    def _select(self, f: FilePatch) -> None:
        self.current = f
        self._render_hunks(f)
        self._render_strip()
        lines = f.text().splitlines()
        # the agent's lines, shown (never obeyed) and each cut to a bounded length
        text = "\n".join(visible(line, limit=MAX_LINE_CHARS) for line in lines[:MAX_RENDER_LINES])
        if len(lines) > MAX_RENDER_LINES:
            text += f"\n… {len(lines) - MAX_RENDER_LINES} more lines"
        body = self.query_one("#diff-text", Static)
        if f.change == "binary":
            body.update(safe_text(f"{f.path}: binary file ({f.change}); approved as a whole file"))
        else:
            body.update(Syntax(text, "diff", theme="ansi_dark", word_wrap=False))

    def _render_verification(self) -> None:
        s = self.supervisor.get(self.session_id).session
        lines = [safe_markup("[b]Runtime verification[/b] (corral re-ran every check):")]
        if s.review_tree and s.start_commit:
            lines.append(
                Content(
                    f"on tree {s.review_tree[:12]} (the task's start plus this change) in a fresh"
                    " checkout; a delivery that would write another tree (your checkout, a moved"
                    " HEAD, a part) is checked again first"
                )
            )
        before = {r.name: r.already_failing for r in s.baseline}
        # how many of them the untouched tree's runner said where they fail
        placed = {
            r.name: sum(1 for t in r.already_failing if t in r.tests.failed_at)
            for r in s.baseline
            if r.tests is not None
        }
        for r in s.last_check_results:
            lines.append(
                safe_markup(
                    ("[green]PASS[/green] " if r.passed else "[red]FAIL[/red] ")
                    + "{}"
                    + (" [dim](hidden: held back from the agent)[/dim]" if r.hidden else ""),
                    r.name,
                )
            )
            lines += _verification_notes(r.flaky, before.get(r.name, []), placed.get(r.name, 0))
        held = [r for r in s.last_check_results if r.hidden]
        if held:
            passing = sum(1 for r in held if r.passed)
            lines.append(safe_content(f"{len(held)} hidden check(s) ran: {passing} pass"))
        kinds = s.diff.type_changes if s.diff else []
        if kinds:
            lines.append(
                safe_markup(
                    "[bold yellow]Paths that change kind:[/bold yellow]" + "\n  {}" * len(kinds),
                    *kinds,
                )
            )
        drivers = s.diff.attribute_drivers if s.diff else []
        if drivers:
            lines.append(
                safe_markup(
                    "[bold yellow]{}[/bold yellow]" + "\n  {}" * len(drivers),
                    ATTRIBUTE_DRIVERS_WORDS,
                    *drivers,
                )
            )
        if s.judge_changes:
            judged = [
                safe_markup(
                    "[b red]The work changed how it is judged[/b red] (the checks above ran with "
                    "these files as they were at gate 1; approving accepts the change):"
                )
            ]
            judged += [safe_content(f"  {c.shown()}") for c in s.judge_changes]
            if s.agent_exam_results:
                if any(r.hidden for r in s.last_check_results):
                    judged.append(
                        safe_content(
                            "With the agent's versions (visible checks only: the hidden checks "
                            "ran on the exam alone):"
                        )
                    )
                else:
                    judged.append(safe_content("With the agent's versions:"))
                judged += [
                    safe_markup(
                        ("  [green]PASS[/green] " if r.passed else "  [red]FAIL[/red] ") + "{}",
                        r.name,
                    )
                    for r in s.agent_exam_results
                ]
            lines = [*judged, Content(""), *lines]
        shown = Content("\n").join(lines)
        self.query_one("#diff-verification", Static).update(shown)
        self.query_one("#diff-verification-inline", Static).update(shown)

    # -- interaction ------------------------------------------------------------

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id == "diff-files" and event.row_key.value:
            f = next((f for f in self.files if f.path == event.row_key.value), None)
            if f is not None and f is not self.current:
                self._select(f)

    def action_toggle_tick(self) -> None:
        focused = self.focused
        if self.current is None:
            return
        path = self.current.path
        if isinstance(focused, DataTable) and focused.id == "diff-hunks":
            idx = focused.cursor_row
            kept = self.ticked.get(path, "absent")
            all_hunks = set(range(len(self.current.hunks)))
            if kept is None:
                current = set(all_hunks)
            else:
                current = set(kept) if isinstance(kept, set) else set()
            current ^= {idx}
            if current == all_hunks:
                self.ticked[path] = None
            elif current:
                self.ticked[path] = current
            else:
                self.ticked.pop(path, None)
            self._render_hunks(self.current)
            focused.move_cursor(row=idx)
        else:
            if path in self.ticked:
                self.ticked.pop(path)
            else:
                self.ticked[path] = None
            self._render_hunks(self.current)
        self._render_files()

    def action_toggle_files(self) -> None:
        """Fold the file list away to read the diff full width (or bring it back);
        the choice holds across resizes."""
        self.files_shown = not self.query_one("#diff-left").display
        self._show_files(self.files_shown)
        if self.files_shown:
            self.query_one("#diff-files").focus()

    def action_step_file(self, step: int) -> None:
        """The next or previous file (the list need not be shown)."""
        if self.current is None or not self.files:
            return
        index = (self.files.index(self.current) + step) % len(self.files)
        self.query_one("#diff-files", DataTable).move_cursor(row=index)
        self._select(self.files[index])
        self.query_one("#diff-body").scroll_home(animate=False)

    def action_toggle_discard(self) -> None:
        self.discard_rest = not self.discard_rest
        self._header()

    def action_approve(self, delivery: str) -> None:
        if not any(self.ticked.values()) and not self.ticked:
            self.notify("Nothing is ticked: tick at least one file, or reject.", severity="warning")
            return
        selection = selection_of(self.files, self.ticked)
        self.app.actions.approve(
            f"Approve → {delivery}",
            self.session_id,
            delivery=delivery,
            selection=selection,
            then=self.app.pop_screen,
            discard_rest=self.discard_rest,
            # this screen lists what the work changed in how it is judged
            accept_judge_changes=any(
                c.blocks for c in self.supervisor.get(self.session_id).session.judge_changes
            ),
        )

    def action_reject(self) -> None:
        self.app.actions.reject(self.session_id, then=self.app.pop_screen)

    def action_back(self) -> None:
        self.app.pop_screen()
