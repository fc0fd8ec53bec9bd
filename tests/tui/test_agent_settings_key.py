"""`m` on the session screen: an ACP agent's modes and models in a small
chooser at 80×24, the choice set through the owner and arriving at the
agent; any other session says in one line why it has none."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from textual.widgets import OptionList, Static

from corral.supervisor.actions import SessionFacts, why_not
from corral.supervisor.contracts.drafting import FixedDrafter
from corral.supervisor.factory import build_supervisor
from corral.supervisor.states import CoderState
from corral.tui.app import CorralApp
from corral.tui.screens.agent_settings import AgentSettingsScreen
from corral.tui.screens.session import SessionScreen
from tests.conftest import fast_config
from tests.fakes.scripted import Wait, contract

from .conftest import make_repo, open_from_board, scripted_supervisor, until

FAKE = Path(__file__).resolve().parents[1] / "fakes" / "acp_agent.py"

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


def _recorded(out: Path) -> list[dict[str, object]]:
    path = out / "models.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.slow
async def test_m_opens_the_acp_agents_modes_and_models_and_sets_the_one_chosen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "repo")
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.setenv("ACP_FAKE_OUT", str(out))
    monkeypatch.setenv("CORRAL_AGENT_ENV_ALLOW", "ACP_FAKE_OUT")
    sup = build_supervisor(
        tmp_path / "state",
        FixedDrafter(contract(("noted", "test -f notes.txt"))),
        socket_dir=tmp_path / "tmux",
        config=fast_config(sandbox={"writable": [str(out)]}),
    )
    engine = f"acp:{sys.executable} {FAKE} models"
    sid = ""

    async def seed(s: object) -> None:
        nonlocal sid
        sid = (await sup.start("Think about notes", repo, engine=engine)).session_id
        await sup.confirm(sid)

    app = CorralApp(sup, default_repo=repo, on_ready=seed)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_from_board(app, pilot, "enter")
        assert isinstance(screen, SessionScreen)
        await until(
            pilot,
            "the agent to announce its models",
            lambda: (o := sup.get(sid).session.agent_offers) is not None and o.models,
        )
        header = screen.query_one("#session-header", Static)
        await until(
            pilot, "the header to show them", lambda: "model fast-1" in str(header.render())
        )
        await pilot.press("m")
        chooser = await until(
            pilot,
            "the chooser",
            lambda: app.screen if isinstance(app.screen, AgentSettingsScreen) else None,
        )
        listing = chooser.query_one(OptionList)
        lines = [str(listing.get_option_at_index(i).prompt) for i in range(listing.option_count)]
        assert lines == [
            "* mode  ask",
            "  mode  code",
            "* model fast-1 (Fast)",
            "  model deep-2 (Deep)",
        ]
        # it fits the 80×24 terminal, every choice on screen
        box = chooser.query_one("#agent-settings").region
        assert box.right <= 80 and box.bottom <= 24 and listing.region.height >= 4
        assert listing.highlighted == 0  # on the current mode
        await pilot.press("down", "down", "down", "enter")
        await until(pilot, "the chooser to close", lambda: app.screen is screen)
        await until(
            pilot, "the model to reach the agent", lambda: {"model": "deep-2"} in _recorded(out)
        )
        await until(pilot, "the header to say so", lambda: "model deep-2" in str(header.render()))
        # escape leaves it as it was
        await pilot.press("m")
        await until(pilot, "the chooser", lambda: isinstance(app.screen, AgentSettingsScreen))
        await pilot.press("escape")
        await until(pilot, "the chooser to close", lambda: app.screen is screen)
        assert sum(1 for e in _recorded(out) if "model" in e) == 1
        await sup.cancel(sid)


@pytest.mark.slow
async def test_m_on_a_session_that_is_not_acp_says_why_in_one_line(tmp_path: Path) -> None:
    import asyncio

    repo = make_repo(tmp_path / "repo")
    release = asyncio.Event()
    sup = scripted_supervisor(tmp_path / "state", contract(("ok", "true")), writes=[Wait(release)])

    async def seed(s: object) -> None:
        sid = (await sup.start("Work a while", repo)).session_id
        await sup.confirm(sid)
        await sup.wait_for(sid, {CoderState.RUNNING}, timeout=20)

    app = CorralApp(sup, default_repo=repo, on_ready=seed)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_from_board(app, pilot, "enter")
        await pilot.press("m")
        toast = await until(pilot, "the refusal", lambda: list(app._notifications))
        said = [n.message for n in toast]
        assert any(
            "does not speak ACP: only ACP agents announce modes and models" in m for m in said
        )
        assert all("\n" not in m for m in said)
        assert app.screen is screen  # no chooser
        release.set()


def test_the_actions_table_says_why_a_session_has_no_modes_to_switch() -> None:
    running = dict(session_id="0" * 24, state=CoderState.RUNNING)
    assert "runs in a tmux pane, not over ACP" in (
        why_not("agent_settings", SessionFacts(**running, transport="tmux")) or ""
    )
    assert "announced no modes or models" in (
        why_not("agent_settings", SessionFacts(**running, transport="acp")) or ""
    )
    stopped = SessionFacts(session_id="0" * 24, state=CoderState.FAILED, transport="acp")
    assert "is not running (failed)" in (why_not("agent_settings", stopped) or "")
    ok = SessionFacts(**running, transport="acp", offers=("modes",))
    assert why_not("agent_settings", ok) is None
