"""Text that is not corral's own (an intent, a name, an engine's command
line, a sentence quoting a config table) shows as written wherever the console
shows it: square brackets are never taken as markup and eaten."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Static
from textual.widgets._toast import Toast

from corral.supervisor.api import Supervisor
from corral.tui.app import CorralApp
from tests.fakes.scripted import contract

from .conftest import board_ready, make_repo, open_from_board, scripted_supervisor, until

DRAFTED = contract(("hello", "grep -q hi hello.txt"), description="hello.txt [says] hi")
INTENT = "Fix [bold]the parser[/] and [llm] settings [/]"
NAME = "[red]mine[/red]"


def rendered(widget: Static) -> str:
    return str(widget.render())


async def test_brackets_in_intents_names_and_toasts_are_shown_as_written(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    sup = scripted_supervisor(tmp_path / "state", DRAFTED)
    seeded: dict[str, str] = {}

    async def ready(s: Supervisor) -> None:
        sid = (await s.start(INTENT, repo)).session_id
        s.rename(sid, NAME)
        seeded["sid"] = sid

    app = CorralApp(sup, default_repo=repo, on_ready=ready)
    async with app.run_test(size=(160, 40)) as pilot:
        board = await board_ready(app, pilot)
        await until(pilot, "the row", lambda: len(board.order) == 1)
        app.notify("no model: set CORRAL_LLM_PROVIDER or [llm] in ~/.config/corral/config.toml")
        sentence = "no model: set CORRAL_LLM_PROVIDER or [llm] in ~/.config/corral/config.toml"
        notes = await until(
            pilot, "the toast", lambda: [n for n in app._notifications if n.message == sentence]
        )
        assert all(not n.markup for n in app._notifications)  # the rack shows them as written
        assert "or [llm] in ~/.config" in str(Toast(notes[0]).render())
        app.clear_notifications()
        screen = await open_from_board(app, pilot, "enter")
        header = rendered(screen.query_one("#session-header", Static))
        assert "[bold]the parser[/] and [llm] settings [/]" in header
        assert NAME in header
        contract_text = "\n".join(
            rendered(w) for w in screen.query(Static) if "hello.txt" in rendered(w)
        )
        assert "[says]" in contract_text
