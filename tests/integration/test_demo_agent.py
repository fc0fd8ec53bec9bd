"""The scripted demo agent (assets/demo_agent) driven as a real terminal
program: a real tmux server on a private socket, real keys and bracketed
pastes, real files in a git copy of the demo repository, and hooks recorded
by a real shell command. Nothing is mocked."""

from __future__ import annotations

import ast
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from corral.assets import path as asset_path
from corral.supervisor.demo import (
    ASSETS,
    DEMO_INTENTS,
    PAGES_FIX,
    README_JSON,
    REPORT_JSON,
    SLUG_FIX,
)
from tests.conftest import git

AGENT_DIR = asset_path("demo_agent")
AGENT = AGENT_DIR / "demo_agent.py"
RECIPES = AGENT_DIR / "recipes.json"
SLUG_TASK = "Make slugify() fold accents (Crème Brûlée → creme-brulee)"
QUESTION = "Do you want to make this edit to"
BUSY = "esc to interrupt"

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")


def wait_until(check: Callable[[], Any], what: str, timeout: float = 5.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


@pytest.fixture
def demo_repo(tmp_path: Path) -> Path:
    root = tmp_path / "textkit"
    shutil.copytree(ASSETS, root, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "demo")
    return root.resolve()


class Hooks:
    """A hook command that appends "<event argument>\\t<stdin JSON>" lines."""

    def __init__(self, tmp_path: Path) -> None:
        self.log = tmp_path / "hooks.log"
        self.slow = tmp_path / "slow-hook"  # holds an event name the hook lingers on
        script = tmp_path / "hook.sh"
        script.write_text(
            f'payload=$(cat)\nprintf "%s\\t%s\\n" "$1" "$payload" >> {shlex.quote(str(self.log))}\n'
            f'[ "$1" = "$(cat {shlex.quote(str(self.slow))} 2>/dev/null)" ] && sleep 10\n'
            "exit 0\n"
        )
        self.command = f"sh {shlex.quote(str(script))}"

    def events(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        events = []
        for line in self.log.read_text(encoding="utf-8").splitlines():
            arg, _, payload = line.partition("\t")
            event = json.loads(payload)
            assert event["hook_event_name"] == arg  # the event is also the last argument
            events.append(event)
        return events

    def names(self) -> list[str]:
        return [e["hook_event_name"] for e in self.events()]

    def count(self, name: str) -> int:
        return self.names().count(name)

    def wait(self, name: str, n: int = 1) -> list[dict[str, Any]]:
        wait_until(lambda: self.count(name) >= n, f"{n} {name} hook(s)")
        return self.events()


class Tmux:
    """One tmux server on a private socket; the agent runs in its only pane."""

    def __init__(self, tmp_path: Path) -> None:
        sock_dir = tmp_path
        if len(str(tmp_path)) > 80:  # unix socket paths are short
            sock_dir = Path(tempfile.mkdtemp(prefix="corral-tmux-"))
        self.sock = sock_dir / "tmux.sock"
        self.conf = tmp_path / "tmux.conf"
        self.conf.write_text("set -g remain-on-exit on\nset -g history-limit 2000\n")
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("TMUX")}
        self.env["LANG"] = "C.UTF-8"

    def tmux(self, *args: str, input: bytes | None = None) -> str:
        proc = subprocess.run(
            ["tmux", "-u", "-S", str(self.sock), "-f", str(self.conf), *args],
            env=self.env,
            input=input,
            capture_output=True,
            check=True,
            timeout=10,
        )
        return proc.stdout.decode("utf-8", "replace")

    def start(self, cwd: Path, argv: list[str], env: dict[str, str]) -> None:
        flags = [f"-e{k}={v}" for k, v in env.items()]
        self.tmux(
            "new-session",
            "-d",
            "-s",
            "agent",
            "-x",
            "120",
            "-y",
            "40",
            "-c",
            str(cwd),
            *flags,
            *argv,
        )

    def lines(self) -> list[str]:
        lines = [
            line.rstrip() for line in self.tmux("capture-pane", "-p", "-t", "agent").split("\n")
        ]
        while lines and not lines[-1]:
            lines.pop()
        return lines

    def screen(self) -> str:
        return "\n".join(self.lines())

    def wait_screen(self, text: str, timeout: float = 5.0) -> None:
        try:
            wait_until(lambda: text in self.screen(), repr(text), timeout)
        except AssertionError:
            raise AssertionError(f"{text!r} never showed; screen:\n{self.screen()}") from None

    def wait_idle(self) -> None:
        """Idle: the last line is the bare prompt and nothing is spinning."""
        wait_until(
            lambda: (lines := self.lines()) and lines[-1] == ">" and BUSY not in lines[-2],
            "the idle prompt",
        )

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "agent", *keys)

    def type(self, text: str) -> None:
        self.tmux("send-keys", "-t", "agent", "-l", text)

    def paste(self, text: str) -> None:
        self.tmux("load-buffer", "-b", "task", "-", input=text.encode())
        self.tmux("paste-buffer", "-p", "-d", "-b", "task", "-t", "agent")

    def exit_status(self) -> int | None:
        dead, status = self.tmux(
            "display", "-p", "-t", "agent", "#{pane_dead} #{pane_dead_status}"
        ).split()
        return int(status) if dead == "1" else None

    def close(self) -> None:
        subprocess.run(
            ["tmux", "-S", str(self.sock), "kill-server"],
            env=self.env,
            capture_output=True,
            check=False,
        )
        if self.sock.parent.name.startswith("corral-tmux-"):
            shutil.rmtree(self.sock.parent, ignore_errors=True)


@pytest.fixture
def hooks(tmp_path: Path) -> Hooks:
    return Hooks(tmp_path)


@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[Tmux]:
    server = Tmux(tmp_path)
    yield server
    server.close()


@pytest.fixture
def start(tmux: Tmux, hooks: Hooks, demo_repo: Path) -> Callable[..., None]:
    """Start the agent in the pane: `start(*args, wrapper=None)`."""

    def run(*args: str, wrapper: Path | None = None) -> None:
        argv = [sys.executable, str(AGENT), *args]
        if wrapper is not None:
            argv = ["sh", str(wrapper), *argv]
        tmux.start(demo_repo, argv, {"CORRAL_HOOK_CMD": hooks.command})

    return run


def test_a_task_spins_asks_permission_edits_and_returns_to_idle(
    start: Callable[..., None], tmux: Tmux, hooks: Hooks, demo_repo: Path
) -> None:
    start("--pace", "0.1", SLUG_TASK)
    tmux.wait_screen(BUSY)
    tmux.wait_screen(QUESTION + " textkit/slug.py?")
    last = tmux.lines()[-4:]
    assert last == [
        "Do you want to make this edit to textkit/slug.py?",
        "❯ 1. Yes",
        "  2. Yes, and don't ask again this session",
        "  3. No, and tell the demo agent what to do differently (esc)",
    ]
    hooks.wait("Notification")  # recorded before any answer
    assert "Stop" not in hooks.names()
    assert (demo_repo / "textkit/slug.py").read_text() != SLUG_FIX

    tmux.keys("1")
    events = hooks.wait("Stop")
    tmux.wait_idle()
    assert (demo_repo / "textkit/slug.py").read_text() == SLUG_FIX
    screen = tmux.screen()
    assert "Done: slugify() now folds accents." in screen
    assert QUESTION not in screen and BUSY not in screen  # dialog and spinner are erased

    names = [e["hook_event_name"] for e in events]
    assert names == [
        "SessionStart",
        "UserPromptSubmit",
        "PreToolUse",
        "Notification",
        "PostToolUse",
        "Stop",
    ]
    assert len({e["session_id"] for e in events}) == 1
    assert all(e["cwd"] == str(demo_repo) for e in events)
    by_name = {e["hook_event_name"]: e for e in events}
    assert by_name["UserPromptSubmit"]["prompt"] == SLUG_TASK
    assert by_name["PreToolUse"]["tool_name"] == "Write"
    assert by_name["PreToolUse"]["tool_input"]["file_path"] == str(demo_repo / "textkit/slug.py")
    assert by_name["Notification"]["message"] == (
        "Demo agent needs your permission to edit textkit/slug.py"
    )
    assert by_name["Stop"]["outcome"] == "done"
    check = subprocess.run(
        [sys.executable, "-c", "from textkit.slug import slugify; print(slugify('Crème Brûlée'))"],
        cwd=demo_repo,
        capture_output=True,
        text=True,
        check=True,
    )
    assert check.stdout.strip() == "creme-brulee"


def test_a_pasted_multiline_task_is_one_task_and_a_failure_follow_up_retries_it(
    start: Callable[..., None], tmux: Tmux, hooks: Hooks, demo_repo: Path
) -> None:
    start("--pace", "0.1")
    tmux.wait_idle()
    task = "Record this:\nsecond line\n\tthird line"
    tmux.paste(task)
    tmux.wait_screen("third line")
    assert tmux.lines()[-3:] == ["> Record this:", "  second line", "      third line"]
    time.sleep(0.2)
    assert "UserPromptSubmit" not in hooks.names()  # a paste does not submit

    tmux.keys("Enter")
    tmux.wait_screen(QUESTION + " DEMO_NOTES.md?")
    tmux.keys("Down")
    wait_until(lambda: "❯ 2. Yes, and don't ask again" in tmux.screen(), "the ❯ on option 2")
    tmux.keys("Enter")
    events = hooks.wait("Stop")
    prompts = [e["prompt"] for e in events if e["hook_event_name"] == "UserPromptSubmit"]
    assert prompts == [task]
    notes = "# Demo notes\n\n- Record this: second line third line\n"
    assert (demo_repo / "DEMO_NOTES.md").read_text() == notes

    tmux.wait_idle()
    tmux.type("The checks failed: task_recorded")
    tmux.keys("Enter")
    hooks.wait("Stop", 2)
    tmux.wait_idle()
    assert "Looking at the failing checks…" in tmux.screen()
    assert hooks.count("PreToolUse") == 2
    assert hooks.count("Notification") == 1  # option 2: not asked again
    assert (demo_repo / "DEMO_NOTES.md").read_text() == notes  # the line is not duplicated


def test_option_3_and_esc_decline_the_edit(
    start: Callable[..., None], tmux: Tmux, hooks: Hooks, demo_repo: Path
) -> None:
    before = {p: (demo_repo / p).read_text() for p in ("textkit/slug.py", "textkit/pages.py")}
    start("--pace", "0.1", SLUG_TASK)
    tmux.wait_screen(QUESTION)
    tmux.keys("3")
    events = hooks.wait("Stop")
    tmux.wait_idle()
    assert "Edit declined." in tmux.screen()
    assert events[-1]["outcome"] == "declined"

    tmux.type("Fix paginate() dropping the last page")
    tmux.keys("Enter")
    tmux.wait_screen(QUESTION + " textkit/pages.py?")
    tmux.keys("Escape")
    events = hooks.wait("Stop", 2)
    tmux.wait_idle()
    assert events[-1]["outcome"] == "declined"
    assert "PostToolUse" not in hooks.names()
    assert {p: (demo_repo / p).read_text() for p in before} == before
    assert not git(demo_repo, "status", "--porcelain").strip()


def test_esc_interrupts_the_work(
    start: Callable[..., None], tmux: Tmux, hooks: Hooks, demo_repo: Path
) -> None:
    start("--pace", "1", "Add a --json flag to the word-count report")
    tmux.wait_screen("Planning the --json flag")
    assert BUSY in tmux.lines()[-1]
    tmux.keys("Escape")
    events = hooks.wait("Stop")
    tmux.wait_idle()
    assert "Interrupted by user" in tmux.screen()
    assert events[-1]["outcome"] == "interrupted"
    assert "PreToolUse" not in hooks.names()
    assert (demo_repo / "textkit/report.py").read_text() != REPORT_JSON


@pytest.fixture
def wrapper(tmp_path: Path) -> Path:
    """Runs the agent from a shell that records the tty modes before and
    after, the agent's pid and its exit status."""
    script = tmp_path / "run.sh"
    d = shlex.quote(str(tmp_path))
    script.write_text(
        f"stty -g > {d}/stty.before\n"
        f'sh -c \'echo $$ > "$0/agent.pid"; exec "$@"\' {d} "$@"\n'
        "status=$?\n"
        f"stty -g > {d}/stty.after\n"
        f"echo $status > {d}/rc.tmp && mv {d}/rc.tmp {d}/rc\n"
    )
    return script


def exit_of(tmp_path: Path) -> int:
    wait_until(lambda: (tmp_path / "rc").exists(), "the agent to exit")
    assert (tmp_path / "stty.after").read_text() == (tmp_path / "stty.before").read_text()
    return int((tmp_path / "rc").read_text())


@pytest.mark.parametrize(
    "keys", [["-l", "/exit"], ["C-c"], ["C-d"]], ids=["exit", "ctrl-c", "ctrl-d"]
)
def test_leaving_exits_0_restores_the_terminal_and_ends_the_session(
    start: Callable[..., None],
    tmux: Tmux,
    hooks: Hooks,
    wrapper: Path,
    tmp_path: Path,
    keys: list[str],
) -> None:
    start("--pace", "0.1", wrapper=wrapper)
    tmux.wait_idle()
    tmux.keys(*keys)
    if keys[-1] == "/exit":
        tmux.keys("Enter")
    assert exit_of(tmp_path) == 0
    events = hooks.wait("SessionEnd")
    assert [e["hook_event_name"] for e in events] == ["SessionStart", "SessionEnd"]
    assert events[-1]["reason"] == "prompt_input_exit"


@pytest.mark.parametrize("in_hook", [False, True], ids=["waiting", "inside-a-hook"])
def test_sigterm_restores_the_terminal_and_exits_143(
    start: Callable[..., None],
    tmux: Tmux,
    hooks: Hooks,
    wrapper: Path,
    tmp_path: Path,
    in_hook: bool,
) -> None:
    if in_hook:
        hooks.slow.write_text("Notification")
    start("--pace", "0.1", SLUG_TASK, wrapper=wrapper)
    tmux.wait_screen(QUESTION)
    hooks.wait("Notification")
    began = time.monotonic()
    os.kill(int((tmp_path / "agent.pid").read_text()), signal.SIGTERM)
    assert exit_of(tmp_path) == 143
    assert time.monotonic() - began < 3  # a lingering hook does not hold the exit up
    assert hooks.wait("SessionEnd")[-1]["reason"] == "other"


def test_without_a_tty_it_runs_the_argv_task_and_exits(hooks: Hooks, demo_repo: Path) -> None:
    env = {**os.environ, "CORRAL_HOOK_CMD": hooks.command}
    proc = subprocess.run(
        [sys.executable, str(AGENT), "--pace", "0.1", "Fix the off-by-one in paginate()"],
        cwd=demo_repo,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert proc.returncode == 0, proc.stderr
    assert "corral demo agent (scripted — not a model)" in proc.stdout
    assert "Done: the last, shorter page is kept." in proc.stdout
    assert "\x1b" not in proc.stdout
    assert (demo_repo / "textkit/pages.py").read_text() == PAGES_FIX
    assert hooks.names() == [
        "SessionStart",
        "UserPromptSubmit",
        "PreToolUse",
        "PostToolUse",
        "Stop",
        "SessionEnd",
    ]

    no_task = subprocess.run(
        [sys.executable, str(AGENT)],
        cwd=demo_repo,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert no_task.returncode == 2 and "give the task" in no_task.stderr


def test_failing_hooks_do_not_stop_the_agent(demo_repo: Path) -> None:
    for command in ("exit 7 #", "/nonexistent/hook", "echo {{{ >&2; kill -9 $$ #"):
        proc = subprocess.run(
            [sys.executable, str(AGENT), "--pace", "0", "note this down"],
            cwd=demo_repo,
            env={**os.environ, "CORRAL_HOOK_CMD": command},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=20,
        )
        assert proc.returncode == 0, (command, proc.stderr)
        assert "Done: recorded the task in DEMO_NOTES.md." in proc.stdout


def test_recipes_carry_the_demo_fixes_for_the_demo_intents() -> None:
    data = json.loads(RECIPES.read_text(encoding="utf-8"))
    expected = dict(
        zip(DEMO_INTENTS, [[SLUG_FIX], [REPORT_JSON, README_JSON], [PAGES_FIX]], strict=True)
    )
    for intent, contents in expected.items():
        recipe = next(r for r in data["recipes"] if any(k in intent.lower() for k in r["keywords"]))
        assert [e["content"] for e in recipe["edits"]] == contents
    assert data["fallback"]["edits"][0]["path"] == "DEMO_NOTES.md"


def test_the_agent_is_stdlib_only() -> None:
    tree = ast.parse(AGENT.read_text(encoding="utf-8"))
    modules = {
        (node.module if isinstance(node, ast.ImportFrom) else alias.name).split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    assert modules <= set(sys.stdlib_module_names) | {"__future__"}
