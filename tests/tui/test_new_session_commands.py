"""The new-session form offers `custom:` and one-shot commands, and a refusal
keeps the form open with what was typed."""

from __future__ import annotations

import shutil
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from textual.widgets import Button, Input, Select, Static

from corral.supervisor.api import Supervisor
from corral.supervisor.contracts.drafting import FixedDrafter
from corral.supervisor.factory import build_supervisor
from corral.supervisor.states import CoderState
from corral.tui.app import CorralApp
from corral.tui.screens.new_session import NewSessionScreen
from tests.conftest import hello_contract
from tests.tui.conftest import FIXED_NOW, board_ready, make_repo, until

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[tuple[Supervisor, Path]]:
    """The real engine registry (what can run here is really looked up)."""
    sup = build_supervisor(
        tmp_path / "state", FixedDrafter(hello_contract()), socket_dir=tmp_path / "tmux"
    )
    yield sup, make_repo(tmp_path / "repo")


def refusal_text(app: CorralApp) -> str:
    refusal = app.screen.query_one("#refusal", Static)
    return str(refusal.render()) if refusal.display else ""


async def open_form(app: CorralApp, pilot) -> NewSessionScreen:  # type: ignore[no-untyped-def]
    await board_ready(app, pilot)
    await pilot.press("n")
    return await until(
        pilot,
        "the new-session form",
        lambda: app.screen if isinstance(app.screen, NewSessionScreen) else None,
    )


@pytest.mark.slow
async def test_choosing_a_one_shot_command_and_starting(world) -> None:  # type: ignore[no-untyped-def]
    sup, repo = world
    app = CorralApp(sup, default_repo=repo, clock=lambda: FIXED_NOW)
    command = f"{sys.executable} -c pass {{prompt}}"
    async with app.run_test(size=(140, 44)) as pilot:
        form = await open_form(app, pilot)
        await pilot.press(*"Write hello")
        line = form.query_one("#command", Input)
        assert not line.display  # only for the command engines
        options = [str(label) for label, _value in form.query_one("#engine", Select)._options]
        assert "one-shot command…" in options and "custom command…" in options
        form.query_one("#engine", Select).value = "oneshot:"
        await until(pilot, "the command input", lambda: line.display and line.has_focus)
        assert "{prompt}" in line.placeholder
        await pilot.press(*command)
        await pilot.press("enter")
        row = await until(
            pilot,
            "the session to start",
            lambda: next((r for r in sup.list() if r.intent == "Write hello"), None),
        )
        await until(
            pilot, "the form to close", lambda: not isinstance(app.screen, NewSessionScreen)
        )
        session = sup.get(row.session_id).session
        assert session.engine == f"oneshot:{command}"
        await sup.wait_for(row.session_id, {CoderState.CONTRACT_PROPOSED}, timeout=20)


@pytest.mark.slow
async def test_an_unrunnable_command_is_refused_in_the_form_and_the_intent_kept(world) -> None:  # type: ignore[no-untyped-def]
    sup, repo = world
    app = CorralApp(sup, default_repo=repo, clock=lambda: FIXED_NOW)
    async with app.run_test(size=(140, 44)) as pilot:
        form = await open_form(app, pilot)
        await pilot.press(*"Keep this intent")
        form.query_one("#engine", Select).value = "oneshot:"
        line = form.query_one("#command", Input)
        await until(pilot, "the command input", lambda: line.display)
        await pilot.click("#start")  # an empty command
        text = await until(pilot, "the refusal", lambda: refusal_text(app))
        assert "no command line" in text
        await pilot.press(*"no-such-tool-xyz --go {prompt}")
        await pilot.click("#start")
        text = await until(
            pilot, "the second refusal", lambda: "is not installed" in refusal_text(app)
        )
        assert "no-such-tool-xyz" in refusal_text(app)
        assert app.screen is form
        assert form.query_one("#intent", Input).value == "Keep this intent"
        assert line.value == "no-such-tool-xyz --go {prompt}"
        assert not form.query_one("#start", Button).disabled
        assert sup.list() == []  # nothing was made

        # a refusal only start() can give (not a repository) keeps the form too
        form.query_one("#engine", Select).value = "custom:"
        line.value = f"{sys.executable} -c pass"
        form.query_one("#repo", Input).value = str(repo.parent / "nowhere")
        # pressed, not clicked: the refusals above may have moved the button
        # under a toast, where a click lands on the toast instead
        form.query_one("#start", Button).press()
        await until(pilot, "the repo refusal", lambda: "nowhere" in refusal_text(app))
        assert app.screen is form and form.query_one("#intent", Input).value == "Keep this intent"
        assert sup.list() == []
