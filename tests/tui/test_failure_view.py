"""A failed session opens on its failing check (not the first check), with
that check's output below the table; the operator's cursor then stays theirs."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import DataTable, Static

from corral.supervisor.states import CoderState
from corral.tui.app import CorralApp
from corral.tui.screens.session import SessionScreen
from tests.fakes.scripted import Write, contract

from .conftest import make_repo, open_from_board, scripted_supervisor, until


async def test_a_failed_session_opens_on_its_failing_check(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "shop")
    drafted = contract(("builds", "true"), ("lints", "true"), ("tests", "echo 3 failed; false"))
    sup = scripted_supervisor(tmp_path / "state", drafted, [Write("x.txt", "x\n")])

    async def fail_one(s) -> None:  # type: ignore[no-untyped-def]
        sid = (await s.start("make the tests pass", repo)).session_id
        await s.confirm(sid)
        await s.wait_for(sid, {CoderState.FAILED}, timeout=30)

    app = CorralApp(sup, default_repo=repo, on_ready=fail_one)
    async with app.run_test(size=(140, 40)) as pilot:
        screen = await open_from_board(app, pilot, "enter")
        assert isinstance(screen, SessionScreen)
        table = screen.query_one("#checks", DataTable)
        detail = screen.query_one("#check-detail", Static)
        await until(pilot, "the checks", lambda: table.row_count == 3)
        assert table.cursor_row == 2
        await until(pilot, "the failing check's output", lambda: "3 failed" in str(detail.render()))
        table.move_cursor(row=0)  # the operator moves: a later refresh keeps their row
        screen.refresh_view()
        await pilot.pause()
        assert table.cursor_row == 0
