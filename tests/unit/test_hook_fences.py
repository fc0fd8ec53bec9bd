"""Hook lines carry the incarnation of the pane whose agent wrote them: a
late line from an agent corral already replaced must not end (or start) the
new agent's turn, and a delivery meant for a replaced pane is refused."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from corral.supervisor.agents.base import AgentProfile, hook_command
from corral.supervisor.panes.base import PaneGone, PaneHandle
from corral.supervisor.panes.manager import PaneManager
from corral.tui.cli.hook import run_hook


class NoBackend:
    name = "none"

    def send_text(self, handle: PaneHandle, text: str) -> None:
        self.sent = (handle, text)


def write_hook(hooks: Path, incarnation: int | None, event: str) -> None:
    argv = ["--file", str(hooks)]
    if incarnation is not None:
        argv += ["--incarnation", str(incarnation)]
    run_hook([*argv, "--argv-payload", event, '{"session_id": "agent-1"}'])


def test_a_late_hook_line_from_an_old_incarnation_is_dropped(tmp_path: Path) -> None:
    panes = PaneManager(NoBackend(), tmp_path)  # type: ignore[arg-type]
    profile = AgentProfile(name="claude", label="Claude Code", binaries=(), hooks=True)
    record = panes.adopt("sid", PaneHandle("tmux", "%1", "sid:200"), profile)
    hooks = panes.hooks_file("sid")
    hooks.parent.mkdir(parents=True)
    write_hook(hooks, 100, "Stop")  # the agent corral replaced, finishing late
    write_hook(hooks, 200, "UserPromptSubmit")
    write_hook(hooks, None, "Notification")  # a wrapper that names no pane still counts
    seen: list[str] = []
    panes.on_hook = lambda sid, event: seen.append(str(event["hook_event_name"]))
    panes.apply_hooks()
    assert seen == ["UserPromptSubmit", "Notification"]
    assert record.stale_hooks == 1
    assert record.tracker.current.status.value == "running"  # not ended by the old Stop


def test_the_hook_command_names_its_incarnation() -> None:
    assert "--incarnation 42" in hook_command("/usr/bin/python3", Path("/h.jsonl"), 42)


def test_a_delivery_for_a_replaced_pane_is_refused(tmp_path: Path) -> None:
    backend = NoBackend()
    panes = PaneManager(backend, tmp_path)  # type: ignore[arg-type]
    profile = AgentProfile(name="x", label="x", binaries=())
    panes.adopt("sid", PaneHandle("tmux", "%1", "sid:200"), profile)
    with pytest.raises(PaneGone, match="replaced"):
        asyncio.run(panes.send_text("sid", "hello", incarnation=100))
    asyncio.run(panes.send_text("sid", "hello", incarnation=200))
    assert backend.sent[1] == "hello"
