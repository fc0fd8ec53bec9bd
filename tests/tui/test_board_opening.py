"""The board's first frame comes from the rows the store keeps, before the
supervisor opens: it says "opening…" and offers no key that acts on a session
until the supervisor has opened; then the live rows replace the stored ones."""

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
from corral.tui.screens.session import SessionScreen
from tests.fakes.scripted import ScriptedDrafter, ScriptedEngine, ScriptedEngines

from .conftest import FIXED_NOW, board_in_sync, board_of, footer_actions, make_repo, until


class HeldOpen(Supervisor):
    """A supervisor whose open waits until the test lets it (a big store's
    open takes most of a second; here it takes as long as the test needs)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.release = asyncio.Event()

    async def open(self) -> None:
        await self.release.wait()
        await super().open()


def _app(tmp_path: Path) -> tuple[CorralApp, HeldOpen]:
    state = tmp_path / "state"
    store = Store(state, summarize=summary_json)  # as a console keeps them
    for i, st in enumerate([CoderState.MERGED, CoderState.FAILED, CoderState.RUNNING]):
        store.save_session(
            CoderSession(
                id=f"{i:024x}",
                repo=str(tmp_path / "r"),
                intent=f"Stored task {i}",
                state=st,
                created_at=FIXED_NOW - 900 + i,
                updated_at=FIXED_NOW - 600 + i,
                error="it broke" if st is CoderState.FAILED else None,
            )
        )
    store.close()
    sup = HeldOpen(
        state,
        drafter=ScriptedDrafter([]),
        engines=ScriptedEngines(ScriptedEngine()),
        config=SupervisorConfig(),
    )
    app = CorralApp(sup, default_repo=make_repo(tmp_path / "r"), clock=lambda: FIXED_NOW)
    return app, sup


def _counts(app: CorralApp) -> str:
    board = board_of(app)
    return "" if board is None else str(board.query_one("#counts", Static).render())


async def test_the_stored_rows_show_while_the_supervisor_opens_then_the_live_ones(
    tmp_path: Path,
) -> None:
    app, sup = _app(tmp_path)
    async with app.run_test(size=(120, 30)) as pilot:
        await until(pilot, "the stored rows", lambda: "3 sessions" in _counts(app))
        board = board_of(app)
        assert board is not None
        assert "opening…" in _counts(app)  # never shown as the live state
        assert {r.state for r in board.summaries.values()} == {
            CoderState.MERGED,
            CoderState.FAILED,
            CoderState.RUNNING,
        }
        # no key that acts on a session is offered, and enter says why it waits
        assert footer_actions(app) & {"app.quit", "app.help"}
        assert not footer_actions(app) & {"new", "open", "archive", "retry", "discuss"}
        await pilot.press("enter")  # held: it acts once the store is open
        await until(
            pilot,
            "the note that the store is opening",
            lambda: any("Opening the store" in str(n.message) for n in app._notifications),
        )
        assert not isinstance(app.screen, SessionScreen)
        selected = board.selected_id()

        sup.release.set()
        await until(pilot, "the live rows", lambda: app.opened.is_set() and board_in_sync(app))
        await until(pilot, "the counts without 'opening'", lambda: "opening" not in _counts(app))
        # the rows now are the supervisor's (a running session with no agent left
        # is no longer shown as running if the open said otherwise)
        live = {r.session_id: r.state for r in sup.list()}
        assert {sid: r.state for sid, r in board.summaries.items()} == live
        await until(pilot, "the held enter", lambda: isinstance(app.screen, SessionScreen))
        assert app.screen.session_id == selected
        await pilot.press("escape")
        await until(pilot, "the board", lambda: board_of(app) is app.screen)
        assert "new" in footer_actions(app)


@pytest.mark.slow
async def test_keys_typed_while_it_opens_act_in_order_once_open(tmp_path: Path) -> None:
    """`n` then the task's words at once: the form opens with the words in it,
    and a `g` among them never groups the board."""
    from textual.widgets import Input

    from corral.tui.screens.new_session import NewSessionScreen

    app, sup = _app(tmp_path)
    async with app.run_test(size=(120, 30)) as pilot:
        await until(pilot, "the stored rows", lambda: "3 sessions" in _counts(app))
        board = board_of(app)
        assert board is not None
        await pilot.press("n", *"fig bug")
        assert not isinstance(app.screen, NewSessionScreen) and not board.grouped
        sup.release.set()
        form = await until(
            pilot,
            "the form",
            lambda: app.screen if isinstance(app.screen, NewSessionScreen) else None,
        )
        field = form.query_one("#intent", Input)
        await until(pilot, "the typed words", lambda: field.value == "fig bug")
        assert not board.grouped
