"""Toasts never cover the line in focus: the board's cursor row (at the top
or the bottom of the board) and the gate-1 revision input; at 80×24 the
start-up toasts (the demo says two things for 10 s) take at most a third of
the screen."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.geometry import Region
from textual.widgets import Input
from textual.widgets._toast import Toast, ToastRack

from corral.tui.app import CorralApp
from corral.tui.toast_band import band_for, focused_line

from .conftest import board_ready, until
from .test_board_many import _stored_app
from .test_gate_safety import gate_world, open_session, seed_gate

STARTUP = (
    "Other terminals reach this demo with CORRAL_HOME=/tmp/corral-demo-x1y2z3/state "
    "(e.g. corral sessions, corral get <id>).",
    "The control socket could not serve MCP over HTTP: port 8765 is taken; "
    "the socket still serves every command.",
)
SIZES = [(80, 24), (200, 50)]


def _rack(app: Any) -> ToastRack:
    return app.screen.get_child_by_type(ToastRack)


def _toasts(app: Any) -> list[Region]:
    return [t.region for t in _rack(app).query(Toast) if t.region.height]


async def _toasts_shown(app: Any, pilot: Any, n: int) -> list[Region]:
    await until(pilot, f"{n} toasts drawn", lambda: len(_toasts(app)) == n)
    await pilot.pause()
    await pilot.pause()  # the rack is placed after the refresh that drew them
    return _toasts(app)


def _focus_region(app: Any) -> Region:
    line = focused_line(app.screen)
    assert line is not None
    focused = app.screen.focused
    return Region(focused.region.x, line[0], focused.region.width, line[1] - line[0])


def _uncovered(app: Any, toasts: list[Region]) -> None:
    row = _focus_region(app)
    for toast in toasts:
        assert not toast.overlaps(row), (toast, row, app.size)


@pytest.mark.slow
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_toasts_leave_the_board_cursor_row_uncovered(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    app = _stored_app(tmp_path, n=60)
    async with app.run_test(size=size, notifications=True) as pilot:
        board = await board_ready(app, pilot)
        app.clear_notifications()
        table = board.table
        # the cursor on the board's last visible line: where toasts used to land
        last = table.content_region.height - 2
        table.move_cursor(row=last)
        await pilot.pause()
        assert focused_line(app.screen) is not None
        for words in STARTUP:
            app.notify(words, timeout=20)
        toasts = await _toasts_shown(app, pilot, 2)
        _uncovered(app, toasts)
        # the cursor goes up to the top: the toasts go below it, still uncovered
        await pilot.press("home")
        await until(pilot, "the cursor at the top", lambda: table.cursor_row == 0)
        await pilot.pause()
        await pilot.pause()
        _uncovered(app, _toasts(app))


@pytest.mark.slow
async def test_startup_toasts_take_at_most_a_third_of_an_80_by_24_screen(tmp_path: Path) -> None:
    app = _stored_app(tmp_path, n=3)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await board_ready(app, pilot)
        app.clear_notifications()
        for words in STARTUP:
            app.notify(words, timeout=20)
        await _toasts_shown(app, pilot, 2)
        toasts = _toasts(app)
        top, bottom = min(t.y for t in toasts), max(t.bottom for t in toasts)
        assert bottom - top <= 24 // 3, toasts
        # the newest toast is the one in view, whole
        newest = list(_rack(app).query(Toast))[-1]
        assert newest.region.height >= 3, newest.region


@pytest.mark.slow
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_toasts_leave_the_gate_one_revision_input_uncovered(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    sup, repo = gate_world(tmp_path)
    sid: list[str] = []

    async def seed(s: Any) -> None:
        sid.append(await seed_gate(s, repo, 1))

    app = CorralApp(sup, default_repo=repo, on_ready=seed)
    async with app.run_test(size=size, notifications=True) as pilot:
        await app.ready.wait()
        screen = await open_session(app, pilot, sid[0])
        await until(pilot, "the revision input focused", lambda: isinstance(screen.focused, Input))
        for words in STARTUP:
            app.notify(words, timeout=20)
        _uncovered(app, await _toasts_shown(app, pilot, 2))


def test_the_band_is_the_larger_side_and_capped_on_short_screens() -> None:
    assert band_for(24, (20, 21)) == (True, 8)  # low line: toasts above it, a third at most
    assert band_for(24, (2, 3)) == (False, 8)
    assert band_for(50, (45, 46)) == (True, 45)
    assert band_for(50, (3, 4)) == (False, 45)
    assert band_for(50, None) == (False, 49)
