"""More console snapshots: the empty board, help, the light theme, an error
toast, and a board of 100 rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from corral.supervisor.api import Supervisor
from corral.supervisor.config import SupervisorConfig
from corral.supervisor.models import CoderSession
from corral.supervisor.states import CoderState
from corral.supervisor.store import Store
from corral.tui.app import CorralApp
from corral.tui.screens.help import HelpScreen
from tests.fakes.scripted import ScriptedDrafter, ScriptedEngine, ScriptedEngines

from .conftest import FIXED_NOW, board_ready, caught_up, final_frame, make_repo


def _sup(tmp_path: Path) -> Supervisor:
    return Supervisor(
        tmp_path / "state",
        drafter=ScriptedDrafter([]),
        engines=ScriptedEngines(ScriptedEngine()),
        config=SupervisorConfig(),
    )


def test_empty_board(snap_compare, tmp_path: Path) -> None:
    app = CorralApp(_sup(tmp_path), default_repo=make_repo(tmp_path / "r"), clock=lambda: FIXED_NOW)

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        board = await board_ready(app, pilot)
        empty = board.query_one("#empty")
        await final_frame(
            pilot, "the empty board's hint", lambda: "No sessions yet" in str(empty.render())
        )

    assert snap_compare(app, terminal_size=(120, 20), run_before=before)


@pytest.mark.slow
def test_help(snap_compare, tmp_path: Path) -> None:
    app = CorralApp(_sup(tmp_path), default_repo=make_repo(tmp_path / "r"), clock=lambda: FIXED_NOW)

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        await board_ready(app, pilot)
        await pilot.press("question_mark")
        await final_frame(
            pilot,
            "the help, fully rendered",
            lambda: isinstance(app.screen, HelpScreen) and caught_up(app.screen),
        )

    assert snap_compare(app, terminal_size=(120, 50), run_before=before)


def test_light_theme_and_an_error_toast(snap_compare, tmp_path: Path) -> None:
    app = CorralApp(_sup(tmp_path), default_repo=make_repo(tmp_path / "r"), clock=lambda: FIXED_NOW)

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        await board_ready(app, pilot)
        app.theme = "textual-light"
        app.actions.run("Approve", app.supervisor.approve("nope"))
        await final_frame(
            pilot,
            "the error toast",
            lambda: (
                app.screen.query("Toast")
                and any(n.title == "Approve refused" for n in app._notifications)
            ),
        )

    assert snap_compare(app, terminal_size=(120, 24), run_before=before)


def test_a_board_of_a_hundred_sessions(snap_compare, tmp_path: Path) -> None:
    """Stored sessions of every state (not live after a restart), newest first."""
    state = tmp_path / "state"
    store = Store(state)
    states = [CoderState.MERGED, CoderState.FAILED, CoderState.ABANDONED, CoderState.REPORTED]
    for i in range(100):
        store.save_session(
            CoderSession(
                id=f"{i:024x}",
                repo=f"/src/repo{i % 3}",
                intent=f"Task number {i}",
                state=states[i % 4],
                created_at=FIXED_NOW - 5000 + i,
                updated_at=FIXED_NOW - 5000 + i * 10,
                engine="external:claude",
                iterations=i % 5,
            )
        )
    store.close()
    app = CorralApp(
        Supervisor(
            state,
            drafter=ScriptedDrafter([]),
            engines=ScriptedEngines(ScriptedEngine()),
            config=SupervisorConfig(),
        ),
        default_repo=make_repo(tmp_path / "r"),
        clock=lambda: FIXED_NOW,
    )

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        board = await board_ready(app, pilot)
        await final_frame(pilot, "a hundred rows", lambda: board.table.row_count == 100)

    assert snap_compare(app, terminal_size=(130, 30), run_before=before)
