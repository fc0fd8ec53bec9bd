"""A board with a thousand stored sessions: every row reachable, the cursor
stays on its session, clicks select and open, a long intent never pushes the
other columns off screen."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from corral.supervisor.api import Supervisor
from corral.supervisor.config import SupervisorConfig
from corral.supervisor.models import CoderSession
from corral.supervisor.states import CoderState
from corral.supervisor.store import Store
from corral.tui.app import CorralApp
from corral.tui.screens.session import SessionScreen
from tests.fakes.scripted import ScriptedDrafter, ScriptedEngine, ScriptedEngines

from .conftest import FIXED_NOW, board_ready, make_repo, until

N = 1000
LONG = "Rewrite the parser so that " + "every clause is handled properly " * 8


def _stored_app(tmp_path: Path, n: int = N) -> CorralApp:
    state = tmp_path / "state"
    store = Store(state)
    states = [CoderState.MERGED, CoderState.FAILED, CoderState.REPORTED, CoderState.ABANDONED]
    for i in range(n):
        store.save_session(
            CoderSession(
                id=f"{i:024x}",
                repo=f"/src/repo{i % 3}",
                intent=LONG if i == n - 1 else f"Task number {i}",
                state=states[i % 4],
                created_at=FIXED_NOW - 90000 + i,
                updated_at=FIXED_NOW - 90000 + i * 10,
                engine="external:claude",
            )
        )
    store.close()
    config = SupervisorConfig()
    config.retention.max_sessions = 5000
    config.retention.max_age_days = 3650
    sup = Supervisor(
        state,
        drafter=ScriptedDrafter([]),
        engines=ScriptedEngines(ScriptedEngine()),
        config=config,
    )
    return CorralApp(sup, default_repo=make_repo(tmp_path / "r"), clock=lambda: FIXED_NOW)


async def test_every_one_of_a_thousand_rows_is_reachable(tmp_path: Path) -> None:
    app = _stored_app(tmp_path)
    async with app.run_test(size=(120, 30)) as pilot:
        board = await board_ready(app, pilot)
        table = board.table
        assert table.row_count == N
        assert "1000 sessions" in str(board.query_one("#counts").render())
        # newest first: the top row is the last one stored, with its long intent
        first = board.summaries[table.key_at(0)]  # type: ignore[index]
        assert first.intent == LONG
        await pilot.press("end")
        assert table.cursor_row == N - 1
        assert table.scroll_y > 0  # scrolled so the cursor shows
        oldest = board.selected()
        assert oldest is not None and oldest.intent == "Task number 0"
        await pilot.press("home", "down", "down", "pagedown")
        assert table.cursor_row > 2
        await pilot.press("home")
        assert table.cursor_row == 0 and table.scroll_y == 0


async def test_long_intents_are_cut_so_the_other_columns_stay(tmp_path: Path) -> None:
    app = _stored_app(tmp_path, n=12)
    async with app.run_test(size=(100, 24)) as pilot:
        board = await board_ready(app, pilot)
        line = board.table.render_line(1).text  # the first row (line 0 is the header)
        assert len(line.rstrip()) <= 100
        assert "…" in line  # the intent is cut with an ellipsis ...
        assert "repo2" in line and "external:claude" in line  # ... and the rest still shows


async def test_a_click_moves_the_cursor_and_a_second_click_opens(tmp_path: Path) -> None:
    app = _stored_app(tmp_path, n=20)
    async with app.run_test(size=(120, 30)) as pilot:
        board = await board_ready(app, pilot)
        table = board.table
        # the table starts one line under the counts; its first line is the header
        await pilot.click("#board", offset=(30, 4))
        assert table.cursor_row == 3
        sid = board.selected_id()
        await pilot.click("#board", offset=(30, 4))
        await until(pilot, "the session to open", lambda: isinstance(app.screen, SessionScreen))
        assert app.screen.session_id == sid


async def test_the_cursor_stays_on_its_session_when_rows_reorder(tmp_path: Path) -> None:
    app = _stored_app(tmp_path, n=30)
    async with app.run_test(size=(120, 30)) as pilot:
        board = await board_ready(app, pilot)
        table = board.table
        table.move_cursor(row=5)
        sid = board.selected_id()
        assert sid is not None
        # a filter hides some rows: the cursor follows the session, not the index
        board.search = board.summaries[sid].intent
        board._rebuild()
        await pilot.pause()
        assert board.selected_id() == sid and table.cursor_row == 0
        board.search = ""
        board._rebuild()
        await pilot.pause()
        assert board.selected_id() == sid and table.cursor_row == 5


async def test_f_cycles_through_state_filters_then_each_repo(tmp_path: Path) -> None:
    app = _stored_app(tmp_path, n=30)
    async with app.run_test(size=(120, 30)) as pilot:
        board = await board_ready(app, pilot)
        counts = board.query_one("#counts")
        await pilot.press("f", "f", "f")  # needs you → in progress → finished
        assert board.filter == "finished" and board.table.row_count == 30
        await pilot.press("f")
        assert board.filter == "repo:/src/repo0"
        shown = {board.summaries[k].repo for k in board.table.row_keys()}
        assert shown == {"/src/repo0"} and board.table.row_count == 10
        assert "showing 10: repo repo0" in str(counts.render())
        await pilot.press("f", "f")
        assert board.filter == "repo:/src/repo2"
        await pilot.press("f")
        assert board.filter == "all" and board.table.row_count == 30


async def test_a_big_store_paints_what_fits_first_then_every_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """1,000 stored sessions: the first frame lays out the rows that fit (the
    counts say all 1,000), and the table holds every row right after it."""
    from corral.supervisor.api import Supervisor
    from corral.supervisor.config import SupervisorConfig
    from corral.supervisor.models import CoderSession
    from corral.supervisor.states import CoderState
    from corral.supervisor.store import Store
    from corral.tui.app import CorralApp
    from corral.tui.screens.board import FIRST_PAINT_ROWS
    from tests.fakes.scripted import ScriptedDrafter, ScriptedEngine, ScriptedEngines

    from .conftest import FIXED_NOW, board_of, make_repo, until

    state = tmp_path / "state"
    store = Store(state)
    for i in range(1000):
        store.save_session(
            CoderSession(
                id=f"{i:024x}",
                repo="/src/repo",
                intent=f"Task number {i}",
                state=CoderState.MERGED,
                updated_at=FIXED_NOW - i,
            )
        )
    store.close()
    config = SupervisorConfig()
    config.retention.max_sessions = 5000
    app = CorralApp(
        Supervisor(
            state,
            drafter=ScriptedDrafter([]),
            engines=ScriptedEngines(ScriptedEngine()),
            config=config,
        ),
        default_repo=make_repo(tmp_path / "r"),
        clock=lambda: FIXED_NOW,
    )
    from corral.tui.widgets.board_table import BoardTable

    seen: list[int] = []  # how many rows each layout of the table held
    show = BoardTable.show

    def recording(table: BoardTable, order: list[str], cells_of: Any, *headings: Any) -> None:
        seen.append(len(order))
        show(table, order, cells_of, *headings)

    monkeypatch.setattr(BoardTable, "show", recording)
    async with app.run_test(size=(120, 30)) as pilot:
        board = await until(pilot, "the board", lambda: board_of(app))
        await until(pilot, "every row", lambda: board.table.row_count == 1000)
        assert [n for n in seen if n][:2] == [FIRST_PAINT_ROWS, 1000]
        assert "1000 sessions" in str(board.query_one("#counts").render())
        assert board.table.key_at(0) == f"{0:024x}"  # the newest first, as ever
