"""The board's header says when agents run unconfined, and why: opted out
(`[sandbox] agents = false`), or no sandbox can run here."""

from __future__ import annotations

import pytest
from textual.widgets import Static

from corral.supervisor import doctor
from corral.tui.app import CorralApp

from .conftest import FIXED_NOW, board_of, until


def _header(app: CorralApp) -> str:
    board = board_of(app)
    return "" if board is None else str(board.query_one("#counts", Static).render())


@pytest.mark.slow
@pytest.mark.parametrize(
    "note",
    [
        "agents unconfined: bwrap not found: install bubblewrap",
        "agents unconfined: [sandbox] agents = false",
    ],
)
async def test_unconfined_agents_are_said_on_the_board_header(
    board_world, monkeypatch: pytest.MonkeyPatch, note: str
) -> None:
    status = doctor.ConfinementStatus(True, "x", "unconfined", True, note)
    monkeypatch.setattr(doctor, "confinement_status", lambda: status)
    sup, repo, _release = board_world()
    app = CorralApp(sup, default_repo=repo, clock=lambda: FIXED_NOW)
    async with app.run_test(size=(160, 20)) as pilot:
        await until(pilot, "the header's note", lambda: note in _header(app))
        assert "0 sessions" in _header(app)


async def test_confined_agents_leave_the_header_as_it_was(board_world) -> None:
    sup, repo, _release = board_world()
    app = CorralApp(sup, default_repo=repo, clock=lambda: FIXED_NOW)
    async with app.run_test(size=(160, 20)) as pilot:
        await until(pilot, "the board's header", lambda: "0 sessions" in _header(app))
        await until(pilot, "the app ready", lambda: app.ready.is_set())
        assert "unconfined" not in _header(app)
