"""Notifications as a person gets them: `corral demo` inside a real tmux (a
private socket), its raw output read with `pipe-pane`. When a demo session
starts needing you the console writes the terminal's desktop notification
(OSC 9 and OSC 777) and the configured hook runs, once each; approving a diff
yourself announces nothing, and a repaint repeats nothing.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(180),
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]

ROOT = Path(__file__).resolve().parents[2]
HOOK = 'printf "%s %s %s\\n" "$CORRAL_EVENT" "$CORRAL_SESSION_LABEL" "$CORRAL_NEEDS_YOU" >> "$0"'


class Console:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.sock = tmp / "sock"
        self.raw = tmp / "raw.out"
        self.hooks = tmp / "hooks.log"

    def tmux(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["tmux", "-S", str(self.sock), *args],
            capture_output=True,
            text=True,
            check=check,
            timeout=15,
        )

    def start(self, extra: str = "", width: int = 120) -> None:
        config = self.tmp / "config.toml"
        hook = ", ".join(f"'{part}'" for part in ["sh", "-c", HOOK, str(self.hooks)])
        config.write_text(
            f"[notify]\ndesktop = false\non_needs_you = [{hook}]\non_finished = [{hook}]\n" + extra
        )
        corral = ROOT / ".venv" / "bin" / "corral"
        argv = str(corral) if corral.exists() else f"{sys.executable} -m corral.tui.cli"
        env = {
            "CORRAL_HOME": str(self.tmp / "home"),
            "CORRAL_CONFIG": str(config),
            "TMPDIR": str(self.tmp),
            "TERM": "xterm-256color",
        }
        exports = " ".join(f"{k}={v}" for k, v in env.items())
        self.tmux(
            "new-session", "-d", "-x", str(width), "-y", "32",
            f"cd {ROOT} && env -u CORRAL_LLM_PROVIDER -u COLUMNS -u LINES {exports} {argv} demo;"
            " echo corral-exited-with-$?; sleep 120",
        )  # fmt: skip
        self.tmux("pipe-pane", "-o", f"cat >> {self.raw}")

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", check=False).stdout

    def raw_text(self) -> str:
        return self.raw.read_bytes().decode("utf-8", "replace") if self.raw.exists() else ""

    def hook_lines(self) -> list[str]:
        return self.hooks.read_text().splitlines() if self.hooks.exists() else []

    def wait(self, what: str, ok: Callable[[], bool], timeout: float = 40) -> None:
        deadline = time.monotonic() + timeout
        while not ok():
            if time.monotonic() > deadline:
                pytest.fail(f"timed out waiting for {what}; screen:\n{self.screen()}")
            time.sleep(0.2)

    def stop(self) -> None:
        self.tmux("kill-server", check=False)
        for sock in self.tmp.glob("corral-demo-*/tmux/*"):
            subprocess.run(["tmux", "-S", str(sock), "kill-server"], capture_output=True)


@pytest.fixture
def console(tmp_path: Path) -> Iterator[Console]:
    c = Console(tmp_path)
    try:
        c.start()
        yield c
    finally:
        c.stop()


def test_needs_you_reaches_the_terminal_and_the_hook_once(console: Console) -> None:
    def kinds() -> set[str]:
        return {line.split()[-1] for line in console.hook_lines()}

    console.wait(
        f"the hook for a diff and a contract (ran: {kinds()})",
        lambda: {"merge", "contract"} <= kinds(),
    )
    raw = console.raw_text()
    # inside tmux each sequence is wrapped for passthrough (ESC doubled)
    assert "]9;corral: corral-" in raw and "needs you: diff ready for approval" in raw, raw[-2000:]
    assert "]777;notify;corral: corral-" in raw
    assert "\x1bPtmux;\x1b\x1b]9;" in raw

    before = console.hook_lines()
    osc_before = raw.count("]9;")
    # a repaint (the terminal resized) and a key that moves the cursor: no news
    console.tmux("resize-window", "-x", "110", "-y", "30")
    console.tmux("send-keys", "Down", "Up")
    # approve the waiting diff yourself: the finish is yours, not announced
    console.wait("the diff on the top row", lambda: "needs approval" in console.screen())
    console.tmux("send-keys", "Home", "a")
    console.wait("approval to ask once", lambda: "(ctrl+y)" in console.screen(), timeout=15)
    console.tmux("send-keys", "C-y")
    console.wait("the delivery", lambda: "delivered" in console.screen(), timeout=30)
    time.sleep(1.5)  # a notice for it would have been written by now
    after = console.hook_lines()
    assert [line for line in after if line.startswith("finished")] == [], after
    assert after[: len(before)] == before
    new = after[len(before) :]
    # only news from the other demo sessions may follow (none repeats a label+kind)
    assert len(set(after)) == len(after), after
    assert console.raw_text().count("]9;") == osc_before + len(new)
