"""The first board: rows for every session, needs-you first, live updates."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import DataTable, Input

from corral.supervisor.states import CoderState
from corral.tui.app import CorralApp
from corral.tui.screens.help import HelpScreen
from corral.tui.screens.new_session import NewSessionScreen
from tests.conftest import plan_texts

from .conftest import (
    FIXED_NOW,
    asked,
    board_in_sync,
    board_ready,
    final_frame,
    footer_actions,
    seed_board,
    until,
)


def _app(sup, repo: Path, **kw) -> CorralApp:  # type: ignore[no-untyped-def]
    return CorralApp(sup, default_repo=repo, clock=lambda: FIXED_NOW, **kw)


def _cell_text(table: DataTable, row: int, col: int) -> str:  # type: ignore[type-arg]
    value = table.get_row_at(row)[col]
    return str(getattr(value, "plain", value))


@pytest.mark.slow
def test_board_snapshot_with_sessions_in_several_states(snap_compare, board_world) -> None:
    """Needs-you rows (diff, contract) first, then the working one, then finished."""
    sup, repo, _release = board_world()
    app = _app(sup, repo, on_ready=lambda s: seed_board(s, repo))

    async def ready(pilot) -> None:  # type: ignore[no-untyped-def]
        await board_ready(app, pilot)
        # the needs-you transitions rang and toasted; the snapshot pins the board itself
        await until(pilot, "the needs-you toasts", lambda: len(app._notifications) >= 1)
        app.clear_notifications()
        await final_frame(pilot, "the toasts to go", lambda: not app.screen.query("Toast"))

    assert snap_compare(app, terminal_size=(140, 24), run_before=ready)


@pytest.mark.slow
async def test_state_change_reaches_the_board_without_refresh(board_world) -> None:
    sup, repo, release = board_world()
    app = _app(sup, repo, on_ready=lambda s: seed_board(s, repo))
    async with app.run_test(size=(140, 20)) as pilot:
        board = await board_ready(app, pilot)
        table = board.table
        bravo = next(
            i
            for i, sid in enumerate(board.order)
            if board.summaries[sid].intent.startswith("Bravo")
        )
        assert _cell_text(table, bravo, 1) == "working"
        table.move_cursor(row=bravo)
        # the operator picks the working row: its footer offers cancel, no approval
        await until(
            pilot,
            "the footer to offer the working row's keys",
            lambda: "cancel_session" in (keys := footer_actions(app)) and "approve" not in keys,
        )
        release.set()  # the engine finishes; nothing on the UI side is poked

        def bravo_text() -> str:
            rows = {board.summaries[s].intent.split()[0]: i for i, s in enumerate(board.order)}
            return _cell_text(table, rows["Bravo"], 2)

        await until(
            pilot,
            "Bravo's diff to reach the board",
            lambda: bravo_text() == "diff ready for approval",
        )
        rows = {board.summaries[s].intent.split()[0]: i for i, s in enumerate(board.order)}
        assert _cell_text(table, rows["Bravo"], 1) == "needs approval"
        assert _cell_text(table, rows["Bravo"], 2) == "diff ready for approval"
        # needs-you rows stay on top
        groups = [board.summaries[s].needs_you is not None for s in board.order]
        assert groups == sorted(groups, reverse=True)
        # the cursor followed Bravo, and its footer now offers the approval keys
        assert board.selected() is not None and board.selected().intent.startswith("Bravo")
        await until(
            pilot,
            "the footer to offer the approval keys",
            lambda: {"approve", "review_diff", "reject"} <= footer_actions(app),
        )


@pytest.mark.slow
async def test_help_quit_and_tab_to_next_needs_you(board_world) -> None:
    sup, repo, _release = board_world()
    app = _app(sup, repo, on_ready=lambda s: seed_board(s, repo))
    async with app.run_test(size=(140, 20)) as pilot:
        board = await board_ready(app, pilot)
        await pilot.press("question_mark")
        await until(pilot, "the help", lambda: isinstance(app.screen, HelpScreen))
        await pilot.press("escape")
        await until(pilot, "the board again", lambda: app.screen is board)
        needing = [i for i, s in enumerate(board.order) if board.summaries[s].needs_you]
        assert len(needing) == 2  # Alpha's diff and Echo's contract
        board.table.move_cursor(row=len(board.order) - 1)
        await pilot.press("tab")
        await until(pilot, "the first needs-you row", lambda: board.table.cursor_row == needing[0])
        await pilot.press("tab")
        await until(pilot, "the next needs-you row", lambda: board.table.cursor_row == needing[1])
        await pilot.press("q")
    assert not sup.opened  # the app closed its supervisor on quit


@pytest.mark.slow
async def test_approve_from_the_board_delivers_a_branch(board_world) -> None:
    sup, repo, _release = board_world()
    app = _app(sup, repo, on_ready=lambda s: seed_board(s, repo))
    async with app.run_test(size=(140, 20)) as pilot:
        board = await board_ready(app, pilot)
        alpha = next(
            i for i, s in enumerate(board.order) if board.summaries[s].intent.startswith("Alpha")
        )
        sid = board.order[alpha]
        board.table.move_cursor(row=alpha)
        await pilot.press("a")
        await asked(pilot)
        row = await sup.wait_for(sid, {CoderState.MERGED}, timeout=10)
        assert row.result_branch == f"corral/{sid[-8:]}"
        await until(pilot, "the delivery to reach the board", lambda: board_in_sync(app))
        idx = board.order.index(sid)
        assert _cell_text(board.table, idx, 1) == "delivered"
        # the operator is told where the change went
        delivered = f"Delivered the change to branch {row.result_branch}"
        await until(
            pilot,
            "the delivery toast",
            lambda: any(n.message.startswith(delivered) for n in app._notifications),
        )


@pytest.mark.slow
async def test_the_command_palette_offers_the_board_actions(board_world) -> None:
    """The palette offers the board's actions, those of the selected row only."""
    sup, repo, _release = board_world()
    app = _app(sup, repo, on_ready=lambda s: seed_board(s, repo))
    async with app.run_test(size=(140, 30)) as pilot:
        board = await board_ready(app, pilot)
        alpha = next(s for s in board.order if board.summaries[s].intent.startswith("Alpha"))
        board.table.move_cursor(row=board.order.index(alpha))  # a diff waiting for approval
        await until(pilot, "the cursor on Alpha", lambda: board.selected_id() == alpha)
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for words in (
            "New (n)",
            "Approve (a)",
            "Review diff (D)",
            "Filter (f)",
            "Cancel (x)",
            "Help (?)",
            "Search (/)",
        ):
            assert words in titles, titles
        assert "Confirm (c)" not in titles  # its contract is confirmed already


@pytest.mark.slow
async def test_a_contract_file_in_the_form_and_a_reject_comment(
    board_world, tmp_path: Path
) -> None:
    import json

    from corral.supervisor.states import CoderState

    sup, repo, _release = board_world()
    contract_file = tmp_path / "c.json"
    contract_file.write_text(
        json.dumps(
            {
                "description": "mine",
                "checks": [{"name": "mine", "command": "test -f alpha.txt", "timeout_secs": 10}],
            }
        )
    )
    app = _app(sup, repo)
    async with app.run_test(size=(140, 40)) as pilot:
        board = await board_ready(app, pilot)
        await pilot.press("n")
        await until(pilot, "the new-session form", lambda: isinstance(app.screen, NewSessionScreen))
        await pilot.press(*"Alpha adds a file")
        app.screen.query_one("#contract", Input).value = str(contract_file)
        await pilot.click("#start")
        rows = await until(
            pilot,
            "the contract to be proposed",
            lambda: [r for r in sup.list() if r.state is CoderState.CONTRACT_PROPOSED],
        )
        sid = rows[0].session_id
        contract = sup.get(sid).session.contract
        assert contract is not None and [c.name for c in contract.checks] == ["mine"]
        await sup.confirm(sid)
        await sup.wait_for(sid, {CoderState.NEEDS_APPROVAL}, timeout=20)
        await until(pilot, "the diff to reach the board", lambda: board_in_sync(app))
        assert app.screen is board
        board.table.move_cursor(row=board.order.index(sid))
        await pilot.press("r")
        await asked(pilot, None)
        await pilot.press(*"not like this", "ctrl+y")
        row = await sup.wait_for(sid, {CoderState.ABANDONED}, timeout=10)
        assert row.state is CoderState.ABANDONED
        texts = plan_texts(sup, sid)
        assert "Rejected: not like this" in texts


@pytest.mark.slow
async def test_moving_between_rows_with_the_same_keys_keeps_the_footer(board_world) -> None:
    """Rebuilding the footer's widgets is the slowest thing a cursor move can
    do (with 100 agents streaming it doubled keystroke → repaint): two working
    sessions, each in its own worktree, offer the same keys, so moving between
    them leaves the footer alone; a row with other keys still redraws it."""
    sup, repo, _release = board_world()

    async def seed(s) -> None:  # type: ignore[no-untyped-def]
        ids = await seed_board(s, repo)
        second = (await s.start("Bravo waits again", repo)).session_id
        await s.confirm(second)
        await s.wait_for(second, {CoderState.RUNNING}, timeout=5)
        ids["Bravo2"] = second

    app = _app(sup, repo, on_ready=seed)
    async with app.run_test(size=(140, 20)) as pilot:
        board = await board_ready(app, pilot)
        await until(pilot, "both working rows", lambda: len(board.order) == 6)
        working = [
            i
            for i, sid in enumerate(board.order)
            if board.summaries[sid].intent.startswith("Bravo")
        ]
        assert len(working) == 2
        first, second = (board.summaries[board.order[i]] for i in working)
        assert first.worktree and second.worktree and first.worktree != second.worktree
        rebuilt: list[int] = []
        original = board.refresh_bindings

        def counted() -> None:
            rebuilt.append(1)
            original()

        board.refresh_bindings = counted  # type: ignore[method-assign]
        board.table.move_cursor(row=working[0])
        await pilot.pause()
        rebuilt.clear()
        for _ in range(3):
            board.table.move_cursor(row=working[1])
            await pilot.pause()
            board.table.move_cursor(row=working[0])
            await pilot.pause()
        assert rebuilt == []
        assert "cancel_session" in footer_actions(app)
        contract = next(
            i for i, sid in enumerate(board.order) if board.summaries[sid].needs_you == "contract"
        )
        board.table.move_cursor(row=contract)
        await until(pilot, "the contract row's keys", lambda: "confirm" in footer_actions(app))
        assert rebuilt


@pytest.mark.slow
async def test_confirm_dialogs_name_the_checks_and_the_real_branch(board_world) -> None:
    from corral.supervisor.states import short_id

    sup, repo, _release = board_world()
    app = _app(sup, repo, on_ready=lambda s: seed_board(s, repo))
    async with app.run_test(size=(140, 30)) as pilot:
        board = await board_ready(app, pilot)

        def cursor_on(word: str) -> str:
            sid = next(s for s in board.order if board.summaries[s].intent.startswith(word))
            board.table.move_cursor(row=board.order.index(sid))
            return sid

        echo = cursor_on("Echo")
        await until(pilot, "the cursor on Echo", lambda: board.selected_id() == echo)
        await pilot.press("c")
        modal = await asked(pilot, then="n")
        names = [c.name for c in sup.get(echo).session.contract.checks]  # type: ignore[union-attr]
        assert f"Checks: {', '.join(names)}." in modal.question
        alpha = cursor_on("Alpha")
        await until(pilot, "the cursor on Alpha", lambda: board.selected_id() == alpha)
        await pilot.press("a")
        modal = await asked(pilot, then="n")
        assert f"branch corral/{short_id(alpha)}?" in modal.question
        assert "<id>" not in modal.question


@pytest.mark.slow
async def test_a_key_that_does_not_apply_says_why(board_world) -> None:
    """The supervisor's table decides what a row allows; a key pressed on a row
    that cannot take it says why in one line (it used to do nothing)."""
    sup, repo, _release = board_world()
    app = _app(sup, repo, on_ready=lambda s: seed_board(s, repo))
    async with app.run_test(size=(140, 30)) as pilot:
        board = await board_ready(app, pilot)
        echo = next(s for s in board.order if board.summaries[s].intent.startswith("Echo"))
        board.table.move_cursor(row=board.order.index(echo))  # waiting at gate 1
        await until(pilot, "the cursor on Echo", lambda: board.selected_id() == echo)
        app.clear_notifications()
        for key, words in (
            ("a", "Nothing waits for approval"),
            ("X", "Only a finished session is deleted"),
            ("h", "Only a finished session is archived"),
            ("P", "Only a delivered branch is pushed"),
        ):
            await pilot.press(key)
            await until(
                pilot,
                f"why {key} does not apply",
                lambda w=words: any(w in str(n.message) for n in app._notifications),
            )
        assert board.app.screen is board  # nothing opened, nothing asked
