"""`corral` builds its supervisor only once the board's first frame is out: the
board paints from the rows the store keeps (none, before a store exists), and
the engines, models and git code load after. Until the supervisor has been
built and opened the board says "opening…"; then the live rows replace the
stored ones and every key acts as usual."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Static

from corral.supervisor.api import Supervisor
from corral.supervisor.config import SupervisorConfig
from corral.supervisor.models import CoderSession
from corral.supervisor.session.summaries import summary_json
from corral.supervisor.states import CoderState
from corral.supervisor.store import Store
from corral.tui.app import CorralApp
from corral.tui.screens.new_session import NewSessionScreen
from corral.tui.screens.session import SessionScreen
from tests.fakes.scripted import ScriptedDrafter, ScriptedEngine, ScriptedEngines

from .conftest import FIXED_NOW, board_in_sync, board_of, make_repo, until


class HeldOpen(Supervisor):
    """A supervisor whose open waits until the test lets it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.release = asyncio.Event()

    async def open(self) -> None:
        await self.release.wait()
        await super().open()


class LateBuild:
    """Builds the supervisor when the console asks, noting what the board
    showed at that moment."""

    def __init__(self, state: Path) -> None:
        self.state = state
        self.board_then: str | None = None
        self.app: CorralApp | None = None
        self.built: HeldOpen | None = None

    def __call__(self) -> Supervisor:
        assert self.app is not None
        self.board_then = _counts(self.app)
        self.built = HeldOpen(
            self.state,
            drafter=ScriptedDrafter([]),
            engines=ScriptedEngines(ScriptedEngine()),
            config=SupervisorConfig(),
        )
        return self.built


def _counts(app: CorralApp) -> str:
    board = board_of(app)
    return "" if board is None else str(board.query_one("#counts", Static).render())


def _app(tmp_path: Path, state: Path) -> tuple[CorralApp, LateBuild]:
    build = LateBuild(state)
    app = CorralApp(
        None,
        build=build,
        state_dir=state,
        default_repo=make_repo(tmp_path / "r"),
        clock=lambda: FIXED_NOW,
    )
    build.app = app
    return app, build


def _store_sessions(state: Path, repo: str) -> None:
    store = Store(state, summarize=summary_json)  # as a console keeps them
    for i, st in enumerate([CoderState.MERGED, CoderState.FAILED]):
        store.save_session(
            CoderSession(
                id=f"{i:024x}",
                repo=repo,
                intent=f"Stored task {i}",
                state=st,
                created_at=FIXED_NOW - 900 + i,
                updated_at=FIXED_NOW - 600 + i,
                error="it broke" if st is CoderState.FAILED else None,
            )
        )
    store.close()


@pytest.mark.slow
async def test_the_stored_rows_are_painted_before_the_supervisor_is_built(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    _store_sessions(state, str(tmp_path / "r"))
    app, build = _app(tmp_path, state)
    async with app.run_test(size=(120, 30)) as pilot:
        await until(pilot, "the supervisor built", lambda: build.built is not None)
        # it was built only once the board showed the stored rows
        assert build.board_then is not None and "2 sessions" in build.board_then
        assert "opening…" in build.board_then
        board = board_of(app)
        assert board is not None
        assert {r.state for r in board.summaries.values()} == {
            CoderState.MERGED,
            CoderState.FAILED,
        }
        await pilot.press("enter")  # too early: said so, nothing opens
        await until(
            pilot,
            "the note that the store is opening",
            lambda: any("Opening the store" in str(n.message) for n in app._notifications),
        )
        assert not isinstance(app.screen, SessionScreen)

        assert build.built is not None
        build.built.release.set()
        await until(pilot, "the live rows", lambda: app.opened.is_set() and board_in_sync(app))
        await until(pilot, "the counts without 'opening'", lambda: "opening" not in _counts(app))
        await pilot.press("enter")
        await until(pilot, "the session view", lambda: isinstance(app.screen, SessionScreen))


async def test_an_empty_state_dir_paints_an_empty_board_first(tmp_path: Path) -> None:
    state = tmp_path / "state"  # no store yet: the first run here
    app, build = _app(tmp_path, state)
    async with app.run_test(size=(120, 30)) as pilot:
        await until(pilot, "the supervisor built", lambda: build.built is not None)
        assert build.board_then is not None and "0 sessions" in build.board_then
        await pilot.press("n")  # not offered while opening
        await pilot.pause()
        assert not isinstance(app.screen, NewSessionScreen)

        assert build.built is not None
        build.built.release.set()
        await until(pilot, "opened", lambda: app.opened.is_set())
        await until(pilot, "the counts without 'opening'", lambda: "opening" not in _counts(app))
        assert "0 sessions" in _counts(app)
        await pilot.press("n")
        await until(pilot, "the new-session form", lambda: isinstance(app.screen, NewSessionScreen))
