"""A hostile confined process goes looking for secrets: a `custom:` agent in a
real tmux pane under bubblewrap, a contract check and the built-in engine's
shell each try to read the operator checkout's ignored `.env` and its files,
`~/.pgpass`, `~/.my.cnf`, `~/.vault-token`, `~/.config/git/credentials`,
`~/.terraform.d/credentials.tfrc.json`, `~/.bash_history`, the `mcp.token`
of corral's state dir and of other corrals' (one under HOME, one that
`CORRAL_HOME` names), another session's worktree, and a file in the real
home of the passwd entry — with `HOME` as corral's and with `HOME` changed.
Nothing of it is there. The agent still reads git's user config and writes
its own declared config dir.

The world sits under /opt when it is writable (a system root the sandbox
shows: the checkout and the state dir must be hidden explicitly, not just
missed), else under /var/tmp. The passwd home's marker is made only when
that home is writable, and removed after."""

from __future__ import annotations

import asyncio
import os
import pwd
import secrets
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from corral.supervisor.contracts.checks import run_check
from corral.supervisor.engines.tools.shell import shell
from corral.supervisor.engines.tools.state import ToolState
from corral.supervisor.governance.env_scrub import scrubbed_env
from corral.supervisor.models import ContractCheck
from corral.supervisor.panes.base import PaneSpec
from corral.supervisor.panes.tmux import TmuxBackend
from corral.supervisor.sandbox import SandboxPolicy, sandbox_status, set_active_policy
from corral.supervisor.sandbox.agent import launch_agent
from tests.conftest import git, init_repo

STATUS = sandbox_status()
pytestmark = pytest.mark.skipif(
    not STATUS.available, reason=f"no sandbox can run here: {STATUS.detail}"
)

HOME_SECRETS = (
    ".pgpass",
    ".my.cnf",
    ".vault-token",
    ".config/git/credentials",
    ".terraform.d/credentials.tfrc.json",
    ".bash_history",
    ".local/state/corral-other/mcp.token",
    ".ssh/id_rsa",
)


@dataclass
class World:
    root: Path
    repo: Path  # the operator's checkout
    state: Path  # corral's state dir
    worktree: Path  # this session's worktree
    home: Path  # corral's HOME
    decoy: Path  # another HOME a run may be given
    paths: list[str]  # every secret path a hostile run tries
    marker: Path | None  # a dir in the passwd entry's home (when writable)


def plant(path: Path) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"SECRET-{secrets.token_hex(4)}\n")
    return str(path)


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    parent = "/opt" if os.access("/opt", os.W_OK) else "/var/tmp"
    root = Path(tempfile.mkdtemp(prefix="corral-sbxs-", dir=parent)).resolve()
    passwd_home = Path(pwd.getpwuid(os.getuid()).pw_dir)
    marker = None
    try:
        repo = init_repo(root / "repo")
        (repo / ".gitignore").write_text(".env\n")
        (repo / "app.txt").write_text("SECRET-checkout-file\n")
        git(repo, "add", ".gitignore", "app.txt")
        git(repo, "commit", "-qm", "app")
        paths = [plant(repo / ".env"), str(repo / "app.txt")]
        state = root / "state"
        worktree = state / "worktrees" / "mine"
        git(repo, "worktree", "add", "-q", "--detach", str(worktree))
        paths += [plant(state / "mcp.token"), plant(state / "worktrees" / "other" / "notes.txt")]
        paths.append(plant(root / "state2" / "mcp.token"))  # the one CORRAL_HOME names
        home = root / "home"
        paths += [plant(home / rel) for rel in HOME_SECRETS]
        (home / ".gitconfig").write_text("[user]\n\tname = me\n\temail = me@example.com\n")
        decoy = root / "decoy"
        decoy.mkdir()
        if os.access(passwd_home, os.W_OK) and passwd_home.resolve() != home:
            marker = passwd_home / f".corral-test-{secrets.token_hex(4)}"
            paths.append(plant(marker / "token"))
        monkeypatch.setenv("HOME", str(home))
        monkeypatch.setenv("CORRAL_HOME", str(root / "state2"))
        set_active_policy(SandboxPolicy(state_dir=state))
        yield World(root, repo, state, worktree, home, decoy, paths, marker)
    finally:
        set_active_policy(SandboxPolicy())
        if marker is not None:
            shutil.rmtree(marker, ignore_errors=True)
        for sock in (root / "tmux").glob("*"):
            os.system(f"tmux -S {sock} kill-server 2>/dev/null")
        shutil.rmtree(root, ignore_errors=True)


def hunt(world: World) -> str:
    """A shell script printing whatever it finds at each secret path."""
    lines = [f"cat {p} 2>/dev/null; ls {Path(p).parent} 2>/dev/null" for p in world.paths]
    lines += ["cat ~/.pgpass ~/.vault-token ~/.bash_history 2>/dev/null"]
    lines += ["grep -rs SECRET- ~ / --include='*token*' -l 2>/dev/null | head -5"]
    return "\n".join(lines)


def assert_nothing_found(world: World, report: str) -> None:
    assert "SECRET-" not in report, report
    if world.marker is not None:
        assert world.marker.name not in report, report


@pytest.mark.slow
@pytest.mark.parametrize("home", ["corral's", "changed"])
@pytest.mark.parametrize("via", ["check", "shell"])
async def test_checks_and_the_shell_find_no_secret(world: World, via: str, home: str) -> None:
    env = scrubbed_env(invoked_by="corral-check")
    env["HOME"] = str(world.home if home == "corral's" else world.decoy)
    script = hunt(world) + "\necho HUNT-DONE; touch ~/scratch && echo HOME-WRITABLE"
    if via == "check":
        check = ContractCheck(name="hunt", command=script, timeout_secs=60)
        output = (await run_check(check, world.worktree, env=env)).output_tail
    else:
        state = ToolState(
            root=world.worktree,
            env=env,
            ask=None,
            withdraw=lambda: None,
            seconds_left=lambda: None,
            hidden=lambda _p: False,
        )
        output = (await shell(state, {"command": script, "timeout_secs": 60})).text
    assert "HUNT-DONE" in output and "HOME-WRITABLE" in output, output  # scratch HOME
    assert_nothing_found(world, output)
    assert not (Path(env["HOME"]) / "scratch").exists()  # the scratch was private


@pytest.mark.slow
@pytest.mark.parametrize("home", ["corral's", "changed"])
async def test_a_confined_agent_pane_finds_no_secret_but_has_its_own_config(
    world: World, home: str
) -> None:
    agent_home = world.home if home == "corral's" else world.decoy
    own = agent_home / ".mytool"
    script = world.root / f"agent-{time.time_ns()}.sh"
    script.write_text(
        "#!/bin/bash\n{\n"
        + hunt(world)
        + "\ngit config --global user.name\ncat ~/.config/git/credentials 2>&1\n"
        + "echo mine > ~/.mytool/state.txt && echo OWN-WRITTEN\necho HUNT-DONE\n} > report.txt\n"
    )
    script.chmod(0o755)
    env = scrubbed_env({**os.environ, "HOME": str(agent_home), "TERM": "xterm"})
    (agent_home / ".gitconfig").write_text("[user]\n\tname = me\n")
    launch = launch_agent(
        [str(script)],
        world.worktree,
        env,
        policy=SandboxPolicy(state_dir=world.state),
        choice=None,
        own_dirs=[own],
        own_files=[],
        hooks_file=world.state / "agents" / "s1" / "hooks.jsonl",
        python=sys.executable,
    )
    assert launch.confined, launch.account
    backend = TmuxBackend(socket_dir=world.root / "tmux")
    spec = PaneSpec("s1", 1, "agent", world.worktree, launch.argv, launch.env, 80, 20)
    handle = backend.spawn(spec)
    report_file = world.worktree / "report.txt"
    deadline = time.monotonic() + 30
    while "HUNT-DONE" not in (report_file.read_text() if report_file.exists() else ""):
        assert time.monotonic() < deadline, backend.capture([handle])
        await asyncio.sleep(0.05)
    report = report_file.read_text()
    assert_nothing_found(world, report)
    assert "me\n" in report  # git's user config is there, read-only
    assert "OWN-WRITTEN" in report and (own / "state.txt").read_text() == "mine\n"
    assert (world.home / ".pgpass").read_text().startswith("SECRET-")  # untouched outside
