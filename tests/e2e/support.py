"""What the real-agent end-to-end tests share: a supervisor drafting the
hello contract for one agent, waiting with the agent's screen and last events
on a timeout, and stopping the test's private tmux servers."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from corral.supervisor.api import Supervisor
from corral.supervisor.contracts.drafting import FixedDrafter
from corral.supervisor.factory import build_supervisor
from corral.supervisor.models import SessionSummary
from corral.supervisor.states import CoderState
from tests.conftest import eventually, fast_config, hello_contract

# Files that start real agent CLIs (node processes that take a core each to
# boot) share one parallel-test lane, so two of them never boot at once on a
# 2-core machine and their timeouts measure the CLI, not the contention.
AGENT_CLIS = pytest.mark.xdist_group("agent-clis")


def screen_text(sup: Supervisor, sid: str) -> str:
    screen = sup.agent_screen(sid)
    return "\n".join(line for line in (screen.lines if screen else []) if line.strip())


def describe(sup: Supervisor, sid: str) -> str:
    """The agent's screen and the session's last events, for a failure message."""
    events = [(e.kind.value, e.data) for e in sup.replay(sid)][-15:]
    return f"agent screen:\n{screen_text(sup, sid)}\nevents: {events}"


async def settle(
    sup: Supervisor, sid: str, states: set[CoderState], timeout: float
) -> SessionSummary:
    """wait_for, but on a timeout say what the agent's screen shows."""
    try:
        return await sup.wait_for(sid, states, timeout=timeout)
    except TimeoutError:
        raise AssertionError(f"timed out; {describe(sup, sid)}") from None


async def until(
    sup: Supervisor,
    sid: str,
    what: str | Callable[[], str],
    predicate: Callable[[], Any],
    timeout: float,
) -> Any:
    """`eventually`, but on a timeout say what was awaited, what the agent's
    screen shows and the session's last events (a CI failure has only this)."""
    try:
        return await eventually(predicate, timeout=timeout, interval=0.2)
    except AssertionError:
        said = what() if callable(what) else what
        raise AssertionError(f"{said}: not within {timeout:g} s; {describe(sup, sid)}") from None


async def open_sup(
    tmp_path: Path, agent: str, *, wall_secs: int = 120, repairs: int = 0
) -> Supervisor:
    """A supervisor whose sessions run `agent` on the hello contract, with
    `repairs` repair rounds (none unless asked)."""
    sup = build_supervisor(
        tmp_path / "state",
        FixedDrafter(hello_contract()),
        socket_dir=tmp_path / "tmux",
        default_engine=f"external:{agent}",
        config=fast_config(repair_invokes=repairs, max_session_wall_secs=wall_secs),
    )
    await sup.open()
    return sup


def process_tree(pid: int) -> set[int]:
    """`pid` and every live descendant (from /proc): Gemini CLI relaunches
    itself as a child node process, Aider's shell may fork."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    tree, todo = set(), [pid]
    while todo:
        current = todo.pop()
        tree.add(current)
        todo += children.get(current, [])
    return tree


def agent_pids(sup: Supervisor, sid: str, wanted: Callable[[list[str]], bool]) -> list[int]:
    """The processes under a session's agent process (an ACP agent's, not
    a pane's) whose command line (`argv`) is `wanted`."""
    pane = sup.get(sid).session.pane or {}
    found = []
    for pid in process_tree(int(pane["pid"])):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if wanted(argv.split("\0")):
            found.append(pid)
    return found


def kill_tmux(tmp_path: Path) -> None:
    """Stop every agent the test's private tmux servers hold, then the
    servers: closing the supervisor leaves agents running on purpose (the
    next owner re-adopts them), and an agent's child that survives its pane's
    hangup (Gemini CLI's relaunched node) would outlive the test."""
    for sock in (tmp_path / "tmux").glob("*"):
        listed = subprocess.run(
            ["tmux", "-S", str(sock), "list-panes", "-a", "-F", "#{pane_pid}"],
            capture_output=True,
            text=True,
        )
        for raw in listed.stdout.split():
            for pid in process_tree(int(raw)) if raw.isdigit() else ():
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
        subprocess.run(["tmux", "-S", str(sock), "kill-server"], capture_output=True)
