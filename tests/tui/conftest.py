"""TUI test helpers: a real Supervisor (real git, scripted drafter/engine)
seeded with sessions in several states, and snapshots stored in the
top-level snapshots/ directory."""

from __future__ import annotations

import asyncio
import itertools
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
import pytest_textual_snapshot
from textual.widgets import DataTable, Input, Markdown, Static
from textual.widgets._footer import FooterKey

from corral.supervisor.api import Supervisor, new_session_id
from corral.supervisor.config import SupervisorConfig
from corral.supervisor.engines.base import EngineOutcome, RunContext
from corral.supervisor.models import ContractCheck, OutcomeContract
from corral.supervisor.session.registry import SessionRegistry
from corral.supervisor.states import CoderState
from corral.tui.confirm import GO_KEY, ConfirmScreen
from corral.tui.screens.board import BoardScreen
from corral.tui.screens.diff import DiffScreen
from corral.tui.screens.discuss import DiscussScreen
from corral.tui.screens.help import HelpScreen
from corral.tui.screens.session import SessionScreen
from tests.fakes.scripted import (
    ScriptedDrafter,
    ScriptedEngine,
    ScriptedEngines,
    Step,
    Wait,
    Write,
)

T = TypeVar("T")

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


# git stats only from the verified diff: a frame never depends on a timer
SCRIPTED_CONFIG = SupervisorConfig(repair_invokes=0, git_stats_secs=3600, usage_secs=3600)


def scripted_supervisor(
    state: Path, drafted: Any, writes: list[Step] | None = None, **kw: Any
) -> Supervisor:
    """A real supervisor whose drafter proposes `drafted` and whose engine
    takes `writes` as its one iteration (no repair rounds)."""
    return Supervisor(
        state,
        drafter=ScriptedDrafter([drafted]),
        engines=ScriptedEngines(ScriptedEngine([list(writes or [])])),
        config=SCRIPTED_CONFIG,
        **kw,
    )


def scripted_owner(
    state: Path, drafted: Any, writes: list[Step] | None = None
) -> tuple[Supervisor, SessionRegistry]:
    """`scripted_supervisor`, with the session registry it runs on: for a
    test that sets up what an agent's hooks or records would say."""
    registry = SessionRegistry(state, config=SCRIPTED_CONFIG, clock=time.time, panes=None)
    return scripted_supervisor(state, drafted, writes, registry=registry), registry


async def start_to_approval(sup: Supervisor, intent: str, repo: Path) -> str:
    """Start `intent`, confirm its contract and wait for gate 2 (an on_ready seed)."""
    sid = (await sup.start(intent, repo)).session_id
    await sup.confirm(sid)
    await sup.wait_for(sid, {CoderState.NEEDS_APPROVAL}, timeout=20)
    return sid


# -- waiting for the frame to be final ------------------------------------------
#
# A test never waits a fixed time and hopes: it waits for a condition that
# implies what it asserts (or, for a snapshot, that the frame is final). Every
# wait is bounded and fails naming what it waited for.

WAIT_SECS = 30.0


async def until(pilot: Any, what: str, check: Callable[[], T], timeout: float = WAIT_SECS) -> T:
    """Let the app run until `check()` is truthy and return its value."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")
        await pilot.pause()  # until the screen has handled its messages and the CPU is idle


def board_of(app: Any) -> BoardScreen | None:
    return next((s for s in app.screen_stack if isinstance(s, BoardScreen)), None)


def board_in_sync(app: Any) -> bool:
    """The board shows what the supervisor has now: a row for every session,
    each drawn as the supervisor's newest summary would be (so every
    needs-you toast has been raised), in board order."""
    board = board_of(app)
    if board is None or not str(board.query_one("#counts", Static).render()):
        return False  # its watcher has not delivered the first snapshot yet
    rows = app.supervisor.list()
    if set(board.summaries) != {r.session_id for r in rows}:
        return False
    same = all(board._cells(board.summaries[r.session_id]) == board._cells(r) for r in rows)
    announced = board._announce_timer is None  # gathered needs-you toasts are out
    return same and announced and board.order == [r.session_id for r in board.shown_rows()]


async def board_ready(app: Any, pilot: Any) -> BoardScreen:
    """The seed (`on_ready`) is done and the board shows its outcome."""
    await app.ready.wait()
    await until(pilot, "the board to show the supervisor's sessions", lambda: board_in_sync(app))
    await pilot.pause()  # its toasts are messages to the app: handled before anyone looks
    board = board_of(app)
    assert board is not None
    return board


def caught_up(screen: Any) -> bool:
    """The screen shows everything there is to show now (see each case)."""
    if isinstance(screen, SessionScreen):
        # every event of the session was handled (logged, and the view refreshed)
        sup, sid = screen.app.supervisor, screen.session_id
        return not sup.is_live(sid) or len(screen.events) == len(sup.replay(sid))
    if isinstance(screen, DiffScreen):
        files = screen.query_one("#diff-files", DataTable)
        return bool(screen.files) and files.row_count == len(screen.files)
    if isinstance(screen, DiscussScreen):
        return screen.discussion is not None
    if isinstance(screen, HelpScreen):
        markdown = screen.query_one(Markdown)
        return bool(markdown.children) and not markdown.lock.is_locked
    return True


async def open_from_board(app: Any, pilot: Any, key: str) -> Any:
    """Once the seed is done and on the board, press `key` there (toasts
    cleared) and wait until the screen it opens has caught up; returns it."""
    board = await board_ready(app, pilot)
    app.clear_notifications()
    await pilot.press(key)
    return await until(
        pilot,
        f"the screen {key!r} opens to catch up",
        lambda: app.screen if app.screen is not board and caught_up(app.screen) else None,
    )


async def asked(pilot: Any, then: str | None = GO_KEY) -> ConfirmScreen:
    """Something that cannot be undone asks once: wait for the confirm
    modal and press `then` (None: leave it open); returns the modal."""
    modal = await until(
        pilot,
        "the confirm question",
        lambda: pilot.app.screen if isinstance(pilot.app.screen, ConfirmScreen) else None,
    )
    if then is not None:
        await pilot.press(then)
        await until(pilot, "the confirm question to close", lambda: pilot.app.screen is not modal)
    return modal


def footer_actions(app: Any) -> set[str]:
    """The actions whose keys the footer shows now."""
    return {key.action for key in app.screen.query(FooterKey)}


def steady_cursors(app: Any) -> None:
    """A focused input's cursor blinks every half second: a snapshot would
    depend on when it was taken. Stop the blinking (the cursor stays shown)."""
    for screen in app.screen_stack:
        for field in screen.query(Input):
            field.cursor_blink = False


async def final_frame(pilot: Any, what: str, check: Callable[[], object] = lambda: True) -> None:
    """For a snapshot: wait until `check()` says the frame is final, with
    the cursors steady (snap_compare then lets the last repaint land)."""
    await until(pilot, what, check)
    steady_cursors(pilot.app)


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


@pytest.fixture(autouse=True)
def agents_confined(monkeypatch: pytest.MonkeyPatch) -> None:
    """The console reads how agents run once it is up (bubblewrap here or
    not, the operator's config): every screen test sees agents confined, so
    snapshots do not depend on the machine; test_board_header changes it."""
    from corral.supervisor import doctor

    status = doctor.ConfinementStatus(True, "bubblewrap (test)", "confined, network by allow-list")
    monkeypatch.setattr(doctor, "confinement_status", lambda: status)


@pytest.fixture
def board_world(tmp_path: Path) -> Callable[..., tuple[Supervisor, Path, asyncio.Event]]:
    """Returns a factory: (supervisor, repo, release) where `release` lets the
    running session finish; `id_factory` names its sessions."""

    def factory(
        id_factory: Callable[[], str] = new_session_id,
        budget: dict[str, float] | None = None,
        registries: list[SessionRegistry] | None = None,
    ) -> tuple[Supervisor, Path, asyncio.Event]:
        """`registries`: the session registry it runs on is appended there,
        for a test that sets up what an agent's records would say."""
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
        # git stats are read once, before the board is seeded: no row gains its
        # stats column part-way through a snapshot (they have their own tests)
        config = SupervisorConfig.model_validate(
            {
                "repair_invokes": 0,
                "disk_gc_interval_secs": 3600,
                "git_stats_secs": 3600,
                "usage_secs": 3600,
                "budget": budget or {},
            }
        )
        clock = CounterClock()
        registry = SessionRegistry(tmp_path / "state", config=config, clock=clock, panes=None)
        if registries is not None:
            registries.append(registry)
        sup = Supervisor(
            tmp_path / "state",
            drafter=ScriptedDrafter([_draft_for]),
            engines=engines,
            config=config,
            clock=clock,
            id_factory=id_factory,
            registry=registry,
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
