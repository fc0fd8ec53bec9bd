"""The conversation view over a real ACP agent (the scripted one in
tests/fakes, speaking the protocol over stdio through the real supervisor):
`t` on an ACP session opens it (before, `t` focused a terminal that does not
exist: "no live agent pane"), the permission question shows the edit's
diff and is answered from the prompt, and a shell the agent ran through
corral's terminal shows its output under its command."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Static
from textual.widgets._footer import FooterKey

from corral.supervisor.contracts.drafting import FixedDrafter
from corral.supervisor.factory import build_supervisor
from corral.supervisor.states import CoderState
from corral.tui.app import CorralApp
from corral.tui.screens.conversation import ConversationScreen, PromptArea
from corral.tui.screens.session import SessionScreen
from corral.tui.widgets.conversation import ConversationView
from tests.conftest import fast_config
from tests.fakes.scripted import contract

from .conftest import footer_actions, make_repo, open_from_board, until

FAKE = Path(__file__).resolve().parents[1] / "fakes" / "acp_agent.py"

pytestmark = [
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
    pytest.mark.slow,
]


def _app(tmp_path: Path, script: str) -> tuple[CorralApp, Any, list[str]]:
    repo = make_repo(tmp_path / "repo")
    sup = build_supervisor(
        tmp_path / "state",
        FixedDrafter(contract(("noted", "grep -q done notes.txt"))),
        socket_dir=tmp_path / "tmux",
        config=fast_config(),
    )
    ids: list[str] = []

    async def seed(s: object) -> None:
        engine = f"acp:{sys.executable} {FAKE} {script}"
        sid = (await sup.start("Write done to notes.txt", repo, engine=engine)).session_id
        ids.append(sid)
        await sup.confirm(sid)

    return CorralApp(sup, default_repo=repo, on_ready=seed), sup, ids


def _shown(view: ConversationView) -> str:
    """The lines the view draws (one widget: its blocks are not widgets)."""
    return "\n".join(strip.text for index in view.views for strip in view.drawn(index))


async def test_t_opens_the_conversation_and_the_permission_diff_is_answered_from_its_prompt(
    tmp_path: Path,
) -> None:
    app, sup, ids = _app(tmp_path, "write")
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_from_board(app, pilot, "enter")
        assert isinstance(screen, SessionScreen)
        await until(pilot, "the question", lambda: sup.get(ids[0]).question_prompt)
        await pilot.press("escape")  # the question took the input: leave it for the keys
        # `t` opens the conversation here, and the footer says so (it said "Terminal")
        await until(pilot, "the t key", lambda: "focus_terminal" in footer_actions(app))
        labels = {key.action: key.description for key in screen.query(FooterKey)}
        assert labels["focus_terminal"] == "Conversation"
        await pilot.press("t")
        convo = await until(
            pilot,
            "the conversation",
            lambda: app.screen if isinstance(app.screen, ConversationScreen) else None,
        )
        question = convo.query_one("#convo-question", Static)
        await until(pilot, "the question shown", lambda: "+done" in str(question.render()))
        shown = str(question.render())
        assert "Write notes.txt" in shown and "1 Allow" in shown and '"' not in shown
        view = convo.query_one(ConversationView)
        await until(pilot, "the plan", lambda: "write notes.txt" in _shown(view))
        await pilot.press("1", "enter")
        assert isinstance(app.focused, PromptArea)
        await until(
            pilot,
            "the agent's answer",
            lambda: any(
                b.kind == "message" and "I wrote notes.txt" in b.text
                for b in view.conversation.blocks
            ),
        )
        row = await sup.wait_for(ids[0], {CoderState.NEEDS_APPROVAL, CoderState.FAILED})
        assert row.state is CoderState.NEEDS_APPROVAL, row.error
        await pilot.press("escape", "escape")
        await until(pilot, "back on the session", lambda: app.screen is screen)


async def test_a_shell_the_agent_ran_shows_its_output_under_its_command(tmp_path: Path) -> None:
    app, sup, ids = _app(tmp_path, "shell")
    async with app.run_test(size=(200, 50)) as pilot:
        screen = await open_from_board(app, pilot, "enter")
        await sup.wait_for(ids[0], {CoderState.NEEDS_APPROVAL, CoderState.FAILED}, timeout=60)
        await pilot.pause()
        screen.set_focus(None)  # no input focused: `t` is a key, not a letter typed
        await pilot.press("t")
        convo = await until(
            pilot,
            "the conversation",
            lambda: app.screen if isinstance(app.screen, ConversationScreen) else None,
        )
        view = convo.query_one(ConversationView)
        tool = await until(
            pilot,
            "the shell's tool call",
            lambda: next((b for b in view.conversation.blocks if b.kind == "tool"), None),
        )
        assert tool.status == "completed" and tool.output.strip() == "ok"
        await until(pilot, "its output shown", lambda: "ok" in _shown(view))
