"""The sweep reads screens in its worker thread and the loop only folds the
readings: a slow sweep can neither freeze the loop nor end a turn with a
screen it captured before corral's prompt landed. A fake backend stands in
for tmux and a fake clock for time (the debounces are driven, not slept);
the PaneManager and the trackers are the real ones."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import replace
from pathlib import Path

from corral.supervisor.agents.profiles import DEMO, profile_for
from corral.supervisor.panes.base import PaneHandle, PaneInfo, PaneSpec, Screen
from corral.supervisor.panes.manager import PaneManager
from corral.supervisor.status import AgentStatus
from tests.fakes.clock import FakeClock

IDLE = Screen(lines=["done.", "> "], cursor_x=2, cursor_y=1)
BUSY = Screen(lines=["step 1", "✻ Working… (esc to interrupt)"], cursor_x=0, cursor_y=1)


class FakeBackend:
    """One pane; every sweep reports new output; captures return `screen`,
    optionally held until `release` is set (a sweep that fell behind)."""

    name = "fake"

    def __init__(self) -> None:
        self.screen = IDLE
        self.release: threading.Event | None = None
        self.captured = threading.Event()
        self.threads: set[str] = set()
        self.ticks = 0.0

    def spawn(self, spec: PaneSpec) -> PaneHandle:
        return PaneHandle("fake", "%1", spec.owner, 1)

    def sweep(self) -> dict[str, PaneInfo]:
        self.ticks += 1
        handle = PaneHandle("fake", "%1", "s1:1", 1)
        return {"s1:1": PaneInfo(handle, alive=True, activity=self.ticks)}

    def capture(self, handles: list[PaneHandle]) -> dict[str, Screen]:
        self.threads.add(threading.current_thread().name)
        screen = self.screen
        self.captured.set()
        if self.release is not None:
            self.release.wait(5)
        return {h.owner: screen for h in handles}

    def send_text(self, handle: PaneHandle, text: str, **kw: object) -> None:
        pass

    def close(self) -> None:
        pass


async def manager_with_pane(
    tmp_path: Path, clock: FakeClock | None = None
) -> tuple[PaneManager, FakeBackend]:
    backend = FakeBackend()
    panes = PaneManager(backend, tmp_path / "hooks", interval=0.05, clock=clock or FakeClock())
    spec = PaneSpec("s1", 1, "corral-s1", tmp_path, ["agent"], {})
    await panes.spawn(spec, DEMO)
    return panes, backend


async def test_screens_are_captured_and_read_off_the_loop(tmp_path: Path) -> None:
    panes, backend = await manager_with_pane(tmp_path)
    try:
        backend.screen = BUSY
        await panes.sweep_once()
        assert panes.record("s1").status.status is AgentStatus.RUNNING
        assert backend.threads and threading.current_thread().name not in backend.threads
    finally:
        await panes.stop()


async def test_a_capture_from_before_the_prompt_landed_does_not_end_the_turn(
    tmp_path: Path,
) -> None:
    clock = FakeClock()
    panes, backend = await manager_with_pane(tmp_path, clock)
    try:
        for _ in range(2):  # the agent sits at its prompt
            await panes.sweep_once()
            clock.advance(0.6)
        await panes.sweep_once()
        record = panes.record("s1")
        assert record is not None and record.status.status is AgentStatus.IDLE
        # a sweep falls behind: it captured the idle prompt, then the paste lands
        backend.release = threading.Event()
        backend.captured.clear()
        sweep = asyncio.ensure_future(panes.sweep_once())
        await asyncio.to_thread(backend.captured.wait, 5)
        clock.advance(0.01)  # the paste lands after the capture
        panes.prompted("s1", clock())
        assert record.status.status is AgentStatus.RUNNING
        clock.advance(0.6)  # longer than the idle debounce
        backend.release.set()
        await sweep
        assert record.status.status is AgentStatus.RUNNING  # the stale screen is ignored
        backend.release = None
        await panes.sweep_once()  # the same prompt again: stable only since the paste
        assert record.status.status is AgentStatus.RUNNING
        assert not record.tracker.prompted_turn_ended(0.0)
        # the agent works, then shows its prompt again: only now does the turn end
        backend.screen = BUSY
        await panes.sweep_once()
        backend.screen = IDLE
        for _ in range(3):
            await panes.sweep_once()
            clock.advance(0.3)
        assert record.status.status is AgentStatus.IDLE
        assert record.tracker.prompted_turn_ended(0.0)
    finally:
        await panes.stop()


async def test_a_custom_agents_quiet_prompt_is_idle_only_after_the_quiet_time(
    tmp_path: Path,
) -> None:
    backend = FakeBackend()
    clock = FakeClock()
    panes = PaneManager(backend, tmp_path / "hooks", clock=clock)
    custom = replace(profile_for("custom:tool"), quiet_secs=1.5)
    await panes.spawn(PaneSpec("s1", 1, "corral-s1", tmp_path, ["tool"], {}), custom)
    backend.screen = Screen(lines=["tool v1", "tool$ "], cursor_x=6, cursor_y=1)
    try:
        record = panes.record("s1")
        assert record is not None
        await panes.sweep_once()
        clock.advance(0.2)
        await panes.sweep_once()
        assert record.status.status is not AgentStatus.IDLE  # a prompt, but not quiet for long
        clock.advance(1.5)
        await panes.sweep_once()
        assert record.status.status is AgentStatus.IDLE
        assert "quiet" in record.status.reason
    finally:
        await panes.stop()
