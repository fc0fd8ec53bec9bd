"""The command line never writes a control sequence it did not make: an
intent holding OSC 52 (write the clipboard) and OSC 2 (retitle the window),
printed by the real `corral sessions` and `corral get` in a real tmux pane
(a private socket, clipboard writes from applications allowed), leaves the
pane's title and tmux's paste buffers as they were."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from corral.supervisor.states import label
from tests.fakes.scripted import contract
from tests.tui.conftest import make_repo, scripted_supervisor

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(120),
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]

ROOT = Path(__file__).resolve().parents[2]
ATTACK = "Fix it\x1b]52;c;cHduZWQ=\x07\x1b]2;owned-title\x07 \x9d2;c1-title\x9c done"


def _store_session(home: Path, repo: Path) -> str:
    async def seed() -> str:
        sup = scripted_supervisor(home, contract(("ok", "true")))
        await sup.open()
        try:
            return (await sup.start(ATTACK, repo)).session_id
        finally:
            await sup.close()

    return asyncio.run(seed())


class Pane:
    def __init__(self, tmp: Path) -> None:
        self.sock = tmp / "sock"

    def tmux(self, *args: str) -> str:
        return subprocess.run(
            ["tmux", "-S", str(self.sock), *args],
            capture_output=True,
            text=True,
            check=True,
            timeout=15,
        ).stdout

    def run(self, command: str, marker: str) -> str:
        self.tmux("send-keys", "-t", "t", f"{command}; echo {marker}", "Enter")
        deadline = time.monotonic() + 60
        while True:
            screen = self.tmux("capture-pane", "-p", "-t", "t", "-S", "-200")
            if f"\n{marker}" in screen:
                return screen
            if time.monotonic() > deadline:
                pytest.fail(f"timed out waiting for {command!r}; screen:\n{screen}")
            time.sleep(0.2)

    def title(self) -> str:
        return self.tmux("display-message", "-p", "-t", "t", "#{pane_title}").strip()

    def buffers(self) -> str:
        return self.tmux("list-buffers")


def test_an_intents_escape_sequences_reach_no_terminal(tmp_path: Path) -> None:
    home = tmp_path / "home"
    sid = _store_session(home, make_repo(tmp_path / "repo"))
    pane = Pane(tmp_path)
    corral = ROOT / ".venv" / "bin" / "corral"
    argv = str(corral) if corral.exists() else f"{sys.executable} -m corral.tui.cli"
    pane.tmux("-f", "/dev/null", "new-session", "-d", "-s", "t", "-x", "200", "-y", "50", "sh")
    try:
        pane.tmux("set-option", "-g", "set-clipboard", "on")  # applications may write buffers
        pane.tmux("select-pane", "-t", "t", "-T", "operator-title")
        pane.tmux("send-keys", "-t", "t", f"export CORRAL_HOME={home} TERM=xterm-256color", "Enter")

        # the attack works in this pane when something prints it raw
        pane.run("printf '\\033]2;raw-title\\007\\033]52;c;cmF3\\007'", "RAW-DONE")
        assert pane.title() == "raw-title" and "raw" in pane.buffers()
        pane.tmux("select-pane", "-t", "t", "-T", "operator-title")
        pane.tmux("delete-buffer")
        assert pane.buffers() == ""

        screen = pane.run(f"{argv} sessions; {argv} get {label(sid)}", "CLI-DONE")
        assert pane.title() == "operator-title"
        assert pane.buffers() == ""
        assert "Fix it" in screen and "␛]2;owned-title␇" in screen, screen  # shown, not obeyed
        pane.run(f"{argv} sessions --json; {argv} get --json {label(sid)}", "JSON-DONE")
        assert pane.title() == "operator-title"
        assert pane.buffers() == ""
    finally:
        subprocess.run(["tmux", "-S", str(pane.sock), "kill-server"], capture_output=True)
