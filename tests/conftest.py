"""Shared fixtures: a real git repository, a private state dir per test, and a
factory for opened `Supervisor`s wired to scripted drafters and engines.

Nothing here mocks the supervisor: sessions get real worktrees, contract
checks run as real shell commands and delivery creates real branches.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from corral.supervisor.api import Supervisor
from corral.supervisor.config import SupervisorConfig
from corral.supervisor.contracts.drafting import ContractDrafter
from corral.supervisor.events import CoderEvent
from corral.supervisor.git.leases import Lease, LeaseBook
from corral.supervisor.models import (
    CoderSession,
    EventKind,
    OutcomeContract,
    SessionSummary,
    TaskRun,
)
from corral.supervisor.sandbox import SandboxPolicy, active_policy, set_active_policy
from corral.supervisor.states import CoderState
from corral.supervisor.store import DB_NAME, Store
from tests.fakes.scripted import (
    ScriptedDrafter,
    ScriptedEngine,
    ScriptedEngines,
    Write,
    contract,
)

# A contract whose only check fails on the untouched tree and passes once the
# engine writes `hello.txt` containing "hi".
HELLO_CHECK = ("hello", "grep -q hi hello.txt")


def hello_contract() -> OutcomeContract:
    return contract(HELLO_CHECK, description="hello.txt says hi")


def git(cwd: Path | str, *args: str, check: bool = True) -> str:
    """Run git for a test (not through corral's hardened wrapper)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        GIT_CONFIG_NOSYSTEM="1",
        GIT_AUTHOR_NAME="Test",
        GIT_AUTHOR_EMAIL="test@example.com",
        GIT_COMMITTER_NAME="Test",
        GIT_COMMITTER_EMAIL="test@example.com",
    )
    proc = subprocess.run(
        ["git", *args], cwd=str(cwd), env=env, capture_output=True, text=True, check=False
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {proc.stderr.strip()}")
    return proc.stdout


def commit_files(repo: Path, files: dict[str, str], message: str = "project") -> Path:
    """Write `files` (path → text) into `repo` and commit them all."""
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return repo


def init_repo(path: Path) -> Path:
    """`git init -b main`, `core.autocrlf=false`, one empty commit."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "core.autocrlf", "false")
    git(path, "commit", "-q", "--allow-empty", "-m", "init")
    return path


class FastSuiteWatch:
    """Names the tests outside `slow` that took longer than FAST_TEST_SECS:
    the fast suite (`-m 'not slow'`) stays within its 3 minutes only if heavy
    tests are marked so as they are written."""

    FAST_TEST_SECS = 5.0

    def __init__(self) -> None:
        self.spent: dict[str, float] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if "slow" not in report.keywords:
            self.spent[report.nodeid] = self.spent.get(report.nodeid, 0.0) + report.duration

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        heavy = sorted(
            ((secs, nodeid) for nodeid, secs in self.spent.items() if secs > self.FAST_TEST_SECS),
            reverse=True,
        )
        if heavy:
            terminalreporter.write_sep("-", f"over {self.FAST_TEST_SECS:.0f} s, not marked slow")
            for secs, nodeid in heavy:
                terminalreporter.write_line(f"{secs:6.1f} s  {nodeid}")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Temp dirs get a short root of their own per run. Tests bind tmux and
    control sockets inside tmp_path, and a Unix socket path longer than 107
    bytes cannot be bound: pytest's default root (/tmp/pytest-of-USER/pytest-N,
    plus popen-gwN per parallel worker) leaves too little room. One root per
    run, so runs side by side never share or delete each other's dirs."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        config.pluginmanager.register(FastSuiteWatch(), "corral-fast-suite-watch")
    if getattr(config.option, "dist", None) == "loadgroup":
        # lanes in the order the workers' collection puts them: longest first
        # (pytest_collection_modifyitems), not by xdist's test count
        config.option.loadscopereorder = False
    if config.option.basetemp or os.environ.get("PYTEST_XDIST_WORKER"):
        return  # chosen on the command line, or a worker under its controller's root
    parent = "/tmp" if os.access("/tmp", os.W_OK) else tempfile.gettempdir()
    for old in Path(parent).glob("ct-*"):  # a failed run's, kept a day to be looked at
        with contextlib.suppress(OSError):
            if old.is_dir() and time.time() - old.stat().st_mtime > 86400:
                shutil.rmtree(old, ignore_errors=True)
    config.option.basetemp = tempfile.mkdtemp(prefix="ct-", dir=parent)
    config.stash[_OWN_BASETEMP] = config.option.basetemp


_OWN_BASETEMP = pytest.StashKey[str]()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A run that passed leaves no temp dirs behind; a failed one keeps them to
    be looked at (for a day: the next run after that removes them)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    root = session.config.stash.get(_OWN_BASETEMP, None)
    if root and exitstatus == 0:
        shutil.rmtree(root, ignore_errors=True)


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(
    config: pytest.Config, items: list[pytest.Item]
) -> Iterator[None]:
    """Parallel workers (`--dist loadgroup`) take work in lanes: files that
    declare a shared lane (the real agent CLIs: tests/e2e/support.AGENT_CLIS)
    run on one worker; a file's fast tests, and its slow ones that share a
    fixture built once per module (an sshd, the corpus run), run together on
    one worker so it is built once; every other slow test is a lane of its
    own, so a file of twenty 20 s tests is not one worker's 7-minute chain.
    Lanes are handed out longest first (see `lane_cost`): a long lane that
    starts last is the whole run's tail."""
    for item in items:
        if item.get_closest_marker("xdist_group") is None and not _runs_alone(item):
            lane = item.path.relative_to(config.rootpath).as_posix()
            item.add_marker(pytest.mark.xdist_group(lane))
    yield  # the other hooks: deselection (-m, -k) among them
    if os.environ.get("PYTEST_XDIST_WORKER"):
        order_longest_lanes_first(items)


def _runs_alone(item: pytest.Item) -> bool:
    """A slow test whose fixtures are all built per test (or per worker
    session) can run on any worker, apart from the rest of its file."""
    if item.get_closest_marker("slow") is None:
        return False
    info = getattr(item, "_fixtureinfo", None)
    if info is None:  # no fixture information: keep it with its file
        return False
    return all(defs[-1].scope in ("function", "session") for defs in info.name2fixturedefs.values())


# A rough cost per test for ordering lanes (not a budget): slow tests take
# ~3-40 s, fast ones well under 1 s.
SLOW_TEST_COST = 10.0
FAST_TEST_COST = 0.05


def lane_of(item: pytest.Item) -> str:
    """The lane `--dist loadgroup` schedules the item in: its xdist_group,
    or the test alone."""
    marker = item.get_closest_marker("xdist_group")
    if marker is not None:
        return str(marker.args[0] if marker.args else marker.kwargs.get("name", "default"))
    return item.nodeid


def lane_cost(items: list[pytest.Item]) -> dict[str, float]:
    cost: dict[str, float] = {}
    for item in items:
        each = SLOW_TEST_COST if item.get_closest_marker("slow") else FAST_TEST_COST
        cost[lane_of(item)] = cost.get(lane_of(item), 0.0) + each
    return cost


def order_longest_lanes_first(items: list[pytest.Item]) -> None:
    """Reorder the collection so lanes come longest first (a test's place
    inside its lane is kept). xdist hands lanes out in collection order when
    its own reorder (by test count, which ranks 150 millisecond unit tests
    above twenty 20 s integration tests) is off: `pytest_configure` turns it
    off. Every worker computes the same order from the same collection."""
    cost = lane_cost(items)
    first_seen: dict[str, int] = {}
    for index, item in enumerate(items):
        first_seen.setdefault(lane_of(item), index)
    items.sort(key=lambda item: (-cost[lane_of(item)], first_seen[lane_of(item)]))


@pytest.fixture(autouse=True)
def default_sandbox_policy(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Each test starts with the default sandbox policy (a Supervisor sets the
    process's policy from its config and state dir), and a sandbox probe that
    failed in an earlier test (one that hid bwrap from PATH) is not
    remembered into this one: its checks would run unconfined."""
    from corral.supervisor.sandbox import status as sandbox_status_module

    monkeypatch.setattr(sandbox_status_module, "_refused", None)
    set_active_policy(SandboxPolicy())
    yield
    set_active_policy(SandboxPolicy())


@pytest.fixture
def interpreter_visible() -> Iterator[None]:
    """Checks get a private /tmp: a venv under /tmp (a CI clone) runs
    unconfined. For tests whose checks run this interpreter (`pytestmark =
    pytest.mark.usefixtures("interpreter_visible")`)."""
    before = active_policy()
    if Path(sys.executable).absolute().is_relative_to("/tmp"):
        set_active_policy(SandboxPolicy(enabled=False))
    try:
        yield
    finally:
        set_active_policy(before)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return init_repo(tmp_path / "repo")


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    return tmp_path / "state"


def fast_config(**overrides: Any) -> SupervisorConfig:
    """Defaults tuned for fast tests; any field can be overridden."""
    base: dict[str, Any] = {
        "repair_invokes": 1,
        "max_session_wall_secs": 60,
        "ask_user_timeout_secs": 10,
        "watcher_shed_secs": 10,
        "git_stats_secs": 3600,  # a test that reads live git stats asks for them
        "usage_secs": 3600,  # and one that reads agents' usage records, for them
    }
    base.update(overrides)
    return SupervisorConfig.model_validate(base)


class Clock:
    """A settable wall clock for retention tests."""

    def __init__(self, now: float | None = None) -> None:
        self.now = time.time() if now is None else now

    def __call__(self) -> float:
        return self.now

    def advance(self, secs: float) -> None:
        self.now += secs


SupervisorFactory = Callable[..., Awaitable[Supervisor]]


@pytest.fixture
async def make_supervisor(state_dir: Path) -> AsyncIterator[SupervisorFactory]:
    """`await make_supervisor(drafter=..., engine=..., config=..., **config_fields)`.

    Returns an opened `Supervisor` (closed at teardown). By default the
    drafter serves `hello_contract()` and the engine writes `hello.txt`.
    """
    made: list[Supervisor] = []

    async def factory(
        drafter: ContractDrafter | None = None,
        engine: ScriptedEngine | None = None,
        *,
        state: Path | None = None,
        config: SupervisorConfig | None = None,
        clock: Callable[[], float] | None = None,
        **config_fields: Any,
    ) -> Supervisor:
        sup = Supervisor(
            state or state_dir,
            drafter=drafter or ScriptedDrafter([hello_contract()]),
            engines=ScriptedEngines(engine or ScriptedEngine([[Write("hello.txt", "hi\n")]])),
            config=config or fast_config(**config_fields),
            clock=clock or time.time,
        )
        await sup.open()
        made.append(sup)
        return sup

    yield factory
    for sup in reversed(made):
        await sup.close()


# --- helpers ------------------------------------------------------------------


def events_of(sup: Supervisor, session_id: str) -> list[CoderEvent]:
    """The live replay buffer of a session."""
    return sup.replay(session_id)


def plan_texts(sup: Supervisor, session_id: str) -> list[str]:
    """The narration (`plan_text`) in a session's live replay buffer."""
    return [e.data.text for e in events_of(sup, session_id) if e.kind is EventKind.PLAN_TEXT]


@contextlib.contextmanager
def own_store(state_dir: Path, *, readonly: bool = True) -> Iterator[Store]:
    """The state dir's database through a connection of the test's own
    (read-only unless asked), beside the owner's: what is on disk, not what
    the owner holds in memory."""
    store = Store(state_dir, readonly=readonly)
    try:
        yield store
    finally:
        store.close()


def stored_session(state_dir: Path, session_id: str) -> CoderSession | None:
    """The session as its last save left it on disk."""
    with own_store(state_dir) as store:
        return store.load_session(session_id)


def stored_task_runs(state_dir: Path, task_id: str) -> list[TaskRun]:
    with own_store(state_dir) as store:
        return store.task_runs(task_id)


def lease_of(state_dir: Path, worktree: str | None) -> Lease | None:
    """The stored lease of a worktree, read from the state dir's database
    (read-only, beside a running owner)."""
    conn = sqlite3.connect(f"file:{state_dir / DB_NAME}?mode=ro", uri=True)
    try:
        return LeaseBook(conn, readonly=True).get(str(Path(worktree or "").resolve()))
    finally:
        conn.close()


def row_of(sup: Supervisor, sid: str) -> SessionSummary:
    return next(r for r in sup.list() if r.session_id == sid)


async def proposed(sup: Supervisor, repo: Path, intent: str = "say hi") -> str:
    """Start a session and return its id once its contract is proposed."""
    result = await sup.start(intent, repo)
    assert result.state is CoderState.CONTRACT_PROPOSED
    return result.session_id


async def run_to_gate(sup: Supervisor, sid: str) -> SessionSummary:
    """Confirm, then wait until the session needs the operator (or ended)."""
    assert await sup.confirm(sid) == {"state": "running"}
    return await sup.wait_for(sid, needs=True, timeout=10)


def kinds_of(sup: Supervisor, session_id: str) -> list[EventKind]:
    return [e.kind for e in events_of(sup, session_id)]


async def eventually(
    predicate: Callable[[], Any], *, timeout: float = 5.0, interval: float = 0.01
) -> Any:
    """Poll until `predicate()` is truthy (the event drain is asynchronous)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        await asyncio.sleep(interval)
