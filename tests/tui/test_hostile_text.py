"""An agent's, a check's or an intent's text never kills the console and is
never obeyed: a check printing text shaped like markup, an intent holding
markup, escape sequences, bidi and zero-width characters are shown as text."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import DataTable, RichLog, Static

from corral.supervisor.states import CoderState
from corral.tui.app import CorralApp
from corral.tui.screens.session import SessionScreen
from tests.fakes.scripted import Write, contract

from .conftest import make_repo, open_from_board, scripted_supervisor, until

# plain text shaped like markup: Rich's escape leaves `[0m` alone, and
# Textual's parser then reads `[0m … [link=…]` as one broken tag
MARKUP_SHAPED = "[0m [link=http://evil.example/x]click[/link] [/] [@click=app.quit]q[/]"
ESCAPES = "\x1b]52;c;cHduZWQ=\x07\x1b]2;owned\x07\x1b[2J"


def shown(screen: SessionScreen) -> str:
    """Everything the session screen's text widgets show now, as plain text."""
    parts = [str(w.render()) for w in screen.query(Static)]
    for log in screen.query(RichLog):
        parts.extend(line.text for line in log.lines)
    return "\n".join(parts)


async def test_markup_shaped_check_output_and_intent_are_shown_as_text(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "shop")
    output = f"printf '%s\\n' '{MARKUP_SHAPED}'; printf 'ok\\033]2;owned\\007\\n'; false"
    drafted = contract(("tests", output), description=f"desc {MARKUP_SHAPED}")
    sup = scripted_supervisor(tmp_path / "state", drafted, [Write("x.txt", "x\n")])
    intent = f"Fix [b]it[/b] {MARKUP_SHAPED} {ESCAPES}"

    async def fail_one(s) -> None:  # type: ignore[no-untyped-def]
        sid = (await s.start(intent, repo)).session_id
        await s.confirm(sid)
        await s.wait_for(sid, {CoderState.FAILED}, timeout=30)

    app = CorralApp(sup, default_repo=repo, on_ready=fail_one)
    async with app.run_test(size=(140, 40)) as pilot:
        screen = await open_from_board(app, pilot, "enter")
        assert isinstance(screen, SessionScreen)
        table = screen.query_one("#checks", DataTable)
        await until(pilot, "the checks", lambda: table.row_count == 1)
        detail = screen.query_one("#check-detail", Static)
        await until(pilot, "the check's output", lambda: "[0m" in str(detail.render()))
        text = shown(screen)
        assert app.is_running and app.screen is screen
        assert MARKUP_SHAPED in text  # the intent's and the output's brackets, as typed
        assert "Fix [b]it[/b]" in text
        assert "\x1b" not in text and "␛]2;owned␇" in text
