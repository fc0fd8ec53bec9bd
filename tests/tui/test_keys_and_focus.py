"""Keys and focus: typing never fires a key, what cannot be undone asks once
with the same modal on every screen, and the footer shows the keys that act."""

from __future__ import annotations

import pytest
from textual.widgets import DataTable, Input

from corral.supervisor.states import CoderState
from corral.tui.app import CorralApp
from corral.tui.confirm import ConfirmScreen
from corral.tui.screens.diff import DiffScreen
from corral.tui.screens.new_session import NewSessionScreen
from corral.tui.screens.session import SessionScreen

from .conftest import asked, board_in_sync, board_ready, seed_board, until


def _app(board_world) -> tuple[CorralApp, dict[str, str]]:  # type: ignore[no-untyped-def]
    sup, repo, _release = board_world()
    ids: dict[str, str] = {}

    async def seed(s):  # type: ignore[no-untyped-def]
        ids.update(await seed_board(s, repo))

    return CorralApp(sup, default_repo=repo, on_ready=seed), ids


async def _open(app, pilot, sid: str, key: str = "enter"):  # type: ignore[no-untyped-def]
    board = await board_ready(app, pilot)
    board.table.move_cursor(row=board.order.index(sid))
    await pilot.press(key)
    want = SessionScreen if key == "enter" else DiffScreen
    return await until(
        pilot,
        f"the screen {key!r} opens",
        lambda: app.screen if isinstance(app.screen, want) else None,
    )


@pytest.mark.slow
async def test_typing_a_revision_at_gate_1_never_fires_a_key(board_world) -> None:  # type: ignore[no-untyped-def]
    app, ids = _app(board_world)
    sup = app.supervisor
    async with app.run_test(size=(130, 40)) as pilot:
        await board_ready(app, pilot)
        sid = ids["Echo"]
        screen = await _open(app, pilot, sid)
        reply = screen.query_one("#reply", Input)
        await until(pilot, "the revision input to have focus", lambda: reply.has_focus)
        assert "escape" in reply.placeholder  # says how to reach the keys
        # c confirms, e edits, l filters, t is the terminal, x cancels: none may fire
        await pilot.press(*"/check c_named cat file", "enter")

        def names() -> list[str]:
            c = sup.get(sid).session.contract
            return [k.name for k in c.checks] if c else []

        await until(pilot, "the revision", lambda: "c_named" in names())
        assert sup.get(sid).session.state is CoderState.CONTRACT_PROPOSED
        assert not isinstance(app.screen, ConfirmScreen) and app.screen is screen
        assert screen.log_filter == "all"
        # escape leaves the input for the keys (the checks table, visibly focused)
        await pilot.press("escape")
        table = screen.query_one("#checks", DataTable)
        await until(pilot, "the checks table to have focus", lambda: table.has_focus)
        assert app.screen is screen


@pytest.mark.slow
async def test_delete_on_the_checks_table_asks_and_escape_keeps_the_check(board_world) -> None:  # type: ignore[no-untyped-def]
    app, ids = _app(board_world)
    sup = app.supervisor
    async with app.run_test(size=(130, 40)) as pilot:
        await board_ready(app, pilot)
        sid = ids["Echo"]
        screen = await _open(app, pilot, sid)
        table = screen.query_one("#checks", DataTable)
        await pilot.press("escape")
        await until(pilot, "the checks table to have focus", lambda: table.has_focus)
        await pilot.press("delete")
        modal = await asked(pilot, None)
        assert "file_echo" in str(modal.question)  # it names what would go
        await pilot.press("escape")
        await until(pilot, "the session again", lambda: app.screen is screen)
        contract = sup.get(sid).session.contract
        assert contract is not None and [c.name for c in contract.checks] == ["file_echo"]


@pytest.mark.slow
async def test_confirm_approve_cancel_reject_each_ask_once_with_the_same_modal(
    board_world,  # type: ignore[no-untyped-def]
) -> None:
    app, ids = _app(board_world)
    sup = app.supervisor
    async with app.run_test(size=(140, 40)) as pilot:
        board = await board_ready(app, pilot)
        states = {sid: sup.get(sid).session.state for sid in ids.values()}

        async def keeps(key: str, keep: str = "escape") -> None:
            here = app.screen
            await pilot.press(key)
            await asked(pilot, keep)  # the same ConfirmScreen; escape / n keeps
            await until(pilot, f"{key!r} to change nothing", lambda: app.screen is here)

        for name, keys in (("Echo", "cx"), ("Alpha", "aorx"), ("Bravo", "x")):
            board.table.move_cursor(row=board.order.index(ids[name]))
            for key in keys:
                await keeps(key, "n" if key == "a" else "escape")

        screen = await _open(app, pilot, ids["Echo"])
        await pilot.press("escape")  # leave the revision input
        await until(pilot, "no input focused", lambda: not isinstance(screen.focused, Input))
        await keeps("ctrl+y")  # a letter here is typed into the input (test_gate_safety)
        await pilot.press("escape")
        await until(pilot, "the board", lambda: app.screen is board)

        screen = await _open(app, pilot, ids["Alpha"])
        if isinstance(screen.focused, Input):
            await pilot.press("escape")
        for key in ("ctrl+a", "ctrl+o", "ctrl+r", "x"):
            await keeps(key)
        await pilot.press("escape")
        await until(pilot, "the board", lambda: app.screen is board)

        diff = await _open(app, pilot, ids["Alpha"], "D")
        await until(pilot, "the diff to load", lambda: bool(diff.files))
        for key in ("ctrl+a", "ctrl+o", "ctrl+r"):
            await keeps(key)
        await pilot.press("escape")
        await until(pilot, "the board", lambda: app.screen is board)
        assert {sid: sup.get(sid).session.state for sid in ids.values()} == states

        # going ahead asks once, then acts
        board.table.move_cursor(row=board.order.index(ids["Echo"]))
        await pilot.press("c")
        await asked(pilot, "enter")  # enter keeps: typing never answers
        assert sup.get(ids["Echo"]).session.state is CoderState.CONTRACT_PROPOSED
        await pilot.press("c")
        await asked(pilot)
        assert app.screen is board
        echo = ids["Echo"]
        await until(
            pilot,
            "the contract confirmed",
            lambda: sup.get(echo).session.state is not CoderState.CONTRACT_PROPOSED,
        )


@pytest.mark.slow
async def test_after_start_the_board_cursor_is_on_the_new_session(board_world) -> None:  # type: ignore[no-untyped-def]
    app, _ids = _app(board_world)
    sup = app.supervisor
    async with app.run_test(size=(140, 40)) as pilot:
        board = await board_ready(app, pilot)
        board.table.move_cursor(row=len(board.order) - 1)
        await pilot.press("n")
        await until(pilot, "the new-session form", lambda: isinstance(app.screen, NewSessionScreen))
        await pilot.press(*"Foxtrot adds a file")
        await pilot.click("#start")
        new = await until(
            pilot,
            "the new session",
            lambda: next((r for r in sup.list() if r.intent.startswith("Foxtrot")), None),
        )
        await until(pilot, "the board in sync", lambda: board_in_sync(app))
        await until(
            pilot, "the cursor on the new session", lambda: board.selected_id() == new.session_id
        )
