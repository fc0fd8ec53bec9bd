"""An adopted pane in the console: the board labels it adopted, its screen
shows no contract and the agent's question, and `1` answers it in the
user's own pane (which keeps running after the console closes)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from textual.widgets import Static

from corral.supervisor.api import Supervisor
from corral.supervisor.contracts.drafting import FixedDrafter
from corral.supervisor.demo import demo_contract
from corral.supervisor.factory import build_supervisor
from corral.tui.app import CorralApp
from corral.tui.rows import state_text
from tests.conftest import fast_config
from tests.integration.test_adoption import SLUG, UserServer, kill_tmux

from .conftest import board_ready, open_from_board, until

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


@pytest.mark.slow
async def test_an_adopted_pane_is_answered_from_its_session_screen(tmp_path: Path) -> None:
    user = UserServer(tmp_path)
    sup = build_supervisor(
        tmp_path / "state",
        FixedDrafter(demo_contract(SLUG)),
        socket_dir=tmp_path / "tmux",
        default_engine="external:demo",
        config=fast_config(),
    )
    adopted: list[str] = []

    async def ready(s: Supervisor) -> None:
        [pane] = await s.adoptable([user.socket])
        adopted.append(await s.adopt(pane.target))

    app = CorralApp(sup, default_repo=tmp_path, on_ready=ready)
    try:
        async with app.run_test(size=(140, 40)) as pilot:
            board = await board_ready(app, pilot)
            await until(
                pilot,
                "the adopted row asking",
                lambda: board.summaries[adopted[0]].needs_you == "question",
            )
            row = board.summaries[adopted[0]]
            assert row.adopted and str(state_text(row)).startswith("adopted · agent waiting")
            screen = await open_from_board(app, pilot, "enter")
            assert "No contract." in str(screen.query_one("#contract-title", Static).render())
            question = screen.query_one("#question", Static)
            await until(pilot, "the question", lambda: "edit to notes.md" in str(question.render()))
            await pilot.press("1", "enter")  # the reply input has focus: "1" is typed
            await until(pilot, "the answer in the pane", lambda: "chose: Yes" in user.heard())
        # the console closed: the adoption is left as it was (running, marked),
        # for the next start to adopt again
        assert user.alive() and user.marker() == f"{adopted[0]}:1"
    finally:
        user.stop()
        kill_tmux(tmp_path)
