"""Small things an operator notices: `v` on the board says it started and how
the checks came out; the command palette offers only what the selected row can
take; `A` is not offered where there is no terminal to attach (the pty backend)."""

from __future__ import annotations

from pathlib import Path

import pytest

from corral.supervisor.interface import AgentScreen
from corral.tui.app import CorralApp
from corral.tui.screens.board import BoardScreen
from corral.tui.screens.session import SessionScreen

from .conftest import FIXED_NOW, board_ready, footer_actions, seed_board, until


def _app(sup, repo: Path) -> CorralApp:  # type: ignore[no-untyped-def]
    return CorralApp(
        sup, default_repo=repo, clock=lambda: FIXED_NOW, on_ready=lambda s: seed_board(s, repo)
    )


def _select(board: BoardScreen, word: str) -> str:
    sid = next(s for s in board.order if board.summaries[s].intent.startswith(word))
    board.table.move_cursor(row=board.order.index(sid))
    return sid


def _toasts(app: CorralApp) -> list[str]:
    return [str(n.message) for n in app._notifications]


@pytest.mark.slow
async def test_v_on_the_board_says_it_started_and_what_it_found(board_world) -> None:
    sup, repo, _release = board_world()
    app = _app(sup, repo)
    async with app.run_test(size=(140, 24)) as pilot:
        board = await board_ready(app, pilot)
        sid = _select(board, "Alpha")  # a diff waiting for approval
        await until(pilot, "the cursor on Alpha", lambda: board.selected_id() == sid)
        app.clear_notifications()
        await pilot.press("v")
        await until(
            pilot, "the start toast", lambda: any("Re-verifying" in t for t in _toasts(app))
        )
        await until(
            pilot,
            "the outcome toast",
            lambda: any("1 of 1 checks pass." in t for t in _toasts(app)),
        )


@pytest.mark.slow
async def test_the_palette_offers_only_what_the_row_can_take(board_world) -> None:
    sup, repo, _release = board_world()
    app = _app(sup, repo)
    async with app.run_test(size=(140, 24)) as pilot:
        board = await board_ready(app, pilot)

        def titles() -> set[str]:
            return {c.title for c in app.get_system_commands(board)}

        _select(board, "Bravo")  # working: nothing to approve or retry
        await until(pilot, "the working row", lambda: "Cancel (x)" in titles())
        assert "Approve (a)" not in titles() and "Retry (R)" not in titles()
        _select(board, "Never")  # failed: retry, archive; no cancel
        await until(pilot, "the failed row", lambda: "Retry (R)" in titles())
        assert "Cancel (x)" not in titles() and "Archive (h)" in titles()


@pytest.mark.slow
async def test_attach_is_not_offered_without_a_terminal_to_attach(board_world) -> None:
    sup, repo, _release = board_world()
    app = _app(sup, repo)
    screen_of = AgentScreen(lines=["agent"], ansi=["agent"])
    sup.agent_screen = lambda sid: screen_of  # a live pane ...
    sup.agent_screen_version = lambda sid: 1
    sup.attach_argv = lambda sid: None  # ... on the pty backend: nothing to attach
    async with app.run_test(size=(140, 40)) as pilot:
        await board_ready(app, pilot)
        await pilot.press("enter")
        await until(pilot, "the session screen", lambda: isinstance(app.screen, SessionScreen))
        await until(pilot, "the terminal key", lambda: "focus_terminal" in footer_actions(app))
        assert "attach" not in footer_actions(app)
        sup.attach_argv = lambda sid: ["tmux", "attach-session", "-t", "%1"]  # tmux: offered
        app.screen.refresh_bindings()
        await until(pilot, "the attach key", lambda: "attach" in footer_actions(app))
