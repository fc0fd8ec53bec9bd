"""Gates cannot be passed by typing: at a gate, typed text reaches only the
text input; what passes a gate (confirm, approve, reject) takes a key no one
types in prose, then a question whose default is to keep things as they are."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from textual.widgets import DataTable, Input

from corral.supervisor.api import Supervisor
from corral.supervisor.config import SupervisorConfig
from corral.supervisor.states import CoderState
from corral.tui.app import CorralApp
from corral.tui.confirm import GO_KEY, ConfirmScreen
from corral.tui.screens.session import SessionScreen
from tests.fakes.scripted import ScriptedDrafter

from .conftest import (
    IntentEngines,
    Write,
    _draft_for,
    asked,
    board_ready,
    footer_actions,
    make_repo,
    until,
)


class Watched:
    """The owner's gate calls, counted as they are made (the test's witness)."""

    def __init__(self, sup: Supervisor) -> None:
        self.calls: list[str] = []
        for name in ("confirm", "approve", "cancel"):
            original = getattr(sup, name)

            def spy(*a: Any, _name: str = name, _original: Any = original, **kw: Any) -> Any:
                self.calls.append(_name)
                return _original(*a, **kw)

            setattr(sup, name, spy)


def gate_world(root: Path) -> tuple[Supervisor, Path]:
    repo = make_repo(root / "shop")
    config = SupervisorConfig.model_validate(
        {"repair_invokes": 0, "git_stats_secs": 3600, "usage_secs": 3600}
    )
    engines = IntentEngines({"Alpha": [Write("alpha.txt", "a\n")]})
    sup = Supervisor(
        root / "state", drafter=ScriptedDrafter([_draft_for]), engines=engines, config=config
    )
    return sup, repo


async def seed_gate(sup: Supervisor, repo: Path, gate: int) -> str:
    if gate == 1:
        sid = (await sup.start("Echo awaits its contract", repo)).session_id
        await sup.wait_for(sid, {CoderState.CONTRACT_PROPOSED}, timeout=20)
        return sid
    sid = (await sup.start("Alpha adds a file", repo)).session_id
    await sup.confirm(sid)
    await sup.wait_for(sid, {CoderState.NEEDS_APPROVAL}, timeout=30)
    return sid


async def open_session(app: CorralApp, pilot: Any, sid: str) -> SessionScreen:
    board = await board_ready(app, pilot)
    app.clear_notifications()
    board.table.move_cursor(row=board.order.index(sid))
    await pilot.press("enter")
    return await until(
        pilot,
        "the session screen",
        lambda: app.screen if isinstance(app.screen, SessionScreen) else None,
    )


@pytest.mark.slow
async def test_the_reported_path_escape_tab_c_enter_never_confirms(tmp_path: Path) -> None:
    """The issue's report at 80×24: escape leaves the revision input, tab
    lands on the checks table, `c` there opened the confirm question and the
    enter meant for the revision answered it."""
    sup, repo = gate_world(tmp_path)
    ids: dict[str, str] = {}

    async def seed(s: Supervisor) -> None:
        ids["gate1"] = await seed_gate(s, repo, 1)

    app = CorralApp(sup, default_repo=repo, on_ready=seed)
    async with app.run_test(size=(80, 24)) as pilot:
        await board_ready(app, pilot)
        watched = Watched(sup)
        screen = await open_session(app, pilot, ids["gate1"])
        reply = screen.query_one("#reply", Input)
        await until(pilot, "the revision input", lambda: reply.has_focus)
        await pilot.press(*"make the ", "escape", "tab", *"check stricter", "enter")
        await pilot.pause()
        await until(pilot, "the keys handled", lambda: not isinstance(app.screen, ConfirmScreen))
        assert watched.calls == []
        assert sup.get(ids["gate1"]).session.state is CoderState.CONTRACT_PROPOSED
        # the letters typed away from the input went into it (the revision was sent)
        assert app.screen is screen


@pytest.mark.slow
async def test_a_key_shown_in_the_footer_returns_to_the_input(tmp_path: Path) -> None:
    sup, repo = gate_world(tmp_path)
    ids: dict[str, str] = {}

    async def seed(s: Supervisor) -> None:
        ids["gate1"] = await seed_gate(s, repo, 1)

    app = CorralApp(sup, default_repo=repo, on_ready=seed)
    async with app.run_test(size=(80, 24)) as pilot:
        await board_ready(app, pilot)
        screen = await open_session(app, pilot, ids["gate1"])
        reply = screen.query_one("#reply", Input)
        await until(pilot, "the revision input", lambda: reply.has_focus)
        await pilot.press("escape")
        table = screen.query_one("#checks", DataTable)
        await until(pilot, "the checks table", lambda: table.has_focus)
        assert "focus_reply" in footer_actions(app)
        await pilot.press("ctrl+e")
        await until(pilot, "the input again", lambda: reply.has_focus)
        # and a letter typed on the table is typed into the input, not a command
        await pilot.press("escape")
        await until(pilot, "the checks table", lambda: table.has_focus)
        await pilot.press(*"es+")
        await until(pilot, "the letters in the input", lambda: reply.value == "es+")


@pytest.mark.slow
async def test_the_question_keeps_on_enter_and_y_and_goes_only_on_its_key(
    tmp_path: Path,
) -> None:
    sup, repo = gate_world(tmp_path)
    ids: dict[str, str] = {}

    async def seed(s: Supervisor) -> None:
        ids["gate1"] = await seed_gate(s, repo, 1)

    app = CorralApp(sup, default_repo=repo, on_ready=seed)
    async with app.run_test(size=(80, 24)) as pilot:
        board = await board_ready(app, pilot)
        watched = Watched(sup)
        for keep in ("enter", "y", "tab", "space"):
            board.table.move_cursor(row=board.order.index(ids["gate1"]))
            await pilot.press("c")  # the board's letter only asks
            modal = await asked(pilot, None)
            await pilot.press(*dict.fromkeys([keep, "enter"]))  # y, tab, space: then enter
            await until(pilot, f"{keep!r} + enter to keep", lambda: app.screen is board)
            assert modal.answer is None
        assert watched.calls == []
        await pilot.press("c")
        await asked(pilot, GO_KEY)
        await until(pilot, "the confirm", lambda: watched.calls == ["confirm"])


# the keys a gate's question once answered to, and the letters that asked it,
# drawn three times as often as the rest of what a person types in prose
DANGEROUS = ["c", "a", "r", "o", "x", "y", "n", "e", "enter", "escape", "tab", "space"]
PROSE = [
    *"bdfghijklmpstuvwzACDEHNOPRTX0123456789",
    "shift+tab",
    "comma",
    "full_stop",
    "slash",
    "question_mark",
    "plus",
    "minus",
    "exclamation_mark",
    "colon",
]
KEYS = st.lists(st.sampled_from(DANGEROUS * 3 + PROSE), min_size=1, max_size=40)


def _typing_never_passes(gate: int, size: tuple[int, int], keys: list[str]) -> None:
    async def run() -> None:
        with tempfile.TemporaryDirectory(prefix="corral-gate-") as tmp:
            sup, repo = gate_world(Path(tmp))
            ids: dict[str, str] = {}

            async def seed(s: Supervisor) -> None:
                ids["sid"] = await seed_gate(s, repo, gate)

            app = CorralApp(sup, default_repo=repo, on_ready=seed)
            async with app.run_test(size=size) as pilot:
                await board_ready(app, pilot)
                watched = Watched(sup)
                await open_session(app, pilot, ids["sid"])
                for key in keys:
                    if not app.is_running:
                        break
                    await pilot.press(key)
                await pilot.pause()
                assert watched.calls == [], keys
                want = CoderState.CONTRACT_PROPOSED if gate == 1 else CoderState.NEEDS_APPROVAL
                assert sup.get(ids["sid"]).session.state is want, keys

    asyncio.run(run())


@pytest.mark.slow
@pytest.mark.parametrize("gate", [1, 2])
@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
def test_hidden_typing_never_confirms_approves_or_rejects(gate: int, size: tuple[int, int]) -> None:
    """Random key streams (letters, digits, space, enter, escape, tab,
    punctuation) typed on a gate's session screen, wherever they lead."""

    @settings(
        max_examples=10,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(keys=KEYS)
    def check(keys: list[str]) -> None:
        _typing_never_passes(gate, size, keys)

    check()
