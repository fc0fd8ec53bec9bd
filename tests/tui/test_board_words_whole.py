"""With the preview beside the board (200 columns), the board's state words
are whole: past the intent's 30 cells the capped columns get the room first
(it went to the intent, and "contract proposed" read "contract propos…")."""

from __future__ import annotations

import pytest

from .conftest import board_ready, until
from .test_board_narrow import _app


@pytest.mark.slow
async def test_at_200_columns_the_preview_never_cuts_the_state_words(board_world) -> None:  # type: ignore[no-untyped-def]
    sup, repo, _release = board_world()
    app = _app(sup, repo)
    async with app.run_test(size=(200, 50)) as pilot:
        board = await board_ready(app, pilot)
        area = board.query_one("#board-area")
        await until(pilot, "the preview beside the board", lambda: area.has_class("-beside"))
        table = board.table
        keys = table.column_keys
        await pilot.pause()
        i = keys.index("state")  # "contract proposed": 17 cells, past the state's cap
        assert table._widths[i] == table._content_widths[i] == 17, table._widths
        assert table._widths[keys.index("intent")] >= 30
