"""A key of the session screen that cannot act now says why in a short
notice (and rings), never nothing: gate-1 edits away from gate 1, the agent
terminal and attach where there is none."""

from __future__ import annotations

import pytest

from corral.tui.app import CorralApp
from corral.tui.screens.session import SessionScreen

from .conftest import FIXED_NOW, board_ready, seed_board, until


@pytest.mark.slow
@pytest.mark.parametrize("size", [(80, 24), (200, 50)], ids=["80x24", "200x50"])
async def test_keys_that_cannot_act_say_why(board_world, size: tuple[int, int]) -> None:
    sup, repo, _release = board_world()
    ids: dict[str, str] = {}

    async def seed(s):  # type: ignore[no-untyped-def]
        ids.update(await seed_board(s, repo))

    app = CorralApp(sup, default_repo=repo, clock=lambda: FIXED_NOW, on_ready=seed)
    async with app.run_test(size=size) as pilot:
        board = await board_ready(app, pilot)
        app.clear_notifications()
        board.table.move_cursor(row=board.order.index(ids["Delta"]))  # a diff waits: gate 2
        await pilot.press("enter")
        screen = await until(
            pilot,
            "the session screen",
            lambda: app.screen if isinstance(app.screen, SessionScreen) else None,
        )
        screen.set_focus(None)
        await pilot.pause()
        for key, words in (
            ("f2", "only at gate 1"),
            ("ctrl+s", "only at gate 1"),
            ("t", "no live agent terminal"),
            ("A", "no terminal to attach"),
        ):
            app.clear_notifications()
            await pilot.press(key)
            said = await until(
                pilot,
                f"a notice for {key}",
                lambda: [n.message for n in app._notifications],
                timeout=5,
            )
            assert any(words in m for m in said), (key, said)
            assert app.screen is screen
