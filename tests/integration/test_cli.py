"""The `corral` command as a user runs it (real subprocesses, real git)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from corral.supervisor.api import Supervisor
from corral.supervisor.sandbox import sandbox_status
from corral.supervisor.states import label
from tests.conftest import fast_config, git, hello_contract, init_repo

REPO_ROOT = Path(__file__).resolve().parents[2]


def notes_contract(path: Path) -> Path:
    """A contract the demo agent satisfies: its notes file exists."""
    check = {"name": "noted", "command": "grep -q notes DEMO_NOTES.md", "timeout_secs": 10}
    path.write_text(json.dumps({"description": "notes record the task", "checks": [check]}))
    return path


# confirm, let the demo agent work (approving its question), deliver to a branch
DELIVER_WITH_THE_DEMO_AGENT = (
    "--yes",
    "--deliver",
    "branch",
    "--json",
    "--engine",
    "external:demo",
    "--on-question",
    "approve",
)


def corral(
    *args: str, home: Path, cwd: Path | None = None, user_home: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, CORRAL_HOME=str(home), CORRAL_CONFIG=str(home / "none.toml"))
    if user_home is not None:
        env["HOME"] = str(user_home)
    env["CORRAL_TMUX_SOCKET_DIR"] = str(home / "tmux")
    env["PYTHONPATH"] = str(REPO_ROOT)
    return subprocess.run(
        [sys.executable, "-m", "corral.tui.cli", *args],
        cwd=str(cwd or REPO_ROOT),
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_version_and_help(tmp_path: Path) -> None:
    out = corral("--version", home=tmp_path)
    assert out.returncode == 0 and out.stdout.startswith("corral ")
    out = corral("--help", home=tmp_path)
    assert out.returncode == 0
    for word in ("demo", "doctor", "sessions", "worktrees", "run"):
        assert word in out.stdout


def test_a_non_git_directory_gets_one_line_that_says_what_to_do(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    out = corral(home=tmp_path / "home", cwd=plain)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "is not a git repository" in lines[0] and "--repo" in lines[0]


@pytest.mark.slow
def test_a_plain_folder_in_a_home_that_is_a_git_repository_gets_one_line(tmp_path: Path) -> None:
    """`corral run` from a folder under a dotfiles repository at $HOME is
    refused with one sentence, not run on the whole home."""
    home = init_repo(tmp_path / "home")
    scratch = home / "scratch"
    scratch.mkdir()
    out = corral(
        "run",
        "--intent",
        "tidy up",
        "--engine",
        "external:demo",
        "--yes",
        home=tmp_path / "state",
        cwd=scratch,
        user_home=home,
    )
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert "your home directory" in lines[0] and "git init" in lines[0]
    assert not (tmp_path / "state" / "worktrees").exists()


def test_a_relative_corral_home_is_refused(tmp_path: Path) -> None:
    env = dict(os.environ, CORRAL_HOME="relative/dir", PYTHONPATH=str(REPO_ROOT))
    out = subprocess.run(
        [sys.executable, "-m", "corral.tui.cli", "sessions"],
        env=env,
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert out.returncode == 2
    assert "CORRAL_HOME must be an absolute path" in out.stderr


def test_doctor_reports_each_requirement(tmp_path: Path) -> None:
    out = corral("doctor", home=tmp_path)
    assert out.returncode == 0, out.stderr
    for word in ("python", "git", "tmux", "sandbox", "agent claude", "model", "state dir"):
        assert word in out.stdout
    assert "sessions" in out.stdout
    if sandbox_status().available:  # confined unless the operator opts out
        assert "ok  agents         confined, network by allow-list: every agent" in out.stdout
    else:
        assert "!!  agents         unconfined: no sandbox can run here" in out.stdout


def test_doctor_says_what_each_confined_agent_may_reach(tmp_path: Path) -> None:
    (tmp_path / "none.toml").write_text(
        '[sandbox]\nnetwork_allow = ["pypi.org", "127.0.0.1:8080"]\n'
    )
    out = corral("doctor", home=tmp_path)
    assert out.returncode == 0, out.stderr
    if not sandbox_status().available:
        return  # agents run unconfined here: nothing to list
    claude = next(line for line in out.stdout.splitlines() if "claude net" in line)
    assert "only api.anthropic.com" in claude and "pypi.org, 127.0.0.1:8080" in claude
    direct = next(line for line in out.stdout.splitlines() if "direct net" in line)
    assert "a connection not through the proxy is refused" in direct
    (tmp_path / "none.toml").write_text('[sandbox]\nnetwork = "host"\n')
    out = corral("doctor", home=tmp_path)
    assert 'confined, the host\'s network ([sandbox] network = "host": unsafe)' in out.stdout
    assert "agents on the host's network (unsafe)" in out.stdout  # the board's header says it too
    (tmp_path / "none.toml").write_text('[sandbox]\nnetwork_allow = ["pypi org"]\n')
    out = corral("doctor", home=tmp_path)
    assert "'pypi org' is not a host: write pypi.org" in out.stdout + out.stderr


@pytest.mark.slow
def test_doctor_reports_the_agents_sandbox_setting(tmp_path: Path) -> None:
    (tmp_path / "none.toml").write_text("[agents.aider]\nsandbox = false\n")
    out = corral("doctor", home=tmp_path)
    lines = out.stdout.splitlines()
    agents = next(line for line in lines if " agents " in line)
    if sandbox_status().available:
        assert agents.endswith("confined, network by allow-list: every agent except aider")
        assert any(line.endswith("agents unconfined: aider (sandbox = false)") for line in lines)
    else:
        assert agents.startswith("!!") and "no sandbox can run here" in agents
    (tmp_path / "none.toml").write_text("[sandbox]\nagents = false\n")
    out = corral("doctor", home=tmp_path)
    agents = next(line for line in out.stdout.splitlines() if " agents " in line)
    assert "unconfined ([sandbox] agents = false)" in agents and "pane keeper" in agents


@pytest.mark.slow
def test_run_says_on_stderr_when_checks_will_run_unconfined(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "none.toml").write_text("[sandbox]\nenabled = false\n")
    plain = tmp_path / "plain"
    plain.mkdir()
    out = corral("run", "--intent", "x", home=home, cwd=plain)
    first = out.stderr.strip().splitlines()[0]
    assert first.startswith("corral: sandbox off ([sandbox] enabled = false)")
    assert "unconfined" in first


def test_doctor_fails_with_a_clear_line_for_a_broken_config(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[supervisor\nnope")
    env = dict(os.environ, CORRAL_HOME=str(tmp_path), CORRAL_CONFIG=str(bad))
    env["PYTHONPATH"] = str(REPO_ROOT)
    out = subprocess.run(
        [sys.executable, "-m", "corral.tui.cli", "doctor"], env=env, capture_output=True, text=True
    )
    assert out.returncode == 1
    assert f"missing: fix the config file: {bad}: not valid TOML" in out.stderr


@pytest.mark.parametrize("command", [["sessions"], ["status"], ["agents"], ["get", "x"]])
def test_every_command_says_when_the_config_file_is_broken(
    tmp_path: Path, command: list[str]
) -> None:
    (tmp_path / "none.toml").write_text("[supervisor\nnope")
    out = corral(*command, home=tmp_path)
    assert f"corral: warning: {tmp_path / 'none.toml'}: not valid TOML" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.slow
async def test_sessions_lists_while_a_console_owns_the_state_dir(tmp_path: Path) -> None:
    from tests.fakes.scripted import ScriptedDrafter, ScriptedEngine, ScriptedEngines, Write

    home = tmp_path / "home"
    repo = init_repo(tmp_path / "repo")
    sup = Supervisor(
        home,
        drafter=ScriptedDrafter([hello_contract()]),
        engines=ScriptedEngines(ScriptedEngine([[Write("hello.txt", "hi\n")]])),
        config=fast_config(),
    )
    await sup.open()
    try:
        sid = (await sup.start("say hi", repo)).session_id
        out = corral("sessions", "--json", home=home)
        assert out.returncode == 0, out.stderr
        rows = json.loads(out.stdout)
        assert [r["session_id"] for r in rows] == [sid]
        assert rows[0]["state"] == "contract_proposed"
        # a second owner is refused, naming the holder
        out = corral(
            "run", "--repo", str(repo), "--intent", "x", "--engine", "external:demo", home=home
        )
        assert out.returncode == 2
        assert f"pid {os.getpid()}" in out.stderr
        out = corral("worktrees", home=home)
        assert out.returncode == 0 and "corral-" in out.stdout
        out = corral("worktrees", "--json", home=home)
        assert out.returncode == 0, out.stderr
        [tree] = json.loads(out.stdout)
        assert list(tree) == [
            "path",
            "session",
            "session_state",
            "lease",
            "note",
            "exists",
            "clean",
        ]
        assert tree["session_state"] == "contract_proposed" and tree["exists"] is True
        # pruning changes the state dir: refused while a console owns it
        out = corral("worktrees", "prune", "--dry-run", home=home)
        assert out.returncode == 2 and "close the console first" in out.stderr
    finally:
        await sup.close()
    out = corral("worktrees", "prune", home=home)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["0 removed, 0 kept"]  # its session still needs it


@pytest.mark.slow
def test_run_exit_codes_and_json_events(tmp_path: Path) -> None:
    home = tmp_path / "home"
    repo = init_repo(tmp_path / "repo")
    contract = tmp_path / "c.json"
    contract.write_text(
        json.dumps(
            {
                "description": "notes record the task",
                "checks": [
                    {
                        "name": "noted",
                        "command": "grep -q 'write notes' DEMO_NOTES.md",
                        "timeout_secs": 10,
                    }
                ],
            }
        )
    )
    # without --yes: stops at the contract gate
    out = corral(
        "run",
        "--repo",
        str(repo),
        "--intent",
        "write notes",
        "--contract",
        str(contract),
        "--engine",
        "external:demo",
        home=home,
    )
    assert out.returncode == 3, out.stderr
    # it says which session waits, and how to go on (the id every command takes)
    waiting = json.loads(corral("sessions", "--json", home=home).stdout)[0]["session_id"]
    assert f"corral run: session {waiting} waits at gate 1" in out.stdout, out.stdout
    # with --yes and --deliver: delivered, JSON lines end with a result
    out = corral(
        "run",
        "--repo",
        str(repo),
        "--intent",
        "write notes",
        "--contract",
        str(contract),
        *DELIVER_WITH_THE_DEMO_AGENT,
        home=home,
    )
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    kinds = [r["kind"] for r in rows]
    assert "contract_evaluated" in kinds and kinds[-1] == "result"
    evaluated = next(r for r in rows if r["kind"] == "contract_evaluated")
    assert evaluated["data"]["by"] == "runtime" and evaluated["data"]["passed"] is True
    branch = rows[-1]["result_branch"]
    assert "write notes" in git(repo, "show", f"{branch}:DEMO_NOTES.md")
    # delivered: its agent was stopped before `corral run` exited
    out = corral("panes", home=home)
    assert "no corral panes are running" in out.stdout, out.stdout
    # stopped at the approval gate: the agent is left running, and stderr says so
    out = corral(
        "run", "--repo", str(repo), "--intent", "write notes again", "--contract", str(contract),
        "--yes", "--engine", "external:demo", "--on-question", "approve", "--json", home=home,
    )  # fmt: skip
    assert out.returncode == 5, out.stderr
    sid = json.loads(out.stdout.splitlines()[-1])["session_id"]
    assert "is still running" in out.stderr and sid in out.stderr
    panes = corral("panes", home=home)
    assert sid[-8:] in panes.stdout and "alive" in panes.stdout
    out = corral("panes", "stop", sid, home=home)
    assert out.returncode == 0 and "stopped %" in out.stdout, out.stderr
    assert "no corral panes are running" in corral("panes", home=home).stdout
    # a malformed contract file is one clear line
    contract.write_text('{"checks": [{"name": "bad name", "command": ""}]}')
    out = corral(
        "run", "--repo", str(repo), "--intent", "x", "--contract", str(contract), home=home
    )
    assert out.returncode == 2
    assert "the name must contain only letters" in out.stderr
    assert "the command is empty" in out.stderr
    # prune: the pending gate session keeps its worktree; nothing dirty is removed
    out = corral("worktrees", "prune", "--dry-run", home=home)
    assert out.returncode == 0, out.stderr


def test_panes_lists_strays_without_killing_them(tmp_path: Path) -> None:
    from corral.supervisor.panes.base import PaneSpec
    from corral.supervisor.panes.tmux import TmuxBackend

    home = tmp_path / "home"
    out = corral("panes", home=home)
    assert out.returncode == 0 and "no corral panes are running" in out.stdout
    backend = TmuxBackend(socket_dir=home / "tmux")
    spec = PaneSpec(
        session_id="0123456789abcdef01234567",
        incarnation=1,
        name="stray",
        cwd=tmp_path,
        argv=["sleep", "30"],
        env={"PATH": os.environ["PATH"]},
    )
    handle = backend.spawn(spec)
    try:
        out = corral("panes", home=home)
        assert out.returncode == 0, out.stderr
        assert "STRAY (no session)" in out.stdout and handle.pane_id in out.stdout
        assert handle.owner in backend.sweep()  # listed, not killed
        # the exact command that attaches to this server (its socket, not -L corral)
        assert f"tmux -S {home / 'tmux' / 'corral'} attach" in out.stdout
        assert "watch them all: " in out.stdout and "-L corral" not in out.stdout
    finally:
        backend.kill_server()


def _store_sessions(
    home: Path, n: int, intent: str = "Task number {i}", repo: str = "/src/repo"
) -> None:
    from corral.supervisor.models import CoderSession
    from corral.supervisor.states import CoderState
    from corral.supervisor.store import Store

    store = Store(home)
    for i in range(n):
        store.save_session(
            CoderSession(
                id=f"{i:024x}",
                repo=repo,
                intent=intent.format(i=i),
                state=CoderState.MERGED,
                created_at=1_700_000_000 + i,
                updated_at=1_700_000_000 + i,
                engine="external:claude",
            )
        )
    store.close()


@pytest.mark.parametrize("command", ["sessions", "sessions --json"])
def test_a_reader_that_goes_away_ends_the_command_quietly(tmp_path: Path, command: str) -> None:
    home = tmp_path / "home"
    _store_sessions(home, 2000)
    env = dict(os.environ, CORRAL_HOME=str(home), CORRAL_CONFIG=str(home / "none.toml"))
    env["PYTHONPATH"] = str(REPO_ROOT)
    # `head -1` reads one line and closes the pipe; bash reports corral's own exit code
    out = subprocess.run(
        ["bash", "-c", f"set -o pipefail; {sys.executable} -m corral.tui.cli {command} | head -1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert len(out.stdout.splitlines()) == 1
    assert "Traceback" not in out.stderr and "BrokenPipe" not in out.stderr, out.stderr
    assert out.stderr == ""
    assert out.returncode in (0, 141)


@pytest.mark.slow
def test_the_listing_cuts_each_intent_to_one_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    huge = "Rewrite the parser " + "so that every clause is handled " * 4000  # ~120 KB
    _store_sessions(home, 1, intent=huge)
    _store_sessions(home / "two", 1, intent="first line\nsecond line")
    out = corral("sessions", home=home)
    assert out.returncode == 0, out.stderr
    [line, note] = out.stdout.splitlines()
    assert len(line) <= 160 and line.endswith("…")
    assert "Rewrite the parser so that" in line
    assert note == f"(as stored: no corral owns {home} now, so none of these is live)"
    [line, _note] = corral("sessions", home=home / "two").stdout.splitlines()
    assert line.endswith("first line…")
    out = corral("sessions", "--json", home=home)
    assert json.loads(out.stdout)[0]["intent"] == huge


def test_run_help_and_the_readme_list_every_exit_code(tmp_path: Path) -> None:
    import re

    out = corral("run", "--help", home=tmp_path)
    assert out.returncode == 0
    listed = dict(re.findall(r"^  (\d+)  (.+)$", out.stdout, re.M))
    assert set(listed) == {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "130", "141"}
    readme = (REPO_ROOT / "README.md").read_text()
    section = readme[readme.index("`corral run` runs one session") :]
    section = section[: section.index("\n\n")]
    for code in listed:
        assert re.search(rf"\b{code}\b", section), code
    source = (REPO_ROOT / "tui" / "cli" / "run.py").read_text()
    for code in re.findall(r"CoderState\.\w+: (\d+)", source):
        assert code in listed


@pytest.mark.slow
def test_run_whose_delivery_is_refused_says_so_and_exits_7(tmp_path: Path) -> None:
    home = tmp_path / "home"
    repo = init_repo(tmp_path / "repo")
    git(repo, "branch", "corral")  # refs/heads/corral/<id> cannot be created next to it
    contract = notes_contract(tmp_path / "c.json")
    out = corral(
        "run",
        "--repo",
        str(repo),
        "--intent",
        "write notes",
        "--contract",
        str(contract),
        *DELIVER_WITH_THE_DEMO_AGENT,
        home=home,
    )
    # the session waits at approval, so its agent is left running on purpose
    stop = corral("panes", "stop", "--all", home=home)
    assert stop.returncode == 0, stop.stderr
    assert out.returncode == 7, (out.stdout, out.stderr)
    assert "delivery refused, the session waits at approval" in out.stderr
    assert "Traceback" not in out.stderr
    result = json.loads(out.stdout.splitlines()[-1])
    assert result["state"] == "needs_approval" and result["exit_code"] == 7
    rows = json.loads(corral("sessions", "--json", home=home).stdout)
    assert rows[0]["state"] == "needs_approval"


def _mount_tmpfs(where: Path, size: str) -> None:
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    where.mkdir(parents=True, exist_ok=True)
    out = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {out.stderr.strip()}")


@pytest.mark.slow
@pytest.mark.parametrize(
    "fills_after",
    ["starting → working", "started demo in pane"],
    ids=["before-the-agent-starts", "once-the-agent-runs"],
)
def test_a_full_disk_is_one_line_a_prompt_exit_and_a_consistent_store(
    tmp_path: Path, fills_after: str
) -> None:
    import time

    home = tmp_path / "home"
    repo = init_repo(tmp_path / "repo")
    contract = notes_contract(tmp_path / "c.json")
    _mount_tmpfs(home, "8m")
    try:
        env = dict(os.environ, CORRAL_HOME=str(home), CORRAL_CONFIG=str(tmp_path / "none.toml"))
        env["CORRAL_TMUX_SOCKET_DIR"] = str(tmp_path / "tmux")
        env["PYTHONPATH"] = str(REPO_ROOT)
        argv = [sys.executable, "-m", "corral.tui.cli", "run", "--repo", str(repo)]
        argv += ["--intent", "write notes", "--contract", str(contract), "--yes"]
        argv += ["--deliver", "branch", "--engine", "external:demo", "--on-question", "approve"]
        proc = subprocess.Popen(
            argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None
        for line in proc.stdout:  # now the disk fills up (while the agent's
            # start is written: its sandbox's files, its pane's record; or once it runs)
            if fills_after in line:
                break
        filler = home / "filler"
        with open(filler, "wb", buffering=0) as f, contextlib.suppress(OSError):
            while True:
                f.write(bytes(65536))
        started = time.monotonic()
        stdout, stderr = proc.communicate(timeout=60)
        assert time.monotonic() - started < 60
        assert proc.returncode == 8, (stdout, stderr)
        assert "Traceback" not in stderr
        [line] = stderr.strip().splitlines()
        assert f"the disk holding the state dir {home} is full (" in line and "KB free" in line
        filler.unlink()
        out = corral("sessions", "--json", home=home)
        [row] = json.loads(out.stdout)
        assert row["state"] == "failed" and "is full" in row["error"]
        # a store too small to open at all is the same one line
        (home / "filler").write_bytes(b"")
        for name in os.listdir(home):
            if name not in ("filler",):
                subprocess.run(["rm", "-rf", str(home / name)], check=True)
        with open(filler, "wb", buffering=0) as f, contextlib.suppress(OSError):
            while True:
                f.write(bytes(4096))
        out = corral(
            "run", "--repo", str(repo), "--intent", "x", "--engine", "external:demo", home=home
        )
        assert out.returncode == 8 and "Traceback" not in out.stderr, out.stderr
        [line] = out.stderr.strip().splitlines()
        assert f"the disk holding the state dir {home} is full" in line
    finally:
        socket = tmp_path / "tmux" / "corral"
        subprocess.run(["tmux", "-S", str(socket), "kill-server"], capture_output=True)
        subprocess.run(["umount", "-l", str(home)], capture_output=True)


@pytest.mark.slow
def test_panes_stop_stops_strays_and_says_so_once_they_are_gone(tmp_path: Path) -> None:
    from corral.supervisor.panes.base import PaneSpec
    from corral.supervisor.panes.tmux import TmuxBackend

    home = tmp_path / "home"
    backend = TmuxBackend(socket_dir=home / "tmux")
    spec = PaneSpec(
        session_id="0123456789abcdef01234567",
        incarnation=1,
        name="stray",
        cwd=tmp_path,
        argv=["sleep", "30"],
        env={"PATH": os.environ["PATH"]},
    )
    try:
        out = corral("panes", "stop", home=home)
        assert out.returncode == 2 and "--strays" in out.stderr
        handle = backend.spawn(spec)
        out = corral("panes", "stop", "nosuchsession", home=home)
        assert out.returncode == 1 and "nothing stopped" in out.stdout
        assert handle.owner in backend.sweep()
        out = corral("panes", "stop", "--strays", home=home)
        assert out.returncode == 0, out.stderr
        assert f"stopped {handle.pane_id}" in out.stdout and "STRAY" in out.stdout
        assert handle.owner not in backend.sweep()
        second = backend.spawn(PaneSpec(**{**spec.__dict__, "incarnation": 2}))
        out = corral("panes", "stop", second.owner, home=home)
        assert out.returncode == 0 and f"stopped {second.pane_id}" in out.stdout
        assert backend.sweep() == {}
    finally:
        backend.kill_server()


@pytest.mark.slow
def test_sessions_lists_one_repository_given_any_path_in_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    mine = init_repo(tmp_path / "mine")
    (mine / "src").mkdir()
    _store_sessions(home, 2, intent="mine {i}", repo=str(mine))
    from corral.supervisor.models import CoderSession
    from corral.supervisor.states import CoderState
    from corral.supervisor.store import Store

    store = Store(home)
    store.save_session(
        CoderSession(id="f" * 24, repo=str(tmp_path / "other"), intent="theirs",
                     state=CoderState.FAILED, created_at=1.0, updated_at=1.0)
    )  # fmt: skip
    store.close()
    out = corral("sessions", "--repo", str(mine / "src"), home=home)
    assert out.returncode == 0, out.stderr
    listed = [line for line in out.stdout.splitlines() if not line.startswith("(as stored")]
    assert len(listed) == 2 and all("mine " in line for line in listed)
    rows = json.loads(corral("sessions", "--json", "--repo", str(mine), home=home).stdout)
    assert sorted(r["intent"] for r in rows) == ["mine 0", "mine 1"]
    out = corral("sessions", "--repo", str(tmp_path / "nowhere"), home=home)
    assert out.returncode == 2
    assert "is not in a git repository: pass a path inside one" in out.stderr


@pytest.mark.slow
def test_status_counts_the_stored_board_and_the_tmux_segment_is_empty_when_idle(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    _store_sessions(home, 3)  # merged: finished
    out = corral("status", home=home)
    assert out.returncode == 0, out.stderr
    assert out.stdout == (
        "0 need you · 0 in progress · 3 finished (as stored: no corral owns the state dir now)\n"
    )
    out = corral("status", "--tmux", home=home)
    assert out.returncode == 0 and out.stdout == ""  # nothing in progress: no room taken


@pytest.mark.slow
def test_run_takes_its_checks_on_the_command_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    repo = init_repo(tmp_path / "repo")
    check = "grep -q 'write notes' DEMO_NOTES.md"
    out = corral(
        "run", "--repo", str(repo), "--intent", "write notes", "--check", check,
        *DELIVER_WITH_THE_DEMO_AGENT, home=home,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    proposed = next(r for r in rows if r["kind"] == "contract_proposed")
    assert [c["command"] for c in proposed["data"]["contract"]["checks"]] == [check]
    branch = rows[-1]["result_branch"]
    assert "Corral-Check: check_1_grep pass" in git(repo, "log", "-1", "--format=%B", branch)
    contract = notes_contract(tmp_path / "c.json")
    out = corral(
        "run", "--repo", str(repo), "--intent", "x", "--contract", str(contract),
        "--check", "true", home=home,
    )  # fmt: skip
    assert out.returncode == 2
    assert "as --contract FILE or as --check commands, not both" in out.stderr


@pytest.mark.slow
def test_a_headless_run_leaves_a_question_only_a_person_can_answer_and_says_what_it_asks(
    tmp_path: Path,
) -> None:
    """A check that cannot run after the agent's turn asks the operator to fix
    the environment ('verify again' or 'stop'): `--on-question deny` has no
    refusal among those, so the run leaves it waiting (exit 4) and prints the
    question itself, which names the check and why."""
    home = tmp_path / "home"
    repo = init_repo(tmp_path / "repo")
    check = "if [ -f gone.txt ]; then exec no-such-tool; fi; test -f done.txt"
    out = corral(
        "run", "--repo", str(repo), "--intent", "write done", "--check", check, "--yes",
        "--on-question", "deny", "--engine", "custom:sh -c 'echo > gone.txt'", home=home,
    )  # fmt: skip
    assert out.returncode == 4, out.stderr
    said = out.stderr.splitlines()[-1]
    assert said.startswith("corral run: --on-question deny cannot answer this"), out.stderr
    assert "cannot run here (check_1_if: command not found: no-such-tool)" in said
    assert "verify again, stop" in said
    subprocess.run(["tmux", "-S", str(home / "tmux" / "corral"), "kill-server"],
                   capture_output=True)  # fmt: skip


@pytest.mark.slow
def test_an_owning_run_keeps_a_second_runs_session_until_it_reaches_its_gate(
    tmp_path: Path,
) -> None:
    """Two overlapping `corral run`s: the first owns the state dir and its own
    session ends first; it stays until the second's session reaches
    approval, so the second run ends at its gate (exit 5), not dropped (2)."""
    import time

    home = tmp_path / "home"
    repo = init_repo(tmp_path / "repo")
    env = dict(os.environ, CORRAL_HOME=str(home), CORRAL_CONFIG=str(tmp_path / "none.toml"))
    env["CORRAL_TMUX_SOCKET_DIR"] = str(tmp_path / "tmux")
    env["PYTHONPATH"] = str(REPO_ROOT)

    def run(name: str) -> subprocess.Popen[str]:
        """A run whose agent finishes once the test writes `go` into its worktree."""
        agent = f"while [ ! -f go ]; do sleep 0.1; done; echo {name} > {name}.txt"
        argv = [sys.executable, "-m", "corral.tui.cli", "run", "--repo", str(repo)]
        argv += ["--intent", f"write {name}", "--check", f"test -f {name}.txt", "--yes"]
        argv += ["--engine", f"custom:sh -c '{agent}'"]
        return subprocess.Popen(
            argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )

    def row_when(intent: str, state: str) -> dict[str, Any]:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            listed = subprocess.run(
                [sys.executable, "-m", "corral.tui.cli", "sessions", "--json"],
                env=env, capture_output=True, text=True,
            )  # fmt: skip
            for row in json.loads(listed.stdout or "[]") if listed.returncode == 0 else []:
                if row["intent"] == intent and row["state"] == state and row["worktree"]:
                    return row  # type: ignore[no-any-return]
            time.sleep(0.2)
        raise AssertionError(f"no {state} session for {intent!r}: {listed.stdout}")

    first = run("first")
    deadline = time.monotonic() + 60
    while not (home / "control.sock").exists():  # the first run owns the state dir now
        assert time.monotonic() < deadline and first.poll() is None, first.communicate()
        time.sleep(0.1)
    first_tree = Path(row_when("write first", "running")["worktree"])
    second = run("second")
    second_tree = Path(row_when("write second", "running")["worktree"])
    (first_tree / "go").write_text("")  # the owner's own session ends first...
    row_when("write first", "needs_approval")
    assert first.poll() is None, first.communicate()  # ...and the owner stays
    (second_tree / "go").write_text("")
    out2, err2 = second.communicate(timeout=120)
    out1, err1 = first.communicate(timeout=60)
    assert first.returncode == 5, (out1, err1)
    assert "other clients started here still run" in err1
    assert "a client of the corral that owns" in err2
    assert second.returncode == 5, (out2, err2)  # at its approval gate, not dropped
    subprocess.run(["tmux", "-S", str(tmp_path / "tmux" / "corral"), "kill-server"],
                   capture_output=True)  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize(
    "interrupt_after",
    ["engine external:demo", "started demo in pane", "question:"],
    ids=["while-the-contract-is-made", "while-the-agent-works", "waiting-on-its-question"],
)
def test_ctrl_c_stops_corral_run_at_once_and_says_what_it_leaves(
    tmp_path: Path, interrupt_after: str
) -> None:
    """SIGINT in any state ends `corral run` within a second or so (it used to
    wait for Enter at an agent's question), exit 130, with one line naming
    the session, its state and its kept worktree."""
    import signal
    import time

    home = tmp_path / "home"
    repo = init_repo(tmp_path / "repo")
    contract = notes_contract(tmp_path / "c.json")
    env = dict(os.environ, CORRAL_HOME=str(home), CORRAL_CONFIG=str(tmp_path / "none.toml"))
    env["CORRAL_TMUX_SOCKET_DIR"] = str(tmp_path / "tmux")
    env["PYTHONPATH"] = str(REPO_ROOT)
    argv = [sys.executable, "-m", "corral.tui.cli", "run", "--repo", str(repo)]
    argv += ["--intent", "write notes", "--contract", str(contract), "--yes"]
    argv += ["--engine", "external:demo"]  # --on-question ask: it reads stdin
    keyboard, typed = os.pipe()  # stdin stays open: nobody presses Enter
    proc = subprocess.Popen(
        argv, env=env, stdin=keyboard, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if interrupt_after in line:
                break
        if interrupt_after == "question:":
            time.sleep(0.3)  # its options printed: it reads the answer now
        started = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=30)
        took = time.monotonic() - started
        assert proc.returncode == 130, stderr
        assert took < 2.0, f"Ctrl-C took {took:.2f}s"
        assert "Traceback" not in stderr
        [said] = [ln for ln in stderr.splitlines() if ln.startswith("corral run: interrupted")]
        sid = json.loads(corral("sessions", "--json", home=home).stdout)[0]["session_id"]
        assert label(sid) in said and "is left" in said
        assert "its worktree" in said and "is kept" in said
        if interrupt_after == "question:":
            assert "needing you (question" in said
    finally:
        os.close(typed)
        os.close(keyboard)
        if proc.poll() is None:
            proc.kill()
        subprocess.run(
            ["tmux", "-S", str(tmp_path / "tmux" / "corral"), "kill-server"], capture_output=True
        )


@pytest.mark.slow
@pytest.mark.parametrize("free_kb", [200, 700, 2000])
def test_a_disk_nearly_full_when_corral_run_starts_is_exit_8_and_one_line(
    tmp_path: Path, free_kb: int
) -> None:
    """Already nearly full at the start: refused before anything is written,
    one line (it used to hang at `created`, fail as a contract derivation
    error, or say the store was corrupt, depending on how much was left)."""
    home = tmp_path / "home"
    _mount_tmpfs(home, "8m")
    try:
        repo = init_repo(home / "repo")  # the repository on the same disk, as at home
        contract = notes_contract(tmp_path / "c.json")
        free = shutil.disk_usage(home).free
        with open(home / "filler", "wb") as f:
            f.write(bytes(max(0, free - free_kb * 1024)))
        env = dict(os.environ, CORRAL_HOME=str(home / "state"))
        env["CORRAL_CONFIG"] = str(tmp_path / "none.toml")
        env["CORRAL_TMUX_SOCKET_DIR"] = str(tmp_path / "tmux")
        env["PYTHONPATH"] = str(REPO_ROOT)
        argv = [sys.executable, "-m", "corral.tui.cli", "run", "--repo", str(repo)]
        argv += ["--intent", "write notes", "--contract", str(contract), "--yes"]
        argv += ["--deliver", "branch", "--engine", "external:demo", "--on-question", "approve"]
        out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
        assert out.returncode == 8, (out.stdout, out.stderr)
        [line] = out.stderr.strip().splitlines()
        assert f"the disk holding the state dir {home / 'state'} is" in line
        assert "KB free" in line and "nothing was started" in line
        assert not (home / "state" / "worktrees").exists()
    finally:
        subprocess.run(
            ["tmux", "-S", str(tmp_path / "tmux" / "corral"), "kill-server"], capture_output=True
        )
        subprocess.run(["umount", "-l", str(home)], capture_output=True)


def test_agents_and_doctor_list_the_acp_presets_and_how_to_install_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, neither named gemini-acp, claude-acp or codex-acp."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    adapter = bin_dir / "codex-acp"
    adapter.write_text("#!/bin/sh\nexit 0\n")
    adapter.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    listed = corral("agents", home=tmp_path).stdout.splitlines()
    codex = next(line for line in listed if " codex-acp " in line)
    assert codex.startswith("ok ") and codex.endswith(str(adapter))
    for name, install in (
        ("claude-acp", "npm i -g @zed-industries/claude-code-acp"),
        ("gemini-acp", "npm i -g @google/gemini-cli"),
    ):
        line = next(line for line in listed if f" {name} " in line)
        if shutil.which(name.removesuffix("-acp").replace("claude", "claude-code-acp")) is None:
            assert line.startswith("-- ") and line.endswith(f"not installed: {install}")
    doctor = corral("doctor", home=tmp_path).stdout
    assert f"ok  acp codex-acp  {adapter}" in doctor
    assert "acp claude-acp" in doctor and "acp gemini-acp" in doctor
