"""`corral demo` driven as a person would: inside tmux, by keystrokes, read
off the screen (`capture-pane`). A private tmux socket in tmp_path; the demo's
own temp dir (and its agents' tmux server) also lives in tmp_path (TMPDIR).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(240),
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]

ROOT = Path(__file__).resolve().parents[2]
WIDTH, HEIGHT = 180, 45
SLUG = "Make slugify()"
PAGES = "Fix the off-by-one"
EXITED = "corral-exited-with-"


class Demo:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.sock = tmp / "sock"
        self.cursor_bg: str | None = None

    def tmux(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["tmux", "-S", str(self.sock), *args],
            capture_output=True,
            text=True,
            check=check,
            timeout=15,
        )

    def start(self) -> None:
        corral = ROOT / ".venv" / "bin" / "corral"
        argv = str(corral) if corral.exists() else f"{sys.executable} -m corral.tui.cli"
        env = {
            "CORRAL_HOME": str(self.tmp / "home"),
            "CORRAL_CONFIG": str(self.tmp / "missing-config.toml"),
            "TMPDIR": str(self.tmp),
            "TERM": "xterm-256color",
        }
        exports = " ".join(f"{k}={v}" for k, v in env.items())
        # the shell stays after the console exits, so the exit can be read off the screen
        self.tmux(
            "new-session", "-d", "-x", str(WIDTH), "-y", str(HEIGHT),
            f"cd {ROOT} && env -u CORRAL_LLM_PROVIDER -u COLUMNS -u LINES {exports} {argv} demo;"
            f" echo {EXITED}$?; sleep 120",
        )  # fmt: skip

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", check=False).stdout

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", *keys)

    def wait(self, what: str, ok: Callable[[str], bool], timeout: float = 20) -> str:
        deadline = time.monotonic() + timeout
        text = self.screen()
        while not ok(text):
            if time.monotonic() > deadline:
                pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}; screen:\n{text}")
            time.sleep(0.2)
            text = self.screen()
        return text

    def wait_text(self, needle: str, timeout: float = 20) -> str:
        return self.wait(repr(needle), lambda s: needle in s, timeout)

    def row(self, text: str, intent: str) -> str:
        return next((line for line in text.splitlines() if intent in line), "")

    # -- the board cursor, read from the colours of the screen --------------

    def styled(self):  # type: ignore[no-untyped-def]
        import pyte

        out = self.tmux("capture-pane", "-p", "-e", check=False).stdout
        screen = pyte.Screen(WIDTH, HEIGHT)
        pyte.Stream(screen).feed("\r\n".join(out.split("\n")[:HEIGHT]))
        return screen

    def cursor_row(self) -> str | None:
        """The text of the board row under the cursor (None if unknown)."""
        screen = self.styled()
        lines = [screen.display[y] for y in range(HEIGHT)]
        header = next((y for y, line in enumerate(lines) if "Needs you" in line), None)
        if header is None:
            return None
        col = lines[header].find("Intent") + 1
        rows = [y for y in range(header + 1, HEIGHT) if "textkit" in lines[y]]
        if self.cursor_bg is None:
            return None
        hits = [y for y in rows if screen.buffer[y][col].bg == self.cursor_bg]
        return lines[hits[0]] if len(hits) == 1 else None

    def learn_cursor(self) -> None:
        """Zebra stripes give rows 0 and 2 one background; with the cursor on
        row 1 (Up, Up, Up, Down), row 1's background is the cursor's."""
        for _ in range(20):
            self.keys("Up", "Up", "Up", "Down")
            time.sleep(0.4)
            screen = self.styled()
            lines = [screen.display[y] for y in range(HEIGHT)]
            header = next((y for y, line in enumerate(lines) if "Needs you" in line), None)
            if header is None:
                continue
            col = lines[header].find("Intent") + 1
            rows = [y for y in range(header + 1, HEIGHT) if "textkit" in lines[y]]
            bgs = [screen.buffer[y][col].bg for y in rows]
            if len(rows) == 3 and bgs[0] == bgs[2] != bgs[1]:
                self.cursor_bg = bgs[1]
                return
        pytest.fail(f"could not find the board cursor on screen:\n{self.screen()}")

    def tab_to(self, needle: str, timeout: float = 15) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            row = self.cursor_row()
            if row is not None and needle in row:
                return row
            self.keys("Tab")
            time.sleep(0.4)
        pytest.fail(f"tab never reached a row with {needle!r}; screen:\n{self.screen()}")

    def move_to(self, needle: str, timeout: float = 15) -> str:
        """Walk the cursor down from the top row to the row showing `needle`."""
        deadline = time.monotonic() + timeout
        self.keys("Home")
        time.sleep(0.4)
        while time.monotonic() < deadline:
            row = self.cursor_row()
            if row is not None and needle in row:
                return row
            self.keys("Down")
            time.sleep(0.4)
        pytest.fail(f"the cursor never reached a row with {needle!r}; screen:\n{self.screen()}")

    def stop(self) -> None:
        self.tmux("kill-server", check=False)
        for sock in self.tmp.glob("corral-demo-*/tmux/*"):
            subprocess.run(["tmux", "-S", str(sock), "kill-server"], capture_output=True)


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[Demo]:
    d = Demo(tmp_path)
    try:
        d.start()
        yield d
    finally:
        d.stop()


def test_demo_driven_through_tmux(demo: Demo) -> None:
    # the live preview opens beside the board on a wide terminal: hide it, so
    # the needs-you column has room for its words
    demo.wait("the board", lambda s: "3 sessions" in s and "agent terminal" in s, timeout=40)
    demo.keys("p")
    board = demo.wait(
        "the demo board (3 sessions, a diff and a contract waiting)",
        lambda s: (
            "3 sessions" in s
            and "diff ready for approval" in s
            and "contract awaiting confirmation" in s
        ),
        timeout=40,
    )
    assert SLUG in board and PAGES in board

    demo.keys("?")
    demo.wait_text("Gate 1")
    demo.keys("Escape")
    demo.wait("the help to close", lambda s: "Gate 1" not in s and "3 sessions" in s)

    demo.learn_cursor()
    demo.keys("Tab")
    time.sleep(0.4)
    row = demo.wait("tab to land on a needs-you row", lambda s: demo.cursor_row() is not None)
    row = demo.cursor_row() or row
    assert any(w in row for w in ("diff ready", "contract awaiting", "question")), row

    demo.tab_to("diff ready for approval")
    demo.keys("a")
    demo.wait_text("(ctrl+y)")  # delivery asks once; typing never answers
    demo.keys("Enter")  # enter keeps
    demo.wait("the question to close", lambda s: "(ctrl+y)" not in s)
    demo.keys("a")
    demo.wait_text("(ctrl+y)")
    demo.keys("C-y")
    demo.wait(
        "the approved session to be delivered",
        lambda s: "delivered" in demo.row(s, SLUG),
        timeout=30,
    )

    demo.tab_to("contract awaiting confirmation")
    demo.keys("c")
    demo.wait_text("(ctrl+y)")  # confirming the contract asks once
    demo.keys("C-y")
    demo.wait(
        "the confirmed session to leave the contract gate",
        lambda s: (
            "contract awaiting" not in demo.row(s, PAGES)
            and any(w in demo.row(s, PAGES) for w in ("working", "agent", "question", "starting"))
        ),
        timeout=30,
    )

    # the delivered session is deleted for good: asked once, then its row goes
    demo.move_to(SLUG)
    demo.keys("X")
    demo.wait_text("for good?")
    demo.keys("C-y")
    demo.wait(
        "the deleted session's row to go",
        lambda s: SLUG not in s and "2 sessions" in s and "is deleted" in s,
        timeout=20,
    )

    demo.keys("q")
    screen = demo.wait_text(EXITED, timeout=20)
    assert f"{EXITED}0" in screen, screen
    assert "corral demo: the demo repository is at" in screen
    # the demo cleans up its own: its agents and its private tmux server
    sockets = list(demo.tmp.glob("corral-demo-*/tmux/*"))
    assert sockets, "the demo ran no tmux server"
    for sock in sockets:
        alive = subprocess.run(["tmux", "-S", str(sock), "list-sessions"], capture_output=True)
        assert alive.returncode != 0, f"the demo's tmux server {sock} is still running"


def test_preview_rename_reject_and_retry_through_tmux(demo: Demo) -> None:
    """The lifecycle keys as a person uses them: the live preview shows the
    selected agent's own screen and `p` hides it; `N` names a session; `r`
    rejects with a comment; `R` on the rejected row starts a retry that keeps
    the name, gets the cursor, and tells its agent the reject comment."""
    demo.wait(
        "the board with the live preview of the selected agent",
        lambda s: "3 sessions" in s and "agent terminal" in s and "corral demo agent" in s,
        timeout=40,
    )
    demo.wait("the diff to wait for approval", lambda s: "diff ready for approval" in s, 40)
    demo.keys("p")
    demo.wait("the preview to hide", lambda s: "agent terminal" not in s)

    demo.learn_cursor()
    demo.tab_to("diff ready for approval")
    demo.keys("N")
    demo.wait_text("a short name")
    demo.keys("-l", "folding")
    demo.keys("Enter")
    demo.wait(
        "the name on the row",
        lambda s: "folding" in demo.row(s, "Make slugify") and "a short name" not in s,
    )

    demo.keys("r")
    demo.wait_text("why? (optional)")
    # typed as a paste ending in a newline: the newline never answers, ctrl+y does
    demo.keys("-l", "keep the hyphens")
    demo.keys("Enter")
    demo.keys("C-y")
    demo.wait("the rejection", lambda s: "abandoned" in demo.row(s, "Make slugify"), 20)

    deadline = time.monotonic() + 15
    while "abandoned" not in (demo.cursor_row() or ""):
        if time.monotonic() > deadline:
            pytest.fail(f"the cursor never reached the rejected row:\n{demo.screen()}")
        demo.keys("Down")
        time.sleep(0.4)
    demo.keys("R")
    demo.wait_text("Retry this rejected session?")
    demo.keys("C-y")
    demo.wait(
        "the retry, named like its first attempt, at its contract gate",
        lambda s: (
            "4 sessions" in s
            and sum("folding" in line for line in s.splitlines()) == 2
            and "contract awaiting" in demo.row(s, "folding")
        ),
        timeout=20,
    )
    # the cursor went to the new session: its keys confirm it
    row = demo.wait("the cursor on the retry", lambda s: "contract" in (demo.cursor_row() or ""))
    assert "folding" in (demo.cursor_row() or row)
    demo.keys("c")
    demo.wait_text("(ctrl+y)")
    demo.keys("C-y")
    # its agent (in the preview, shown again) was told why the first attempt was rejected
    demo.keys("p")
    demo.wait("the preview to come back", lambda s: "agent terminal" in s)
    told = "The operator rejected the result: keep the hyphens"
    demo.wait(repr(told), lambda s: told in " ".join(s.replace("│", " ").split()), timeout=30)

    demo.keys("q")
    screen = demo.wait_text(EXITED, timeout=20)
    assert f"{EXITED}0" in screen, screen


def test_sigterm_on_the_demo_says_where_its_repository_is_and_cleans_up(demo: Demo) -> None:
    demo.wait("the board", lambda s: "3 sessions" in s, timeout=40)
    shell = demo.tmux("display-message", "-p", "#{pane_pid}").stdout.strip()
    subprocess.run(["pkill", "-TERM", "-P", shell, "-f", "corral"], check=True)
    screen = demo.wait_text(EXITED, timeout=30)
    assert "corral demo: the demo repository is at" in screen, screen
    for sock in demo.tmp.glob("corral-demo-*/tmux/*"):
        alive = subprocess.run(["tmux", "-S", str(sock), "list-sessions"], capture_output=True)
        assert alive.returncode != 0, f"the demo's tmux server {sock} is still running"


def test_the_readmes_commands_reach_the_demo_beside_it(demo: Demo) -> None:
    """The demo owns its state dir and serves its socket: `corral sessions`
    with the CORRAL_HOME it names at start lists its sessions live (it said
    "no corral owns …" and showed only what was stored)."""
    text = demo.wait_text("Other terminals reach this demo with", timeout=40)
    demo.wait("the three sessions", lambda s: "3 sessions" in s, timeout=40)
    states = list(demo.tmp.glob("corral-demo-*/state"))
    assert len(states) == 1, (states, text)
    corral = ROOT / ".venv" / "bin" / "corral"
    argv = [str(corral)] if corral.exists() else [sys.executable, "-m", "corral.tui.cli"]
    env = {**os.environ, "CORRAL_HOME": str(states[0])}
    out = subprocess.run(
        [*argv, "sessions"], capture_output=True, text=True, env=env, timeout=30, cwd=ROOT
    )
    assert out.returncode == 0, out.stderr
    assert "no corral owns" not in out.stdout + out.stderr, out.stdout
    assert SLUG in out.stdout and PAGES in out.stdout, out.stdout
    demo.keys("q")
    demo.wait_text(EXITED, timeout=20)
