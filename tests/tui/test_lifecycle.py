"""Name, archive and retry from the board and the session screen: what the
operator sees change (rows leave and come back, names show, a retry is
selected and carries what went wrong)."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Input, Static

from corral.supervisor.api import Supervisor
from corral.supervisor.states import CoderState
from corral.tui.app import CorralApp
from corral.tui.screens.board import BoardScreen
from corral.tui.screens.session import SessionScreen
from tests.fakes.scripted import contract

from .conftest import (
    FIXED_NOW,
    asked,
    board_ready,
    final_frame,
    footer_actions,
    make_repo,
    open_from_board,
    scripted_supervisor,
    seed_board,
    until,
)


def _app(sup, repo: Path) -> CorralApp:  # type: ignore[no-untyped-def]
    return CorralApp(
        sup, default_repo=repo, clock=lambda: FIXED_NOW, on_ready=lambda s: seed_board(s, repo)
    )


def _select(board: BoardScreen, word: str) -> str:
    sid = next(s for s in board.order if board.summaries[s].intent.startswith(word))
    board.table.move_cursor(row=board.order.index(sid))
    return sid


def _counts(board: BoardScreen) -> str:
    return str(board.query_one("#counts", Static).render())


@pytest.mark.slow
async def test_archive_hides_a_finished_row_and_h_brings_it_back(board_world) -> None:
    sup, repo, _release = board_world()
    app = _app(sup, repo)
    async with app.run_test(size=(140, 24)) as pilot:
        board = await board_ready(app, pilot)
        sid = _select(board, "Bravo")  # still working: it cannot leave the board
        await until(pilot, "a working row's keys", lambda: "cancel_session" in footer_actions(app))
        assert "archive" not in footer_actions(app) and "retry" not in footer_actions(app)
        await pilot.press("h")
        assert sid in board.order  # nothing happened

        sid = _select(board, "Never")  # failed
        await until(pilot, "the failed row's keys", lambda: "archive" in footer_actions(app))
        assert "retry" in footer_actions(app)
        await pilot.press("h")
        await until(pilot, "the row to leave the board", lambda: sid not in board.order)
        assert "5 sessions" not in _counts(board) and "(1 archived)" in _counts(board)
        # f cycles to the archived filter: only the archived row, and h brings it back
        while board.filter != "archived":
            await pilot.press("f")
        assert board.order == [sid]
        await pilot.press("h")
        await until(pilot, "the archived list to empty", lambda: board.order == [])
        assert sup.get(sid).session.archived_at is None


@pytest.mark.slow
async def test_a_name_shows_on_the_board_and_the_session_header(board_world) -> None:
    sup, repo, _release = board_world()
    app = _app(sup, repo)
    async with app.run_test(size=(140, 24)) as pilot:
        board = await board_ready(app, pilot)
        sid = _select(board, "Alpha")
        await pilot.press("N")
        modal = await asked(pilot, then=None)
        field = modal.query_one(Input)
        assert field.value == ""
        await pilot.press(*"report", "enter")
        await until(pilot, "the name on the board", lambda: board.summaries[sid].name == "report")
        cell = board._cells(board.summaries[sid])[3]
        assert str(cell).startswith("report  Alpha adds a file")
        assert sup.get(sid).session.name == "report"
        await pilot.press("enter")
        screen = await until(
            pilot,
            "the session screen",
            lambda: app.screen if isinstance(app.screen, SessionScreen) else None,
        )
        header = str(screen.query_one("#session-header", Static).render())
        assert "report" in header and f"session {sid}" in header


@pytest.mark.slow
async def test_retry_from_the_board_selects_the_new_session(board_world) -> None:
    sup, repo, _release = board_world()
    app = _app(sup, repo)
    async with app.run_test(size=(140, 24)) as pilot:
        board = await board_ready(app, pilot)
        old = _select(board, "Never")
        await until(pilot, "the failed row's keys", lambda: "retry" in footer_actions(app))
        await pilot.press("R")
        modal = await asked(pilot, then=None)
        assert "fresh worktree" in str(modal.question)
        await pilot.press("ctrl+y")

        def retried() -> str | None:
            new = [
                r for r in sup.list() if r.session_id not in (old,) and r.intent.startswith("Never")
            ]
            return new[0].session_id if new else None

        new = await until(pilot, "the retry to start", retried)
        await until(pilot, "the cursor on the retry", lambda: board.selected_id() == new)
        session = sup.get(new).session
        assert session.retry_of == old
        assert "tried before" in session.execution_intent()
        assert "Check impossible failed" in session.execution_intent()
        await sup.wait_for(new, {CoderState.CONTRACT_PROPOSED}, timeout=20)


@pytest.mark.slow
def test_session_header_with_name_and_id_snapshot(snap_compare, tmp_path: Path) -> None:
    """The session screen at 80×24 names the session, shows its full id and
    offers the retry of a failed run."""
    repo = make_repo(tmp_path / "repo")
    drafted = contract(("impossible", "false"), description="cannot pass")
    sup = scripted_supervisor(
        tmp_path / "state", drafted, clock=lambda: FIXED_NOW, id_factory=lambda: "0" * 23 + "1"
    )

    async def seed(s: Supervisor, repo: Path) -> None:
        sid = (await s.start("Make the impossible pass", repo)).session_id
        await s.confirm(sid)
        await s.wait_for(sid, {CoderState.FAILED}, timeout=20)
        s.rename(sid, "impossible one")

    app = CorralApp(
        sup, default_repo=repo, clock=lambda: FIXED_NOW, on_ready=lambda s: seed(s, repo)
    )

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        await open_from_board(app, pilot, "enter")
        await final_frame(pilot, "the session screen")

    assert snap_compare(app, terminal_size=(80, 24), run_before=before)


@pytest.mark.slow
async def test_retry_with_its_edits_from_the_board(board_world) -> None:
    """A rejected session's worktree is kept: `R` offers to carry its edits
    over (e), and the retry's worktree starts with them."""
    sup, repo, _release = board_world()
    app = _app(sup, repo)
    async with app.run_test(size=(140, 24)) as pilot:
        board = await board_ready(app, pilot)
        alpha = next(r.session_id for r in sup.list() if r.intent.startswith("Alpha"))
        await sup.approve(alpha, approve=False, comment="more")
        await until(pilot, "the rejection", lambda: board.summaries[alpha].state.is_terminal)
        _select(board, "Alpha")
        await until(pilot, "the rejected row's keys", lambda: "retry" in footer_actions(app))
        await pilot.press("R")
        modal = await asked(pilot, then=None)
        assert "With its edits (ctrl+e)" in str(modal.question)
        await pilot.press("ctrl+e")

        def retried() -> str | None:
            new = [r for r in sup.list() if r.session_id != alpha and r.intent.startswith("Alpha")]
            return new[0].session_id if new else None

        new = await until(pilot, "the retry to start", retried)
        worktree = Path(sup.get(new).session.worktree or "")
        assert (worktree / "alpha.txt").read_text() == "a\n"  # the first attempt's file
        assert "previous attempt's edits" in sup.get(new).session.execution_intent()
