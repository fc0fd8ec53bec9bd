"""TUI test helpers: a real Supervisor (real git, scripted drafter/engine)
seeded with sessions in several states, and snapshots stored in the
top-level snapshots/ directory."""

from __future__ import annotations

import asyncio
import itertools
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_textual_snapshot

from corral.supervisor.api import Supervisor
from corral.supervisor.config import SupervisorConfig
from corral.supervisor.engines.base import EngineOutcome, RunContext
from corral.supervisor.models import ContractCheck, OutcomeContract
from corral.supervisor.states import CoderState
from tests.fakes.scripted import (
    ScriptedDrafter,
    ScriptedEngine,
    ScriptedEngines,
    Step,
    Wait,
    Write,
)

SNAPSHOT_DIR = Path(__file__).resolve().parents[2] / "snapshots"
pytest_textual_snapshot.SVGImageExtension.dirname = classmethod(  # type: ignore[method-assign]
    lambda cls, *, test_location: str(SNAPSHOT_DIR / test_location.basename)
)

FIXED_NOW = 1_790_000_000.0


def make_repo(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    fixed = "2026-01-01T00:00:00+00:00"  # fixed dates: the same commit ids every run
    env = dict(os.environ, GIT_AUTHOR_DATE=fixed, GIT_COMMITTER_DATE=fixed)
    subprocess.run(
        "git init -q -b main && git -c user.name=t -c user.email=t@t commit -q --allow-empty "
        "-m init",
        shell=True,
        cwd=path,
        check=True,
        env=env,
    )
    return path


class CounterClock:
    """Deterministic time: each reading is one second after the previous."""

    def __init__(self, start: float = FIXED_NOW - 600) -> None:
        self._n = itertools.count()
        self.start = start

    def __call__(self) -> float:
        return self.start + next(self._n)


class IntentEngines:
    """Picks a script by a keyword in the intent (tests only)."""

    def __init__(self, scripts: dict[str, list[Step]]) -> None:
        self.scripts = scripts

    def resolve(self, requested: str) -> tuple[str, str]:
        return "scripted", "test engine"

    def create(self, label: str) -> IntentEngines:
        return self

    label = "scripted"

    async def run(self, ctx: RunContext) -> EngineOutcome:
        for key, script in self.scripts.items():
            if key in ctx.intent:
                return await ScriptedEngine([script]).run(ctx)
        return EngineOutcome(iterations=1)


def scripted_supervisor(
    state: Path, drafted: Any, writes: list[Step] | None = None, **kw: Any
) -> Supervisor:
    """A real supervisor whose drafter proposes `drafted` and whose engine
    takes `writes` as its one iteration (no repair rounds)."""
    return Supervisor(
        state,
        drafter=ScriptedDrafter([drafted]),
        engines=ScriptedEngines(ScriptedEngine([list(writes or [])])),
        config=SupervisorConfig(repair_invokes=0),
        **kw,
    )


async def start_to_approval(sup: Supervisor, intent: str, repo: Path) -> str:
    """Start `intent`, confirm its contract and wait for gate 2 (an on_ready seed)."""
    sid = (await sup.start(intent, repo)).session_id
    await sup.confirm(sid)
    await sup.wait_for(sid, {CoderState.NEEDS_APPROVAL}, timeout=20)
    return sid


async def open_from_board(app: Any, pilot: Any, key: str, settle: float = 0.5) -> Any:
    """Once the seed is done, press `key` on the board (toasts cleared) and
    give the screen it opens `settle` seconds to load; returns that screen."""
    await app.ready.wait()
    await pilot.pause(0.2)
    app.clear_notifications()
    await pilot.press(key)
    await pilot.pause(settle)
    return app.screen


def passing_file_contract(name: str) -> OutcomeContract:
    return OutcomeContract(
        description=f"{name}.txt exists",
        checks=[ContractCheck(name="file_" + name, command=f"test -f {name}.txt", timeout_secs=10)],
    )


async def _draft_for(request) -> OutcomeContract:  # type: ignore[no-untyped-def]
    word = request.intent.split()[0].lower()
    if word == "never":
        return OutcomeContract(
            description="impossible",
            checks=[ContractCheck(name="impossible", command="false", timeout_secs=5)],
        )
    return passing_file_contract(word)


@pytest.fixture
def board_world(tmp_path: Path) -> Callable[[], tuple[Supervisor, Path, asyncio.Event]]:
    """Returns a factory: (supervisor, repo, release) where `release` lets the
    running session finish."""

    def factory() -> tuple[Supervisor, Path, asyncio.Event]:
        repo = make_repo(tmp_path / "shop")
        release = asyncio.Event()
        engines = IntentEngines(
            {
                "Alpha": [Write("alpha.txt", "a\n")],
                "Bravo": [Wait(release), Write("bravo.txt", "b\n")],
                "Never": [Write("junk.txt", "x\n")],
                "Delta": [Write("delta.txt", "d\n")],
            }
        )
        config = SupervisorConfig(repair_invokes=0, disk_gc_interval_secs=3600)
        sup = Supervisor(
            tmp_path / "state",
            drafter=ScriptedDrafter([_draft_for]),
            engines=engines,
            config=config,
            clock=CounterClock(),
        )
        return sup, repo, release

    return factory


async def seed_board(sup: Supervisor, repo: Path) -> dict[str, str]:
    """Sessions in several states, seeded one after another (deterministic)."""
    ids: dict[str, str] = {}
    for intent in (
        "Delta ships the report",
        "Never passes",
        "Alpha adds a file",
        "Bravo waits for a signal",
        "Echo awaits its contract",
    ):
        ids[intent.split()[0]] = (await sup.start(intent, repo)).session_id
    for key, goal in (
        ("Delta", {CoderState.NEEDS_APPROVAL}),
        ("Never", {CoderState.FAILED}),
        ("Alpha", {CoderState.NEEDS_APPROVAL}),
    ):
        await sup.confirm(ids[key])
        await sup.wait_for(ids[key], goal, timeout=20)
    await sup.approve(ids["Delta"])
    await sup.confirm(ids["Bravo"])
    await sup.wait_for(ids["Bravo"], {CoderState.RUNNING}, timeout=5)
    return ids
