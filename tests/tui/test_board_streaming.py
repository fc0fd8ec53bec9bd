"""A session streaming narration costs the board nothing per line: a burst of
lines repaints no row (the board needs a row's state, not every line), while a
question asked in the same burst shows on its row at once. When one row
changes, only that row's line is repainted, never the whole table."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from corral.supervisor.api import Supervisor
from corral.supervisor.models import CoderSession
from corral.supervisor.states import CoderState
from corral.supervisor.store import Store
from corral.tui.app import CorralApp
from corral.tui.screens.board import BoardScreen
from tests.fakes.scripted import (
    Ask,
    Iteration,
    Say,
    ScriptedDrafter,
    ScriptedEngine,
    ScriptedEngines,
    Step,
    Wait,
    contract,
)

from .conftest import FIXED_NOW, SCRIPTED_CONFIG, board_of, make_repo, until

BURST = 300  # narration lines, one after the other
STORED = 30  # finished sessions below the live one


class Repaints:
    """What the board's table was asked to redraw: whole-table refreshes and
    single lines (line 0 is the header)."""

    def __init__(self, table: Any) -> None:
        self.whole = 0
        self.lines: list[int] = []
        refresh, refresh_line = table.refresh, table.refresh_line

        def whole(*regions: Any, **kw: Any) -> Any:
            if not regions:
                self.whole += 1
            return refresh(*regions, **kw)

        def line(y: int) -> Any:
            self.lines.append(y)
            return refresh_line(y)

        table.refresh, table.refresh_line = whole, line


def _app(
    tmp_path: Path,
    steps: list[Step],
    clock: Callable[[], float] = lambda: FIXED_NOW,
    finished_ago: float = 9000,
) -> tuple[CorralApp, list[str]]:
    state = tmp_path / "state"
    store = Store(state)
    for i in range(STORED):
        store.save_session(
            CoderSession(
                id=f"{i:024x}",
                repo=str(tmp_path / "repo"),
                intent=f"Finished task {i}: " + "a long intent the column cuts " * 8,
                state=CoderState.MERGED,
                created_at=FIXED_NOW - finished_ago + i,
                updated_at=FIXED_NOW - finished_ago + i,
            )
        )
    store.close()
    repo = make_repo(tmp_path / "repo")
    sup = Supervisor(
        state,
        drafter=ScriptedDrafter([contract(("done", "test -f done.txt"))]),
        engines=ScriptedEngines(ScriptedEngine([steps])),
        config=SCRIPTED_CONFIG,
    )
    started: list[str] = []

    async def seed(s: Supervisor) -> None:
        sid = (await s.start("Stream a lot of narration", repo)).session_id
        await s.wait_for(sid, needs=True, timeout=20)
        await s.confirm(sid)
        await s.wait_for(sid, {CoderState.RUNNING}, timeout=20)
        started.append(sid)

    # by default a clock that stands still: no age ticks over while a test counts repaints
    return CorralApp(sup, default_repo=repo, on_ready=seed, clock=clock), started


async def _board_with_live_row(app: CorralApp, pilot: Any, sid: list[str]) -> BoardScreen:
    """The seed is done and the board shows every row, the running one on top."""
    await app.ready.wait()

    def shown() -> BoardScreen | None:
        board = board_of(app)
        if board is None or board.table.row_count != STORED + 1:
            return None
        top = board.summaries.get(board.table.key_at(0) or "")
        return board if top is not None and top.state is CoderState.RUNNING else None

    board = await until(pilot, "the running session on top of the finished ones", shown)
    assert board.table.key_at(0) == sid[0]
    await until(pilot, "the toasts of the start gathered", lambda: board._announce_timer is None)
    await pilot.pause()
    return board


async def test_a_burst_of_narration_repaints_no_row_and_a_question_after_it_shows_at_once(
    tmp_path: Path,
) -> None:
    go, ask = asyncio.Event(), asyncio.Event()
    steps: list[Step] = [Iteration(1), Wait(go)]
    steps += [Say(f"narration line {i}: reading, thinking, editing") for i in range(BURST)]
    steps += [Wait(ask), Ask("Which database?")]
    app, started = _app(tmp_path, steps)
    async with app.run_test(size=(160, 40)) as pilot:
        board = await _board_with_live_row(app, pilot, started)
        sid = started[0]
        rows_applied: list[int] = []
        apply = board.apply

        def counting(changed: list[Any]) -> None:
            rows_applied.append(len(changed))
            apply(changed)

        board.apply = counting  # type: ignore[method-assign]
        repaints = Repaints(board.table)
        go.set()

        def said() -> int:
            return sum(1 for e in app.supervisor.replay(sid) if e.kind.value == "plan_text")

        await until(pilot, "the burst in the session's log", lambda: said() >= BURST)
        await pilot.pause()
        # the lines are in the session's log and its view; the board has nothing to redraw
        assert rows_applied == []
        assert (repaints.whole, repaints.lines) == (0, [])
        ask.set()
        await until(
            pilot,
            "the question on the live row",
            lambda: "question: Which database?" in str(board.table.get_row_at(0)[2]),
        )
        assert sum(rows_applied) <= 3, rows_applied  # the question's change, not a line each
        assert board.selected_id() == sid


async def test_one_row_changing_repaints_its_line_only(tmp_path: Path) -> None:
    go = asyncio.Event()
    app, started = _app(tmp_path, [Iteration(1), Wait(go)])
    async with app.run_test(size=(160, 40)) as pilot:
        board = await _board_with_live_row(app, pilot, started)
        sid = started[0]
        await pilot.press("down", "down")  # the cursor off the row that changes
        repaints = Repaints(board.table)
        size = board.table.virtual_size
        app.supervisor.rename(sid, "cache")  # its place on the board stays
        await until(
            pilot, "the new name on its row", lambda: "cache" in str(board.table.get_row_at(0)[3])
        )
        if board.table.virtual_size == size:  # the same layout: its own line only
            assert repaints.whole == 0
            assert repaints.lines == [1]  # (line 0 is the header)
        else:  # its column's width changed (an age ticked too): the whole table, once
            assert repaints.whole == 1
        go.set()


async def test_a_row_changing_while_the_clock_runs_repaints_its_line_not_every_age(
    tmp_path: Path,
) -> None:
    """Ages tick on their own timer: a row's change does not re-read the clock
    for every row (each age that moved a second would be a line to repaint:
    with 100 agents streaming, the whole table on every update)."""
    now = [FIXED_NOW]
    go = asyncio.Event()
    app, started = _app(tmp_path, [Iteration(1), Wait(go)], lambda: now[0], finished_ago=50)
    # narrower than the preview beside the board needs: a renamed row moves no preview
    async with app.run_test(size=(118, 40)) as pilot:
        board = await _board_with_live_row(app, pilot, started)
        sid = started[0]
        await pilot.press("down", "down")  # the cursor off the row that changes
        board.age_timer.pause()  # the ages' own tick is not what this counts
        repaints = Repaints(board.table)
        ages = [str(board.table.get_row_at(i)[-1]) for i in range(1, STORED + 1)]
        now[0] += 7  # seven seconds on: every finished row's age would read 7 s more
        app.supervisor.rename(sid, "cache")
        await until(
            pilot, "the new name on its row", lambda: "cache" in str(board.table.get_row_at(0)[3])
        )
        assert repaints.whole == 0
        assert repaints.lines == [1]  # its own line (line 0 is the header)
        assert [str(board.table.get_row_at(i)[-1]) for i in range(1, STORED + 1)] == ages
        board._refresh_ages()  # the ages' own tick shows the seconds that passed
        assert str(board.table.get_row_at(1)[-1]) != ages[0]
        go.set()
