"""Nothing an agent starts outlives it: a hostile agent in a real tmux pane
leaves a `setsid` loop, a double-forked sleeper and a `nohup` child behind,
then exits (or its pane is killed). Confined (bubblewrap, its own PID
namespace) and unconfined (under the pane keeper, a child subreaper), all
three are gone once the agent is; the pane's exit status is still the
agent's own, and while it runs the pane's root process is an ancestor of
every process it started."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from corral.supervisor.governance.env_scrub import scrubbed_env
from corral.supervisor.panes.base import PaneHandle, PaneInfo, PaneSpec
from corral.supervisor.panes.tmux import TmuxBackend
from corral.supervisor.sandbox import SandboxPolicy, sandbox_status
from corral.supervisor.sandbox.agent import launch_agent
from tests.conftest import init_repo
from tests.fakes.procs import running_with_arg

STATUS = sandbox_status()
pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
needs_bwrap = pytest.mark.skipif(
    not STATUS.available, reason=f"no sandbox can run here: {STATUS.detail}"
)

# Three ways out of a pane's process tree, then wait for Enter and exit 3.
AGENT = """#!/bin/bash
setsid sh -c 'while :; do sleep {m}1; done' &
nohup sh -c 'while :; do sleep {m}2; done' >/dev/null 2>&1 &
( ( sh -c 'while :; do sleep {m}3; done' & ) & )
echo LEFT-BEHIND
IFS= read -r line
exit 3
"""


def until(what: str, test: Callable[[], object], timeout: float = 10.0) -> object:
    deadline = time.monotonic() + timeout
    while True:
        value = test()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


@pytest.fixture
def base() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="corral-left-", dir="/var/tmp")).resolve()
    try:
        yield path
    finally:
        for sock in (path / "tmux").glob("*"):
            os.system(f"tmux -S {sock} kill-server 2>/dev/null")
        shutil.rmtree(path, ignore_errors=True)


def ancestors(pid: int) -> list[int]:
    out: list[int] = []
    while pid > 1:
        try:
            raw = Path(f"/proc/{pid}/stat").read_bytes()
        except OSError:
            break
        pid = int(raw[raw.rfind(b")") + 2 :].split()[1])
        out.append(pid)
    return out


def start(base: Path, confined: bool) -> tuple[TmuxBackend, PaneHandle, str, bool]:
    marker = f"9.{time.time_ns() % 10**8:08d}"
    script = base / f"agent-{marker}.sh"
    script.write_text(AGENT.format(m=marker))
    script.chmod(0o755)
    worktree = init_repo(base / f"wt-{marker}")
    env = scrubbed_env({"PATH": os.environ["PATH"], "HOME": str(base / "home"), "TERM": "xterm"})
    launch = launch_agent(
        [str(script)],
        worktree,
        env,
        policy=SandboxPolicy(agents=confined, state_dir=base / "state"),
        choice=None,
        own_dirs=[],
        own_files=[],
        hooks_file=base / "state" / "hooks" / "hooks.jsonl",
        python=sys.executable,
    )
    assert launch.confined is confined, launch.account
    backend = TmuxBackend(socket_dir=base / "tmux")
    spec = PaneSpec(marker, 1, "agent", worktree, launch.argv, launch.env, 80, 20)
    return backend, backend.spawn(spec), marker, launch.confined


def pane(backend: TmuxBackend, handle: PaneHandle) -> PaneInfo | None:
    return backend.sweep().get(handle.owner)


def left(marker: str) -> list[int]:
    return [p for n in "123" for p in running_with_arg(f"{marker}{n}")]


@pytest.mark.parametrize(
    "confined", [pytest.param(True, marks=needs_bwrap), False], ids=["bwrap", "keeper"]
)
def test_what_an_agent_leaves_behind_ends_when_it_exits(base: Path, confined: bool) -> None:
    backend, handle, marker, _ = start(base, confined)
    until("the three leftovers", lambda: len(left(marker)) == 3)
    root = handle.pid
    assert root is not None
    for pid in left(marker):  # every one of them is under the pane's root process
        assert root in ancestors(pid), (pid, ancestors(pid))
    if not confined:  # the keeper hands the terminal to the agent
        info = pane(backend, handle)
        assert info is not None and info.current_command == "bash"
    backend.send_keys(handle, ["Enter"])
    info = until("the agent's exit", lambda: (i := pane(backend, handle)) and not i.alive and i)
    assert isinstance(info, PaneInfo) and info.exit_status == 3  # the agent's own status
    until("nothing left behind", lambda: not left(marker), timeout=5)


@pytest.mark.parametrize(
    "confined", [pytest.param(True, marks=needs_bwrap), False], ids=["bwrap", "keeper"]
)
def test_what_an_agent_leaves_behind_ends_when_its_pane_is_killed(
    base: Path, confined: bool
) -> None:
    backend, handle, marker, _ = start(base, confined)
    until("the three leftovers", lambda: len(left(marker)) == 3)
    backend.kill(handle, timeout=3)
    until("nothing left behind", lambda: not left(marker), timeout=5)
