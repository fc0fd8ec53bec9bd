"""A turn loop waiting on its agent's pane wakes when what it decides on
changes (the status, its question, liveness), not on every screen the sweep
captures: with 100 agents streaming, waking every session's turn loop per
capture was ~200 wake-ups a second in the console's own process. Real tmux
panes on a private socket, the real PaneManager and trackers."""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from pathlib import Path

import pytest

from corral.supervisor.agents.profiles import DEMO
from corral.supervisor.panes.base import PaneSpec
from corral.supervisor.panes.manager import PaneManager
from corral.supervisor.panes.tmux import TmuxBackend
from corral.supervisor.status import AgentStatus

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

# Busy for as long as `go` is absent (a line every 50 ms under the demo
# agent's busy marker), then its idle prompt.
STREAMING_THEN_IDLE = r"""i=0
while [ ! -e go ]; do
  i=$((i+1))
  printf 'narration line %s: reading, editing\n✻ Working… (esc to interrupt)\n' "$i"
  read -rt 0.05 _
done
clear
printf 'done.\n> '
exec sleep 60
"""


async def until(predicate, timeout: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


async def test_a_streaming_screen_does_not_wake_the_turn_loop_a_status_change_does(
    tmp_path: Path,
) -> None:
    script = tmp_path / "agent.sh"
    script.write_text(STREAMING_THEN_IDLE)
    backend = TmuxBackend(socket_dir=tmp_path / "tmux")
    panes = PaneManager(backend, tmp_path / "hooks", interval=0.1)
    spec = PaneSpec(
        "0123456789abcdef01234567",
        1,
        "wakeups",
        tmp_path,
        ["bash", str(script)],
        {"PATH": os.environ["PATH"]},
        width=80,
        height=20,
    )
    try:
        await panes.start()
        record = await panes.spawn(spec, DEMO)
        await until(lambda: record.status.status is AgentStatus.RUNNING)
        # the loop's wait: from the status it has seen, with a long safety timeout
        seen = record.status_version
        screens_before = record.version
        wakes: list[float] = []

        async def turn_loop() -> None:
            version = seen
            while True:
                version = await panes.wait_change(spec.session_id, version, 30.0)
                wakes.append(time.monotonic())

        waiting = asyncio.create_task(turn_loop())
        await asyncio.sleep(1.5)
        screens = record.version - screens_before
        assert screens >= 4, f"the pane should have streamed into the sweep: {screens} screens"
        assert record.status.status is AgentStatus.RUNNING
        assert wakes == [], (
            f"{len(wakes)} wake-ups for {screens} streamed screens and no status change"
        )
        # the agent turns idle: the loop hears of it, without waiting for its timeout
        (tmp_path / "go").touch()
        await until(lambda: record.status.status is AgentStatus.IDLE)
        await until(lambda: bool(wakes), timeout=2.0)
        waiting.cancel()
    finally:
        await panes.stop()
        backend.kill_server()


async def test_a_waiter_on_a_killed_or_replaced_pane_wakes_at_once(tmp_path: Path) -> None:
    backend = TmuxBackend(socket_dir=tmp_path / "tmux")
    panes = PaneManager(backend, tmp_path / "hooks", interval=0.1)
    spec = PaneSpec(
        "0123456789abcdef01234568",
        1,
        "replaced",
        tmp_path,
        ["sleep", "60"],
        {"PATH": os.environ["PATH"]},
        width=80,
        height=20,
    )
    try:
        await panes.start()
        first = await panes.spawn(spec, DEMO)
        t0 = time.monotonic()
        waiter = asyncio.create_task(panes.wait_change(spec.session_id, first.status_version, 30.0))
        await asyncio.sleep(0.2)
        await panes.spawn(spec, DEMO)  # a new agent for the session
        await asyncio.wait_for(waiter, 5.0)
        assert time.monotonic() - t0 < 5.0
        second = panes.record(spec.session_id)
        assert second is not None and second is not first
        waiter = asyncio.create_task(
            panes.wait_change(spec.session_id, second.status_version, 30.0)
        )
        await asyncio.sleep(0.2)
        await panes.kill(spec.session_id, timeout=1.0)
        await asyncio.wait_for(waiter, 5.0)
    finally:
        await panes.stop()
        backend.kill_server()
