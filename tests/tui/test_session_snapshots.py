"""The session screen at gate 1 (contract with a red and a green baseline) and
at gate 2's finding variant (every check green, nothing changed)."""

from __future__ import annotations

from pathlib import Path

from supervisor.api import Supervisor
from supervisor.config import SupervisorConfig
from supervisor.scripted import ScriptedDrafter, ScriptedEngine, ScriptedEngines, contract
from supervisor.states import CoderState
from tui.app import CorralApp

from .conftest import FIXED_NOW, make_repo


def _app(tmp_path: Path, drafted, seed) -> CorralApp:  # type: ignore[no-untyped-def]
    repo = make_repo(tmp_path / "repo")
    sup = Supervisor(
        tmp_path / "state",
        drafter=ScriptedDrafter([drafted]),
        engines=ScriptedEngines(ScriptedEngine([[]])),
        config=SupervisorConfig(repair_invokes=0),
        clock=lambda: FIXED_NOW,
        id_factory=lambda: "0" * 23 + "1",
    )
    return CorralApp(
        sup, default_repo=repo, clock=lambda: FIXED_NOW, on_ready=lambda s: seed(s, repo)
    )


def test_contract_review_with_red_and_green_baseline(snap_compare, tmp_path: Path) -> None:
    drafted = contract(
        ("feature", "test -f feature.txt"),
        ("tests_still_pass", "true"),
        description="feature.txt exists; nothing else breaks",
    )

    async def seed(sup: Supervisor, repo: Path) -> None:
        await sup.start("Add the feature file", repo)

    app = _app(tmp_path, drafted, seed)

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        await app.ready.wait()
        await pilot.pause(0.2)
        app.clear_notifications()
        await pilot.press("enter")
        await pilot.pause(0.5)

    assert snap_compare(app, terminal_size=(130, 34), run_before=before)


def test_the_finding_variant_and_the_gates_nothing_warning(snap_compare, tmp_path: Path) -> None:
    drafted = contract(("already_true", "true"), description="nothing to prove")

    async def seed(sup: Supervisor, repo: Path) -> None:
        sid = (await sup.start("Make sure it works", repo)).session_id
        await sup.confirm(sid)
        await sup.wait_for(sid, {CoderState.NEEDS_APPROVAL}, timeout=20)

    app = _app(tmp_path, drafted, seed)

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        await app.ready.wait()
        await pilot.pause(0.2)
        app.clear_notifications()
        await pilot.press("enter")
        await pilot.pause(0.5)

    assert snap_compare(app, terminal_size=(130, 40), run_before=before)


async def test_the_event_log_filter(tmp_path: Path) -> None:
    from textual.widgets import RichLog

    drafted = contract(("already_true", "true"), description="nothing to prove")

    async def seed(sup: Supervisor, repo: Path) -> None:
        sid = (await sup.start("Make sure it works", repo)).session_id
        await sup.confirm(sid)
        await sup.wait_for(sid, {CoderState.NEEDS_APPROVAL}, timeout=20)

    app = _app(tmp_path, drafted, seed)
    async with app.run_test(size=(130, 40)) as pilot:
        await app.ready.wait()
        await pilot.pause(0.2)
        await pilot.press("enter")
        await pilot.pause(0.5)
        screen = app.screen
        log = screen.query_one("#log", RichLog)
        everything = len(log.lines)
        await pilot.press("l", "l")  # → agent → checks
        await pilot.pause(0.2)
        assert screen.log_filter == "checks"
        text = "\n".join(str(line.text) for line in log.lines)
        assert "PASS already_true" in text and "state created" not in text
        assert len(log.lines) < everything
