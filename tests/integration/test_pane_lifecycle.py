"""An agent pane's lifecycle follows its session, in real tmux panes on a
private socket with the demo agent: a session that can continue keeps its
agent across a close (said, and re-adopted, whatever the agent profile), a
finished one has its agent stopped whoever started it."""

from __future__ import annotations

import asyncio
import os
import shutil
import threading
import time
from pathlib import Path

import pytest

from corral.supervisor.agents.profiles import profile_for
from corral.supervisor.demo import demo_contract, make_demo_repo
from corral.supervisor.panes.base import PaneHandle, PaneSpec
from corral.supervisor.panes.manager import PaneManager
from corral.supervisor.panes.tmux import TmuxBackend
from corral.supervisor.states import CoderState as S
from corral.supervisor.store import Store
from tests.conftest import eventually, plan_texts
from tests.integration.test_external_engine import SLUG, kill_tmux, open_supervisor

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


@pytest.fixture
def demo_repo(tmp_path: Path) -> Path:
    return make_demo_repo(tmp_path)


@pytest.fixture
def cleanup_tmux(tmp_path: Path):  # type: ignore[no-untyped-def]
    yield
    kill_tmux(tmp_path)


def process_ends(pid: int, timeout: float = 5.0) -> bool:
    """The process is gone or a zombie (dead, waiting for tmux to reap it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except (FileNotFoundError, ProcessLookupError):  # gone, or going as it is read
            return True
        if stat.rpartition(")")[2].split()[0] == "Z":
            return True
        time.sleep(0.05)
    return False


def owners(tmp_path: Path) -> dict[str, bool]:
    backend = TmuxBackend(socket_dir=tmp_path / "tmux")
    return {owner: info.alive for owner, info in backend.sweep().items()}


def sleeping_spec(tmp_path: Path, name: str, *, incarnation: int = 1) -> PaneSpec:
    """A pane that only sleeps, for a session nothing else knows."""
    return PaneSpec(
        session_id="0123456789abcdef01234567",
        incarnation=incarnation,
        name=name,
        cwd=tmp_path,
        argv=["sleep", "60"],
        env={"PATH": os.environ["PATH"]},
    )


def edit_stored(tmp_path: Path, sid: str, **changes: object) -> None:
    store = Store(tmp_path / "state")
    try:
        sessions, _ = store.list_sessions()
        session = next(s for s in sessions if s.id == sid)
        for key, value in changes.items():
            setattr(session, key, value)
        store.save_session(session)
    finally:
        store.close()


async def to_review(tmp_path: Path, demo_repo: Path):  # type: ignore[no-untyped-def]
    sup = await open_supervisor(tmp_path, demo_contract(SLUG))
    sid = (await sup.start(SLUG, demo_repo)).session_id
    await sup.confirm(sid)
    row = await sup.wait_for(sid, needs=True, timeout=30)
    assert row.needs_you == "question"
    await sup.respond(sid, "1")
    row = await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=30)
    assert row.state is S.NEEDS_APPROVAL, row.error
    return sup, sid


@pytest.mark.slow
async def test_an_agent_at_a_gate_is_left_running_said_readopted_and_stopped_on_delivery(
    tmp_path: Path, demo_repo: Path, cleanup_tmux: None
) -> None:
    first, sid = await to_review(tmp_path, demo_repo)
    owner = first.get(sid).session.pane["owner"]  # type: ignore[index]
    await first.close()
    assert owners(tmp_path) == {owner: True}

    second = await open_supervisor(tmp_path, demo_contract(SLUG))
    try:
        assert second.agent_pane(sid) is not None  # re-adopted
        result = await second.approve(sid, delivery="branch")
        assert result.state is S.MERGED, result
    finally:
        await second.close()
    assert owners(tmp_path) == {}  # stopped before close returned: process and window
    assert first.left_running == [sid]  # said, so the caller can tell the operator
    assert second.left_running == []


@pytest.mark.slow
async def test_a_finished_sessions_agent_is_stopped_by_the_next_owner(
    tmp_path: Path, demo_repo: Path, cleanup_tmux: None
) -> None:
    first, sid = await to_review(tmp_path, demo_repo)
    pid = first.agent_pane(sid).pid  # type: ignore[union-attr]
    await first.close()
    edit_stored(tmp_path, sid, state=S.ABANDONED)  # e.g. the old owner died mid-stop
    second = await open_supervisor(tmp_path, demo_contract(SLUG))
    try:
        assert owners(tmp_path) == {}
        assert process_ends(pid), f"the agent (pid {pid}) still runs"
        assert second.stray_panes == []
    finally:
        await second.close()


async def test_a_custom_agent_is_readopted_after_a_restart(
    tmp_path: Path, demo_repo: Path, cleanup_tmux: None
) -> None:
    first = await open_supervisor(tmp_path, demo_contract(SLUG))
    sid = (await first.start(SLUG, demo_repo)).session_id
    await first.confirm(sid)
    await first.wait_for(sid, needs=True, timeout=30)
    pane = dict(first.get(sid).session.pane or {})
    await first.close()
    # as a `custom:` session stores itself: the profile is "custom", the
    # command line lives in the engine
    command = "python3 -c 'import time; time.sleep(300)'"
    edit_stored(
        tmp_path, sid, engine=f"external:custom:{command}", pane={**pane, "agent": "custom"}
    )

    second = await open_supervisor(tmp_path, demo_contract(SLUG))
    try:
        row = second.get(sid).session
        assert row.state is S.RUNNING, row.error
        assert second.is_live(sid) and second.agent_pane(sid) is not None
        assert any("re-adopted" in t for t in plan_texts(second, sid))
        await second.cancel(sid)
        await second.wait_for(sid, {S.ABANDONED, S.FAILED}, timeout=30)
    finally:
        await second.close()
    assert owners(tmp_path) == {}
    assert first.left_running == [sid]


async def test_stop_agent_finds_a_pane_nobody_tracks_by_its_owner_marker(
    tmp_path: Path, cleanup_tmux: None
) -> None:
    """A stray (no session) is left alone at open; `stop_agent` finds a pane
    by its stored owner marker when nothing tracks it."""
    backend = TmuxBackend(socket_dir=tmp_path / "tmux")
    spec = sleeping_spec(tmp_path, "leftover", incarnation=7)
    backend.spawn(spec)
    sup = await open_supervisor(tmp_path, demo_contract(SLUG))
    try:
        assert sup.stray_panes == [spec.owner]
        # a pane manager of its own: nothing tracks the stray there either
        panes = PaneManager(backend, tmp_path / "state" / "agents")
        stopped = await panes.stop_agent(spec.session_id, {"owner": spec.owner})
        assert stopped and owners(tmp_path) == {}
    finally:
        await sup.close()


def test_the_console_says_which_agents_it_left_running(capsys: pytest.CaptureFixture[str]) -> None:
    from types import SimpleNamespace

    from corral.tui.cli.console import say_left_running

    say_left_running(SimpleNamespace(left_running=[]))  # type: ignore[arg-type]
    assert capsys.readouterr().err == ""
    say_left_running(SimpleNamespace(left_running=["6b0f37ab78019e15e5204130"]))  # type: ignore[arg-type]
    err = capsys.readouterr().err
    assert "left 1 agent(s) running (corral-e5204130)" in err and "corral panes stop" in err


@pytest.mark.slow
async def test_a_pane_stopped_with_corral_panes_stop_is_not_started_again(
    tmp_path: Path, demo_repo: Path, cleanup_tmux: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`corral panes stop` on a running session's agent is meant: no transient
    retry starts it again behind the operator's back (that left an agent
    running after the console closed); the session fails saying why, and its
    worktree stays for `R`."""
    from corral.supervisor.pane_cleanup import stop_panes

    monkeypatch.setenv("CORRAL_TMUX_SOCKET_DIR", str(tmp_path / "tmux"))
    sup = await open_supervisor(tmp_path, demo_contract(SLUG))
    try:
        sid = (await sup.start(SLUG, demo_repo)).session_id
        await sup.confirm(sid)
        await sup.wait_for(sid, needs=True, timeout=30)
        stopped = stop_panes(tmp_path / "state", [sid])
        assert [s.gone for s in stopped] == [True]
        row = await sup.wait_for(sid, {S.FAILED}, timeout=30)
        assert "stopped with `corral panes stop`" in (row.error or "")
        assert row.worktree and Path(row.worktree).is_dir()
        assert owners(tmp_path) == {}  # nothing started again
        assert not any("transient retry" in t for t in plan_texts(sup, sid))
    finally:
        await sup.close()


class SpawnHeldBackend:
    """The real tmux backend, its `spawn` held until released: a start the
    operator cancels while tmux is still making the pane."""

    def __init__(self, real: TmuxBackend) -> None:
        self.real = real
        self.entered = threading.Event()
        self.release = threading.Event()
        self.made: list[PaneHandle] = []

    def __getattr__(self, name: str) -> object:
        return getattr(self.real, name)

    def spawn(self, spec: PaneSpec) -> PaneHandle:
        self.entered.set()
        self.release.wait(30)
        handle = self.real.spawn(spec)
        self.made.append(handle)
        return handle


async def test_a_pane_made_after_its_start_was_cancelled_is_stopped(
    tmp_path: Path, cleanup_tmux: None
) -> None:
    """Cancelling a start cannot stop tmux mid-command: the pane it makes
    after all is tracked by nothing, so it is stopped once made (no agent
    left running for a session that was cancelled)."""
    backend = SpawnHeldBackend(TmuxBackend(socket_dir=tmp_path / "tmux"))
    panes = PaneManager(backend, tmp_path / "state" / "agents")  # type: ignore[arg-type]
    spec = sleeping_spec(tmp_path, "cancelled")
    start = asyncio.ensure_future(panes.spawn(spec, profile_for("demo")))
    assert await asyncio.to_thread(backend.entered.wait, 10)
    start.cancel()
    with pytest.raises(asyncio.CancelledError):
        await start
    backend.release.set()
    await eventually(lambda: backend.made, timeout=10)
    pid = backend.made[0].pid
    assert pid is not None
    await eventually(lambda: owners(tmp_path).get(spec.owner) is not True, timeout=10)
    await eventually(lambda: not os.path.exists(f"/proc/{pid}"), timeout=10)
    assert panes.record(spec.session_id) is None
