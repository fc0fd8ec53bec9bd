"""`X` on the board deletes a finished session after one question: the row
disappears and its worktree is gone; a working row offers no delete, and
escape keeps everything."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Static

from corral.supervisor.states import label
from corral.tui.app import CorralApp
from corral.tui.screens.board import BoardScreen

from .conftest import FIXED_NOW, asked, board_ready, footer_actions, seed_board, until


def _app(sup, repo: Path) -> CorralApp:  # type: ignore[no-untyped-def]
    return CorralApp(
        sup, default_repo=repo, clock=lambda: FIXED_NOW, on_ready=lambda s: seed_board(s, repo)
    )


def _select(board: BoardScreen, word: str) -> str:
    sid = next(s for s in board.order if board.summaries[s].intent.startswith(word))
    board.table.move_cursor(row=board.order.index(sid))
    return sid


@pytest.mark.slow
async def test_x_deletes_a_finished_row_after_one_question(board_world) -> None:
    sup, repo, _release = board_world()
    app = _app(sup, repo)
    async with app.run_test(size=(140, 24)) as pilot:
        board = await board_ready(app, pilot)
        sid = _select(board, "Bravo")  # still working: nothing to delete
        await until(pilot, "a working row's keys", lambda: "cancel_session" in footer_actions(app))
        await pilot.press("X")
        assert not app.screen.query("ConfirmScreen") and sid in board.order

        await sup.cancel(sid)  # cancelled: finished, its worktree kept
        await until(pilot, "the finished row's keys", lambda: "archive" in footer_actions(app))
        worktree = Path(sup.get(sid).session.worktree or "")
        assert worktree.is_dir()
        await pilot.press("X")
        modal = await asked(pilot, then="escape")  # escape keeps it
        assert "for good" in str(modal.question) and "cannot be undone" in str(modal.question)
        assert f"Delete {label(sid)}," in str(modal.question)  # it names the session
        assert sid in board.order and worktree.is_dir()

        await pilot.press("X")
        await asked(pilot)
        await until(pilot, "the row to disappear", lambda: sid not in board.summaries)
        assert sid not in board.order and not worktree.exists()
        assert all(r.session_id != sid for r in sup.list())
        counts = str(board.query_one("#counts", Static).render())
        assert "4 sessions" in counts, counts
