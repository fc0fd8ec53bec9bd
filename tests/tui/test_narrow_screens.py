"""Every screen does its job at 80×24: gate 1's checks table gives way by
priority and keeps the baseline verdict; gate 2's diff scrolls both ways and
its file list folds away; the new-session form scrolls to the field in focus."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.widgets import DataTable, Static

from corral.supervisor.api import Supervisor
from corral.tui.app import CorralApp
from corral.tui.screens.diff import DiffScreen
from corral.tui.screens.new_session import NewSessionScreen
from corral.tui.screens.session import SessionScreen
from tests.fakes.scripted import Write, contract

from .conftest import (
    FIXED_NOW,
    board_ready,
    caught_up,
    final_frame,
    make_repo,
    open_from_board,
    scripted_supervisor,
    start_to_approval,
    until,
)

LONG_LINE = "x = " + " + ".join(f"term_{i}" for i in range(40)) + "  # the end of the line\n"
NOISY = (
    "echo 'the suite collected 1234 tests and this last line explains exactly why it failed'"
    " && test -f feature.txt"
)


def _gate_one(tmp_path: Path) -> CorralApp:
    repo = make_repo(tmp_path / "repo")
    drafted = contract(("feature_is_there_and_named_long", NOISY), ("suite_still_passes", "true"))
    sup = scripted_supervisor(
        tmp_path / "state", drafted, clock=lambda: FIXED_NOW, id_factory=lambda: "0" * 23 + "1"
    )

    async def seed(s: Supervisor) -> None:
        await s.start("Add the feature file", repo)

    return CorralApp(sup, default_repo=repo, clock=lambda: FIXED_NOW, on_ready=seed)


def _gate_two(tmp_path: Path) -> CorralApp:
    repo = make_repo(tmp_path / "repo")
    sup = scripted_supervisor(
        tmp_path / "state",
        contract(("wide", "test -f wide.py")),
        [Write("wide.py", LONG_LINE * 3), Write("notes.md", "a note\n")],
        clock=lambda: FIXED_NOW,
        id_factory=lambda: "0" * 23 + "2",
    )
    return CorralApp(
        sup,
        default_repo=repo,
        clock=lambda: FIXED_NOW,
        on_ready=lambda s: start_to_approval(s, "Write the wide file", repo),
    )


def _shown_columns(table: DataTable[Any]) -> list[str]:
    return [str(c.label) for c in table.columns.values()]


async def _gate_one_screen(app: CorralApp, pilot: Any) -> SessionScreen:
    screen = await open_from_board(app, pilot, "enter")
    assert isinstance(screen, SessionScreen)
    table = screen.query_one("#checks", DataTable)
    await until(pilot, "the baseline in the table", lambda: table.row_count == 2)
    await until(pilot, "the baseline verdicts", lambda: "red" in str(table.get_row_at(0)[1:]))
    return screen


@pytest.mark.slow
async def test_gate_one_at_80_columns_keeps_the_baseline_verdict_whole(tmp_path: Path) -> None:
    app = _gate_one(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await board_ready(app, pilot)
        screen = await _gate_one_screen(app, pilot)
        table = screen.query_one("#checks", DataTable)
        shown = _shown_columns(table)
        assert shown[:2] == ["Check", "Baseline"], shown
        assert table.virtual_size.width <= 80, table.virtual_size  # nothing cut off-screen
        assert str(table.get_row_at(0)[1]).startswith("red (proves the work)")
        # a wide terminal shows every column again, with the output's preview
        await pilot.resize_terminal(200, 40)
        await until(
            pilot,
            "every column back",
            lambda: (
                _shown_columns(table) == ["Check", "Command", "Timeout", "Baseline", "Last run"]
            ),
        )
        assert "the suite collected" in str(table.get_row_at(0)[3])


@pytest.mark.slow
async def test_gate_two_diff_at_80_columns_scrolls_right_and_folds_the_file_list(
    tmp_path: Path,
) -> None:
    app = _gate_two(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await board_ready(app, pilot)
        diff = await open_from_board(app, pilot, "D")
        assert isinstance(diff, DiffScreen)
        body = diff.query_one("#diff-body")
        left = diff.query_one("#diff-left")
        await until(pilot, "the wide file's diff", lambda: body.max_scroll_x > 0)
        assert body.size.width >= 40, body.size  # the diff has most of the width
        body.focus()
        await pilot.press("right", "right", "right")
        await until(pilot, "the diff scrolled right", lambda: body.scroll_x > 0)
        await pilot.press("f")  # the file list comes back beside the diff
        await until(pilot, "the file list back", lambda: left.display)
        await pilot.press("f")  # and folds away again: the diff takes the width
        await until(pilot, "the file list hidden", lambda: not left.display)
        await until(pilot, "the diff full width", lambda: body.size.width >= 76)


@pytest.mark.slow
async def test_gate_two_at_80_columns_folds_the_file_list_and_keeps_what_decides(
    tmp_path: Path,
) -> None:
    """Folded by default at 80 columns: the diff has the width, a line names the
    file shown, n/p step through the files, space ticks the file shown, and the
    runtime verification heads the diff; at 200 columns the list is shown."""
    app = _gate_two(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await board_ready(app, pilot)
        diff = await open_from_board(app, pilot, "D")
        assert isinstance(diff, DiffScreen)
        body = diff.query_one("#diff-body")
        strip = diff.query_one("#diff-strip", Static)
        inline = diff.query_one("#diff-verification-inline", Static)
        await until(pilot, "the diff full width", lambda: body.size.width >= 76)
        assert not diff.query_one("#diff-left").display
        assert strip.display and inline.display
        first = diff.current
        assert first is not None
        await until(pilot, "the strip", lambda: first.path in str(strip.render()))
        assert "1 of 2 files" in str(strip.render())
        assert "PASS wide" in str(inline.render()), inline.render()
        await pilot.press("n")
        await until(pilot, "the next file", lambda: diff.current is not first)
        second = diff.current
        assert second is not None and "2 of 2 files" in str(strip.render())
        assert second.path in str(strip.render())
        await pilot.press("space")  # the file shown is left out of the approval
        await until(pilot, "the file unticked", lambda: second.path not in diff.ticked)
        assert str(strip.render()).startswith("☐")
        assert "part of the diff: 1 of 2 files" in str(diff.query_one("#diff-header").render())
        await pilot.press("p")
        await until(pilot, "back to the first", lambda: diff.current is first)
        # a wide terminal: the list is shown (the operator never chose)
        await pilot.resize_terminal(200, 50)
        await until(pilot, "the file list shown", lambda: diff.query_one("#diff-left").display)
        assert not strip.display


@pytest.mark.slow
async def test_the_new_session_form_at_80_by_24_shows_the_field_in_focus(tmp_path: Path) -> None:
    app = _gate_one(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await board_ready(app, pilot)
        await pilot.press("n")
        form = await until(
            pilot,
            "the form",
            lambda: app.screen if isinstance(app.screen, NewSessionScreen) else None,
        )
        for wanted in ("base", "contract", "start"):
            while app.focused is None or app.focused.id != wanted:
                await pilot.press("tab")
            await pilot.pause()
            field = form.query_one(f"#{wanted}")
            await until(
                pilot,
                f"#{wanted} on screen",
                lambda field=field: field.region.height > 0 and field.region.bottom <= 24,
            )


@pytest.mark.slow
def test_gate_one_snapshot_at_80_by_24(snap_compare, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    app = _gate_one(tmp_path)

    async def before(pilot: Any) -> None:
        await board_ready(app, pilot)
        await _gate_one_screen(app, pilot)
        await final_frame(pilot, "gate 1", lambda: caught_up(app.screen))

    assert snap_compare(app, terminal_size=(80, 24), run_before=before)


@pytest.mark.slow
def test_diff_snapshot_at_80_by_24(snap_compare, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    app = _gate_two(tmp_path)

    async def before(pilot: Any) -> None:
        await board_ready(app, pilot)
        await open_from_board(app, pilot, "D")
        await final_frame(pilot, "the diff", lambda: caught_up(app.screen))

    assert snap_compare(app, terminal_size=(80, 24), run_before=before)


@pytest.mark.slow
def test_new_session_form_snapshot_at_80_by_24(snap_compare, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    app = _gate_one(tmp_path)

    async def before(pilot: Any) -> None:
        await board_ready(app, pilot)
        app.clear_notifications()
        await pilot.press("n")
        await until(pilot, "the form", lambda: isinstance(app.screen, NewSessionScreen))
        while app.focused is None or app.focused.id != "contract":
            await pilot.press("tab")
        await final_frame(pilot, "the form scrolled to the contract field")

    assert snap_compare(app, terminal_size=(80, 24), run_before=before)
