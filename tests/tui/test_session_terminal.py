"""The session screen with a live agent terminal: a small deterministic agent
program runs in a real tmux pane (a private server on a socket in a short
tmp dir), the supervisor captures the pane in memory and TerminalView shows
that screen with its colours."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral.supervisor.api import Supervisor
from corral.supervisor.config import SupervisorConfig
from corral.supervisor.engines.registry import AgentEngines
from corral.supervisor.models import EventKind
from corral.supervisor.panes.manager import PaneManager
from corral.supervisor.panes.tmux import TmuxBackend
from corral.supervisor.states import CoderState
from corral.tui.app import CorralApp
from corral.tui.screens.session import SessionScreen
from corral.tui.widgets.terminal import TerminalView
from tests.fakes.scripted import ScriptedDrafter, contract

from .conftest import FIXED_NOW, caught_up, final_frame, make_repo, open_from_board

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

AGENT_NAME = "snapshot-agent"  # found on PATH, so no tmp path shows in the header

# Prints a fixed screen and then waits forever: no spinner, no clock, no
# blinking. The "esc to interrupt" line is a busy marker, so the agent reads
# as working and the session stays running (corral pastes the task only once
# the agent shows an idle prompt, after 60 s at the latest: long after this
# test). Echo is off, so nothing typed into the pane would show.
AGENT = r"""
import signal, sys, termios

attrs = termios.tcgetattr(0)
attrs[3] &= ~termios.ECHO
termios.tcsetattr(0, termios.TCSANOW, attrs)
B, DIM, GREEN, RED, OFF = "\x1b[1m", "\x1b[2m", "\x1b[32m", "\x1b[31m", "\x1b[0m"
sys.stdout.buffer.write((
    f"{B}snapshot-agent 1.0{OFF} {DIM}(a scripted stand-in for an agent CLI){OFF}\r\n"
    "\r\n"
    "Reading textkit/slug.py\r\n"
    "$ python -m pytest -q\r\n"
    f"{GREEN}✓ tests pass{OFF} (12 passed in 0.04s)\r\n"
    f"{RED}✗ ruff: slug.py:14:5 F841 local variable 'folded' is never used{OFF}\r\n"
    f"{B}Next: use the folded text in slugify(){OFF}\r\n"
    "\r\n"
    f"{DIM}✻ Working… (esc to interrupt){OFF}\r\n"
    "❯ "
).encode())
sys.stdout.flush()
while True:
    signal.pause()
"""


@pytest.fixture
def tmux_dir() -> Iterator[Path]:
    """A short private directory for the tmux socket (unix socket paths are
    limited to ~100 bytes); the server in it is killed at the end."""
    path = Path(tempfile.mkdtemp(prefix="corral-", dir="/tmp" if Path("/tmp").is_dir() else None))
    try:
        yield path
    finally:
        for sock in path.glob("*"):
            subprocess.run(["tmux", "-S", str(sock), "kill-server"], capture_output=True)
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def agent_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    program = bindir / AGENT_NAME
    program.write_text(f"#!{sys.executable}\n{AGENT}", encoding="utf-8")
    program.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ.get('PATH', os.defpath)}")
    return AGENT_NAME


def agent_working(sup: Supervisor, sid: str) -> bool:
    """The agent's screen is captured and its status reads as working."""
    screen = sup.agent_screen(sid)
    row = next((r for r in sup.list() if r.session_id == sid), None)
    return bool(
        screen
        and "esc to interrupt" in "\n".join(screen.lines)
        and row is not None
        and row.agent_status == "running"
    )


@pytest.mark.slow
def test_session_screen_with_a_live_agent_terminal(
    snap_compare, tmp_path: Path, tmux_dir: Path, agent_on_path: str
) -> None:
    """Header (running, engine custom), contract with its red baseline, the
    agent's terminal with its colours, and the event log up to the agent's
    first status reading."""
    repo = make_repo(tmp_path / "repo")
    state = tmp_path / "state"
    panes = PaneManager(TmuxBackend(socket_dir=tmux_dir), state / "agents")
    engines = AgentEngines(
        panes, session_dir=lambda sid: state / "agents" / sid, default=f"custom:{agent_on_path}"
    )
    sup = Supervisor(
        state,
        drafter=ScriptedDrafter(
            [
                contract(
                    ("slug_folds_accents", "grep -q folded slug.txt"),
                    description="slugify() folds accents",
                )
            ]
        ),
        engines=engines,
        config=SupervisorConfig(repair_invokes=0),
        panes=panes,
        clock=lambda: FIXED_NOW,
        id_factory=lambda: "0" * 23 + "1",
    )
    sid = ""

    async def seed(s: Supervisor) -> None:
        nonlocal sid
        sid = (await s.start("Make slugify() fold accents", repo)).session_id
        await s.confirm(sid)
        await s.wait_for(sid, {CoderState.RUNNING}, timeout=20)
        # the operator opens the session once the agent is on screen and
        # reads as working (the footer's Attach / Terminal keys need the pane)
        for _ in range(150):
            if agent_working(s, sid):
                return
            await asyncio.sleep(0.1)

    app = CorralApp(sup, default_repo=repo, clock=lambda: FIXED_NOW, on_ready=seed)

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        await app.ready.wait()
        assert agent_working(sup, sid), "the agent never showed its working screen"
        screen = await open_from_board(app, pilot, "enter")
        assert isinstance(screen, SessionScreen)
        view = screen.query_one(TerminalView)

        def settled() -> bool:
            """The agent's newest captured screen is in the view, its working
            status in the log, and every event of the session has been handled."""
            newest = view._version == sup.agent_screen_version(sid)
            shown = newest and view.display and "esc to interrupt" in view.content.plain  # type: ignore[union-attr]
            working = any(
                e.kind is EventKind.AGENT_STATUS and e.data.status == "running"
                for e in screen.events
            )
            return bool(shown and working and caught_up(screen))

        await final_frame(pilot, "the agent's screen in the terminal view", settled)
        assert sup.get(sid).session.state is CoderState.RUNNING

    assert snap_compare(app, terminal_size=(120, 44), run_before=before)


@pytest.mark.slow
async def test_with_the_terminal_focused_the_footer_offers_only_its_keys(
    tmp_path: Path, tmux_dir: Path, agent_on_path: str
) -> None:
    """Keys typed into the agent terminal go to the agent: the footer offers
    only the terminal's own keys (leave, history), not the screen's."""
    from .conftest import footer_actions, until

    repo = make_repo(tmp_path / "repo")
    state = tmp_path / "state"
    panes = PaneManager(TmuxBackend(socket_dir=tmux_dir), state / "agents")
    engines = AgentEngines(
        panes, session_dir=lambda sid: state / "agents" / sid, default=f"custom:{agent_on_path}"
    )
    sup = Supervisor(
        state,
        drafter=ScriptedDrafter([contract(("folds", "grep -q folded slug.txt"))]),
        engines=engines,
        config=SupervisorConfig(repair_invokes=0),
        panes=panes,
    )

    async def seed(s: Supervisor) -> None:
        sid = (await s.start("Make slugify() fold accents", repo)).session_id
        await s.confirm(sid)
        await s.wait_for(sid, {CoderState.RUNNING}, timeout=20)

    app = CorralApp(sup, default_repo=repo, on_ready=seed)
    async with app.run_test(size=(120, 44)) as pilot:
        screen = await open_from_board(app, pilot, "enter")
        assert isinstance(screen, SessionScreen)
        view = screen.query_one(TerminalView)
        await until(pilot, "the agent's pane", lambda: view.display)
        assert not getattr(screen.focused, "TAKES_KEYS", False)  # guidance is not a gate
        await until(pilot, "the terminal key", lambda: "focus_terminal" in footer_actions(app))
        assert {"back", "cancel_session"} <= footer_actions(app)
        await pilot.press("t")
        await until(pilot, "the terminal to have focus", lambda: view.has_focus)
        await until(
            pilot,
            "only the terminal's keys in the footer",
            lambda: footer_actions(app) <= {"leave", "toggle_history", "command_palette"},
        )
        assert "leave" in footer_actions(app)
        await pilot.press("ctrl+g")
        await until(pilot, "the terminal to lose focus", lambda: not view.has_focus)
        await until(pilot, "the screen's keys again", lambda: "back" in footer_actions(app))
