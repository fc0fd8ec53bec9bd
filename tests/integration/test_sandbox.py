"""Confinement through the real sandbox (bubblewrap): escapes tried as
contract checks and through the built-in engine's shell leave the user's
checkout, its refs, files outside the worktree and a fake key untouched and
unread; legitimate git work inside the worktree still works; nothing a check
starts outlives it; a legitimate session still reaches approval and delivers.

The user's repo lives under /var/tmp (not /tmp: the sandbox's /tmp is
private, which would hide it and make every escape trivially miss)."""

from __future__ import annotations

import shutil
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
from corral.supervisor.sandbox import SandboxPolicy, sandbox_status, set_active_policy
from corral.supervisor.states import CoderState as S
from tests.conftest import SupervisorFactory, git, init_repo
from tests.fakes.procs import running_with_arg
from tests.fakes.scripted import ScriptedDrafter, ScriptedEngine, Write, contract

STATUS = sandbox_status()
pytestmark = pytest.mark.skipif(
    not STATUS.available, reason=f"no sandbox can run here: {STATUS.detail}"
)
KEY = "FAKE-PRIVATE-KEY-d41d8cd9"


@dataclass
class World:
    base: Path
    repo: Path  # the user's checkout, dirty
    wt: Path  # the session's worktree (detached HEAD)
    outside: Path
    home: Path
    env: dict[str, str]


def snapshot(world: World) -> dict[str, bytes]:
    """Every file under base except the worktree and what git may write for
    it (the object store, the worktree's admin dir): bytes or link target."""
    skip = [world.wt, world.repo / ".git" / "objects", world.repo / ".git" / "worktrees"]
    out: dict[str, bytes] = {}
    for path in sorted(world.base.rglob("*")):
        if any(path == s or s in path.parents for s in skip):
            continue
        if path.is_symlink():
            out[str(path)] = b"->" + str(path.readlink()).encode()
        elif path.is_file():
            out[str(path)] = path.read_bytes()
        else:
            out[str(path)] = b"<dir>"
    return out


def refs(repo: Path) -> tuple[str, str, str, str]:
    return (
        git(repo, "for-each-ref"),
        git(repo, "symbolic-ref", "HEAD"),
        git(repo, "rev-parse", "HEAD"),
        git(repo, "status", "--porcelain", "--untracked-files=all"),
    )


@pytest.fixture
def world() -> Iterator[World]:
    base = Path(tempfile.mkdtemp(prefix="corral-sbx-", dir="/var/tmp")).resolve()
    try:
        repo = init_repo(base / "repo")
        (repo / "app.txt").write_text("v1\n")
        git(repo, "add", "app.txt")
        git(repo, "commit", "-q", "-m", "app")
        (repo / "app.txt").write_text("v1\nmy wip\n")  # unstaged
        (repo / "untracked.txt").write_text("mine\n")
        hooks = repo / ".git" / "hooks"
        hooks.mkdir(exist_ok=True)
        git(repo, "worktree", "add", "-q", "--detach", str(base / "wt"))
        outside = base / "outside"
        (outside / "sub").mkdir(parents=True)
        (outside / "keep.txt").write_text("keep\n")
        (outside / "sub" / "deep.txt").write_text("deep\n")
        home = base / "home"
        (home / ".ssh").mkdir(parents=True)
        (home / ".ssh" / "id_rsa").write_text(KEY + "\n")
        (home / ".gitconfig").write_text("[user]\n\tname = me\n\temail = me@example.com\n")
        env = scrubbed_env(invoked_by="corral-check")
        env["HOME"] = str(home)
        set_active_policy(SandboxPolicy())
        yield World(base, repo, base / "wt", outside, home, env)
    finally:
        set_active_policy(SandboxPolicy())
        shutil.rmtree(base, ignore_errors=True)


async def run_as_check(world: World, command: str) -> tuple[int | None, str]:
    check = ContractCheck(name="escape", command=command, timeout_secs=30)
    result = await run_check(check, world.wt, env=world.env)
    return result.exit_code, result.output_tail


async def run_in_shell(world: World, command: str) -> tuple[int | None, str]:
    state = ToolState(
        root=world.wt,
        env=world.env,
        ask=None,
        withdraw=lambda: None,
        seconds_left=lambda: None,
        hidden=lambda _p: False,
    )
    result = await shell(state, {"command": command, "timeout_secs": 30})
    return None, result.text


RUNNERS = {"check": run_as_check, "shell": run_in_shell}

ESCAPES = {
    "checkout_in_user_repo": "cd {repo} && git checkout -- .",
    "reset_user_repo": "cd {repo} && git reset --hard && git clean -fdx",
    "symbolic_ref_and_commit": (
        "cd {repo} && git symbolic-ref HEAD refs/heads/x; git commit --allow-empty -qm evil"
    ),
    "branch_from_worktree": "git branch evil; git update-ref refs/heads/main HEAD",
    "truncate_outside": ": > {outside}/keep.txt",
    "write_parent": "echo x > ../x",
    "cp_outside": "cp /etc/hostname {outside}/copied",
    "mv_outside": "mv {outside}/keep.txt {outside}/moved.txt",
    "sed_outside": "sed -i s/keep/gone/ {outside}/keep.txt",
    "rmtree_outside": "python3 -c \"import shutil; shutil.rmtree('{outside}')\"",
    "symlink_out": "ln -s {outside}/keep.txt link && echo x > link",
    "hardlink_out": "ln {outside}/keep.txt hard && echo x >> hard",
    "proc_self_root": "echo x > /proc/self/root{outside}/keep.txt",
    "git_dir_flag": "git --git-dir={repo}/.git --work-tree={repo} checkout -- .; "
    "git --git-dir={repo}/.git branch evil",
    "git_env": "GIT_DIR={repo}/.git GIT_WORK_TREE={repo} git reset -q --hard; "
    "GIT_DIR={repo}/.git git tag evil",
    "hook": "echo 'touch {outside}/pwned' > {repo}/.git/hooks/post-checkout",
    "config": "git config --global user.name evil; git -C {repo} config user.name evil",
    "rm_home": "rm -rf {home}/.gitconfig",
    "read_key": "cat {home}/.ssh/id_rsa; cat ~/.ssh/id_rsa",
}


@pytest.mark.parametrize("via", sorted(RUNNERS))
@pytest.mark.parametrize("name", sorted(ESCAPES))
async def test_an_escape_changes_nothing_outside_the_worktree(
    world: World, name: str, via: str
) -> None:
    before, before_refs = snapshot(world), refs(world.repo)
    command = ESCAPES[name].format(
        repo=world.repo, outside=world.outside, home=world.home, wt=world.wt
    )
    _, output = await RUNNERS[via](world, command)

    assert snapshot(world) == before, output
    assert refs(world.repo) == before_refs, output
    assert KEY not in output
    assert not (world.base / "x").exists()


@pytest.mark.parametrize("via", sorted(RUNNERS))
async def test_nothing_a_command_starts_outlives_it(world: World, via: str) -> None:
    marker = f"1.{time.time_ns() % 10**9:09d}"
    started = time.monotonic()
    await RUNNERS[via](world, f"setsid sh -c 'while :; do sleep {marker}; done' & sleep 0.3")
    assert time.monotonic() - started < 10
    for _ in range(40):
        if not running_with_arg(marker):
            break
        time.sleep(0.05)
    assert running_with_arg(marker) == []


@pytest.mark.parametrize("via", sorted(RUNNERS))
async def test_git_work_inside_the_worktree_still_works(world: World, via: str) -> None:
    before_refs = refs(world.repo)
    script = (
        "set -e; echo new > feature.txt; git status --short; git diff; "
        "git add feature.txt; git diff --cached --stat; git commit -qm feature; "
        "git log --oneline -1; git branch --list; git stash list; echo ALL-OK"
    )
    head = git(world.wt, "rev-parse", "HEAD")
    _, output = await RUNNERS[via](world, script)
    assert "ALL-OK" in output, output
    _, logged = await RUNNERS[via](world, "git log -1 --format=%s; git status --short")
    assert "feature" in logged and "feature.txt" not in logged, logged  # the next run sees it
    assert git(world.wt, "rev-parse", "HEAD") == head  # the commit stayed in the private git
    assert refs(world.repo) == before_refs  # the user's refs never moved


async def test_checks_have_no_network_unless_they_ask(world: World) -> None:
    count = "tail -n +3 /proc/net/dev | wc -l"
    closed = ContractCheck(name="closed", command=count)
    opened = ContractCheck(name="opened", command=count, network=True)
    r_closed = await run_check(closed, world.wt, env=world.env)
    r_open = await run_check(opened, world.wt, env=world.env)
    assert r_closed.output_tail.strip() == "1"  # loopback only
    host = len(Path("/proc/net/dev").read_text().splitlines()) - 2
    assert r_open.output_tail.strip() == str(host)


async def test_the_opt_out_runs_unconfined(world: World) -> None:
    set_active_policy(SandboxPolicy(enabled=False))
    code, output = await run_as_check(world, "cat ~/.ssh/id_rsa")
    assert code == 0 and KEY in output


async def test_a_legitimate_session_reaches_approval_and_delivers(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    engine = ScriptedEngine([[Write("feature.txt", "done\n")]])
    checks = contract(
        ("feature", "grep -q done feature.txt"),
        ("git_works", "git status --short && git diff --stat && git log --oneline -1"),
        ("tmp_is_private", "echo scratch > /tmp/scratch && cat /tmp/scratch"),
    )
    sup = await make_supervisor(drafter=ScriptedDrafter([checks]), engine=engine)
    sid = (await sup.start("add the feature", repo)).session_id
    await sup.confirm(sid)
    row = await sup.wait_for(sid, needs=True, timeout=30)
    assert row.state is S.NEEDS_APPROVAL, sup.get(sid).session.error
    assert all(r.passed for r in sup.get(sid).session.last_check_results)
    result = await sup.approve(sid)
    files = git(repo, "ls-tree", "-r", "--name-only", result.branch or "").split()
    assert "feature.txt" in files


def user_git_files(repo: Path) -> dict[str, bytes]:
    """The user's refs, packed refs, HEAD and reflogs, byte for byte."""
    dot = repo / ".git"
    out: dict[str, bytes] = {}
    for top in ("refs", "logs"):
        for path in sorted((dot / top).rglob("*")):
            if path.is_file():
                out[str(path.relative_to(dot))] = path.read_bytes()
    for name in ("HEAD", "packed-refs", "ORIG_HEAD"):
        if (dot / name).is_file():
            out[name] = (dot / name).read_bytes()
    return out


@pytest.mark.parametrize("via", sorted(RUNNERS))
async def test_git_stash_works_inside_and_never_touches_the_users_refs(
    world: World, via: str
) -> None:
    git(world.repo, "branch", "feature-x")
    git(world.repo, "pack-refs", "--all")
    git(world.repo, "branch", "loose-y")
    git(world.repo, "stash", "push", "-q", "-m", "the user's own stash")
    set_active_policy(SandboxPolicy(state_dir=world.base / "state"))
    before, before_refs = user_git_files(world.repo), refs(world.repo)

    _, pushed = await RUNNERS[via](
        world, "set -e; echo wip >> app.txt; git stash push -m agent-wip; git stash list"
    )
    assert "agent-wip" in pushed, pushed
    assert "the user's own stash" not in pushed  # the sandbox has a stash of its own
    assert (world.wt / "app.txt").read_text() == "v1\n"  # stashed away
    _, popped = await RUNNERS[via](
        world,
        "set -e; git stash list; git stash pop; git stash list | wc -l; "
        "git branch --list; echo new > feature.txt; git add feature.txt; "
        "git commit -qm feature; echo COMMITTED",
    )
    assert "agent-wip" in popped and "COMMITTED" in popped, popped
    assert (world.wt / "app.txt").read_text() == "v1\nwip\n"  # popped back
    for branch in ("main", "feature-x", "loose-y"):
        assert branch in popped  # the user's branches, packed and loose, are listed
    _, logged = await RUNNERS[via](world, "git log -1 --format=%s")
    assert "feature" in logged, logged
    assert user_git_files(world.repo) == before
    assert refs(world.repo) == before_refs
    assert "the user's own stash" in git(world.repo, "stash", "list")


async def test_a_gc_inside_the_sandbox_keeps_the_users_stash(world: World) -> None:
    git(world.repo, "stash", "push", "-q", "-m", "older stash")
    (world.repo / "app.txt").write_text("v1\nnewer wip\n")
    git(world.repo, "stash", "push", "-q", "-m", "newer stash")
    set_active_policy(SandboxPolicy(state_dir=world.base / "state"))
    await run_as_check(world, "git gc -q --prune=now; git prune --expire=now")
    listed = git(world.repo, "stash", "list")
    assert "older stash" in listed and "newer stash" in listed
    for entry in ("stash@{0}", "stash@{1}"):
        git(world.repo, "cat-file", "-e", f"{entry}^{{tree}}")  # its objects are all there
    git(world.repo, "fsck", "--no-dangling")
