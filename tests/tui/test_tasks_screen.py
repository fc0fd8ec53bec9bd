"""The tasks screen (T on the board): scheduled tasks listed with their
rule, action and state; n adds one, space pauses and resumes, g runs one
now (its run shown), x deletes — all through the supervisor."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest
from textual.widgets import DataTable, Input, Static

from corral.supervisor.api import Supervisor
from corral.supervisor.config import SupervisorConfig
from corral.tui.app import CorralApp
from corral.tui.screens.tasks import TaskFormScreen, TasksScreen
from tests.fakes.scripted import ScriptedDrafter, ScriptedEngine, ScriptedEngines

from .conftest import FIXED_NOW, board_ready, final_frame, make_repo, until

AT = datetime(2031, 5, 4, 9, 30).timestamp()


def _sup(tmp_path: Path) -> Supervisor:
    return Supervisor(
        tmp_path / "state",
        drafter=ScriptedDrafter([]),
        engines=ScriptedEngines(ScriptedEngine()),
        config=SupervisorConfig(),
    )


async def _seed(sup: Supervisor) -> None:
    await sup.add_task(
        "nightly notes",
        action="send",
        params={"target": "0123456789abcdef", "text": "write the notes"},
        at=AT,
    )
    revive = await sup.add_task("wake it", action="revive", params={"session": "cafe1234"}, at=AT)
    await sup.pause_task(revive.id)


def _app(sup: Supervisor, tmp_path: Path) -> CorralApp:
    return CorralApp(
        sup, default_repo=make_repo(tmp_path / "r"), clock=lambda: FIXED_NOW, on_ready=_seed
    )


def _rows(screen: TasksScreen) -> list[tuple[str, str]]:
    table = screen.query_one("#tasks", DataTable)
    return [
        (str(table.get_row_at(i)[1]), str(table.get_row_at(i)[4])) for i in range(table.row_count)
    ]


@pytest.mark.slow
def test_tasks_screen_snapshot(snap_compare, tmp_path: Path) -> None:
    app = _app(_sup(tmp_path), tmp_path)

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        await board_ready(app, pilot)
        await pilot.press("T")
        screen = await until(
            pilot, "the tasks screen", lambda: isinstance(app.screen, TasksScreen) and app.screen
        )
        await until(pilot, "two tasks", lambda: len(_rows(screen)) == 2)
        # the ids are random: the snapshot pins everything else
        table = screen.query_one("#tasks", DataTable)
        for i, key in enumerate(list(table.rows)):
            table.update_cell(key, table.ordered_columns[0].key, f"task{i}")
        await final_frame(
            pilot,
            "the runs line",
            lambda: "Last runs" in str(screen.query_one("#tasks-runs", Static).render()),
        )

    assert snap_compare(app, terminal_size=(130, 24), run_before=before)


@pytest.mark.slow
async def test_add_pause_run_now_and_delete_through_the_screen(tmp_path: Path) -> None:
    sup = _sup(tmp_path)
    app = _app(sup, tmp_path)
    async with app.run_test(size=(130, 30)) as pilot:
        await board_ready(app, pilot)
        await pilot.press("T")
        screen = await until(
            pilot, "the tasks screen", lambda: isinstance(app.screen, TasksScreen) and app.screen
        )
        await until(pilot, "two tasks", lambda: len(_rows(screen)) == 2)
        assert ("wake it", "paused") in _rows(screen)

        # add: a message every 10 minutes
        await pilot.press("n")
        form = await until(
            pilot, "the form", lambda: isinstance(app.screen, TaskFormScreen) and app.screen
        )
        form.query_one("#task-name", Input).value = "ping"
        form.query_one("#task-when", Input).value = "every 10m"
        form.query_one("#task-what", Input).value = "remember the tests"
        await pilot.pause()
        form.action_add()
        await until(pilot, "the new task", lambda: any(n == "ping" for n, _ in _rows(screen)))
        [ping] = [t for t in await sup.tasks() if t.name == "ping"]
        assert ping.every == 600  # "every 10m"
        assert ping.action == "start" and ping.params["intent"] == "remember the tests"

        # a schedule that means nothing is refused with the words it understands
        await pilot.press("n")
        form = await until(
            pilot, "the form", lambda: isinstance(app.screen, TaskFormScreen) and app.screen
        )
        form.query_one("#task-when", Input).value = "sometimes"
        form.query_one("#task-what", Input).value = "x"
        form.action_add()
        await until(
            pilot,
            "the refusal",
            lambda: any("is not a schedule" in str(n.message) for n in app._notifications),
        )
        assert len(await sup.tasks()) == 3

        # pause, then resume, the selected task
        table = screen.query_one("#tasks", DataTable)
        table.move_cursor(row=[n for n, _ in _rows(screen)].index("nightly notes"))
        await pilot.press("space")
        await until(pilot, "paused", lambda: ("nightly notes", "paused") in _rows(screen))
        assert next(t for t in await sup.tasks() if t.name == "nightly notes").paused
        await pilot.press("space")
        await until(pilot, "resumed", lambda: ("nightly notes", "paused") not in _rows(screen))

        # run it now: the target is unknown, so the run fails and says why
        await pilot.press("g")
        runs = screen.query_one("#tasks-runs", Static)
        await until(pilot, "the failed run", lambda: "FAIL" in str(runs.render()))
        assert "no corral session" in str(runs.render())

        # delete (asks first)
        await pilot.press("x")
        await pilot.press("ctrl+y")
        await until(
            pilot, "the task gone", lambda: all(n != "nightly notes" for n, _ in _rows(screen))
        )
        assert [t.name for t in await sup.tasks()].count("nightly notes") == 0
