"""What an agent writes about git is never run by corral, and the operator's
history survives whatever a confined run does to the repository.

As a hostile agent would, through the real sandbox, real tmux and real git:
plant a clean filter, textconv driver, fsmonitor and hooks (through the
admin dir's `commondir`, the `.git` file, `config.worktree`, the shared git
dir and `.gitattributes`), delete the operator's objects and packs and
rewrite their refs; then let corral snapshot, verify, show the diff and
deliver. Nothing planted runs (a marker outside every sandbox is never
created), a changed pointer fails the session with one sentence, and
`git log feature` still works. `git status`, `git commit`, `git stash` and
`git gc` inside keep working.

Everything lives under /var/tmp (the sandbox's /tmp is private)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from corral.supervisor.api import Supervisor
from corral.supervisor.contracts.drafting import FixedDrafter
from corral.supervisor.engines.tools.shell import shell
from corral.supervisor.engines.tools.state import ToolState
from corral.supervisor.errors import CorralError
from corral.supervisor.factory import build_supervisor
from corral.supervisor.git.delivery import commit_patch, create_branch
from corral.supervisor.git.pins import METADATA_CHANGED
from corral.supervisor.git.run import WorktreeMetadataChanged
from corral.supervisor.git.trees import snapshot_tree, tree_patch
from corral.supervisor.git.workspace import GitWorkspace
from corral.supervisor.governance.env_scrub import scrubbed_env
from corral.supervisor.models import ContractCheck, OutcomeContract
from corral.supervisor.sandbox import SandboxPolicy, sandbox_status, set_active_policy
from corral.supervisor.states import CoderState as S
from corral.supervisor.workspaces import Workspaces
from tests.conftest import fast_config, git, init_repo

STATUS = sandbox_status()
pytestmark = pytest.mark.skipif(
    not STATUS.available, reason=f"no sandbox can run here: {STATUS.detail}"
)
FEATURE = OutcomeContract(
    checks=[ContractCheck(name="feature", command="grep -q done feature.txt", timeout_secs=20)]
)


@dataclass
class World:
    base: Path
    repo: Path  # the operator's checkout, with a branch `feature` only its objects hold
    state: Path
    marker: Path  # what a planted program would create, outside every sandbox
    feature: str  # the commit of `feature`


def _objects(repo: Path) -> dict[str, int]:
    """Every file of the operator's object store, with its size."""
    root = repo / ".git" / "objects"
    return {str(p.relative_to(root)): p.stat().st_size for p in root.rglob("*") if p.is_file()}


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    base = Path(tempfile.mkdtemp(prefix="corral-gitb-", dir="/var/tmp")).resolve()
    try:
        repo = init_repo(base / "repo")
        git(repo, "checkout", "-q", "-b", "feature")
        (repo / "feature-only.txt").write_text("the operator's own work\n")
        git(repo, "add", "feature-only.txt")
        git(repo, "commit", "-q", "-m", "feature work")
        feature = git(repo, "rev-parse", "HEAD").strip()
        git(repo, "checkout", "-q", "main")
        git(repo, "gc", "-q")  # most of it packed …
        (repo / "loose.txt").write_text("loose\n")
        git(repo, "add", "loose.txt")
        git(repo, "commit", "-q", "-m", "loose")  # … and some loose
        home = base / "home"
        home.mkdir()
        (home / ".gitconfig").write_text("[user]\n\tname = me\n\temail = me@example.com\n")
        state = base / "state"
        state.mkdir()
        config = base / "config.toml"
        config.write_text("")
        monkeypatch.setenv("HOME", str(home))
        monkeypatch.setenv("CORRAL_CONFIG", str(config))
        yield World(base, repo, state, base / "PLANTED-RAN", feature)
    finally:
        set_active_policy(SandboxPolicy())
        for sock in (base / "tmux").glob("*"):
            subprocess.run(["tmux", "-S", str(sock), "kill-server"], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


def assert_history_intact(world: World) -> None:
    log = git(world.repo, "log", "--format=%s", "feature")
    assert "feature work" in log
    git(world.repo, "fsck", "--no-dangling")
    assert git(world.repo, "rev-parse", "feature").strip() == world.feature


EVIL = r"""
M={marker}
mkdir -p evil/info evil/objects/info evil/refs evil/hooks
echo "{repo}/.git/objects" > evil/objects/info/alternates  # a git dir git would accept
git rev-parse HEAD > evil/HEAD
cat > evil/config <<END
[core]
	repositoryformatversion = 0
	fsmonitor = "touch $M-fsmonitor; true"
	hooksPath = $PWD/evil/hooks
[filter "x"]
	clean = "touch $M-filter; cat"
	smudge = "touch $M-smudge; cat"
	required = true
[diff "t"]
	textconv = "touch $M-textconv; cat"
	command = "touch $M-extdiff; true"
END
printf '* filter=x diff=t\n' > evil/info/attributes
printf '#!/bin/sh\ntouch %s-hook\n' "$M" > evil/hooks/post-checkout
chmod +x evil/hooks/post-checkout
cp evil/info/attributes .gitattributes
"""

PLANT = (
    EVIL
    + r"""
A=$(sed -n 's/^gitdir: //p' .git)
C={repo}/.git
for h in pre-commit post-checkout post-commit post-index-change reference-transaction; do
  mkdir -p "$A/hooks" && cp evil/hooks/post-checkout "$A/hooks/$h"
  cp evil/hooks/post-checkout "$C/hooks/$h" && echo "WROTE common hook $h"
done
cp evil/config "$A/config.worktree" && git config extensions.worktreeConfig true
cat evil/config >> "$C/config" && echo "WROTE common config"
mkdir -p "$C/info" && cp evil/info/attributes "$C/info/attributes" && echo "WROTE common attributes"
"""
)

DESTROY = r"""
C={repo}/.git
rm -rf "$C"/objects/pack/* && echo "REMOVED packs"
find "$C/objects" -type f -name '[0-9a-f]*' -delete 2>/dev/null
find "$C/objects" -type f | head -1 | xargs -r rm -f && echo "REMOVED an object"
echo 0000000000000000000000000000000000000000 > "$C/refs/heads/feature" && echo "WROTE ref"
rm -f "$C/packed-refs" && echo "REMOVED packed-refs"
git update-ref -d refs/heads/feature && echo "DELETED feature inside"
git --git-dir="$C" update-ref -d refs/heads/feature && echo "DELETED real feature"
git --git-dir="$C" gc --prune=now && echo "GC real"
git log --format=%s -1 feature && echo LOG-FEATURE-OK
echo wip >> loose.txt && git stash push -q -m agent-wip && git stash list && git stash pop -q
git status --short && echo STATUS-OK
git -c filter.x.required=false add -A && git commit -qm inside && echo COMMIT-OK
git gc -q --prune=now && git prune --expire=now && echo GC-OK
git log --format=%s -1 && git cat-file -e {feature} && echo INSIDE-OK
"""

REDIRECT = r"""
A=$(sed -n 's/^gitdir: //p' .git)
printf 'gitdir: %s/evil\n' "$PWD" > .git && echo "WROTE .git"
rm -f .git && echo "REMOVED .git"
echo "$PWD/evil" > "$A/commondir" && echo "commondir: the private one only"
"""

REFUSED = (
    "WROTE common",
    "WROTE .git",
    "REMOVED .git",
    "REMOVED packs",
    "REMOVED an object",
    "WROTE ref",
    "REMOVED packed-refs",
    "DELETED real feature",
    "GC real",
)
WORKS = ("LOG-FEATURE-OK", "STATUS-OK", "COMMIT-OK", "GC-OK", "INSIDE-OK")


def _planted(world: World) -> list[Path]:
    return sorted(world.base.glob(world.marker.name + "*"))


# -- the built-in engine's shell, then corral's snapshot, diff and delivery ------------


def _shell_state(worktree: Path, home: Path) -> ToolState:
    env = scrubbed_env(invoked_by="corral-check")
    env["HOME"] = str(home)
    return ToolState(
        root=worktree,
        env=env,
        ask=None,
        withdraw=lambda: None,
        seconds_left=lambda: None,
        hidden=lambda _p: False,
    )


async def test_what_the_confined_shell_plants_or_destroys_never_reaches_corrals_git(
    world: World,
) -> None:
    set_active_policy(SandboxPolicy(state_dir=world.state))
    spaces = Workspaces(world.state, world.state / "leases.db")
    try:
        made = spaces.provision(world.repo, "s1", None)
        wt = made.workspace.path
        objects = _objects(world.repo)
        refs = git(world.repo, "for-each-ref")
        state = _shell_state(wt, world.base / "home")
        out = ""
        for script in (PLANT, DESTROY, REDIRECT):
            command = script.format(marker=world.marker, repo=world.repo, feature=world.feature)
            out += (await shell(state, {"command": command})).text
        for refused in REFUSED:
            assert refused not in out, out
        for works in WORKS:
            assert works in out, out
        assert "agent-wip" in out  # its own stash

        (wt / "feature.txt").write_text("done\n")
        tree = snapshot_tree(wt)  # corral's own git, unconfined
        diff = GitWorkspace(world.repo, wt).diff(made.start_commit, tree)
        shown = {f.path for f in diff.files}
        assert {"feature.txt", ".gitattributes", "evil/config"} <= shown
        patch = tree_patch(world.repo, made.start_commit, tree)
        commit = commit_patch(world.repo, made.start_commit, patch, "delivered\n")
        create_branch(world.repo, "corral/s1", commit)
        assert git(world.repo, "show", "corral/s1:feature.txt") == "done\n"
        # bytes, not filtered content: what was stored is what the file holds
        assert git(world.repo, "show", f"{tree}:.gitattributes") == "* filter=x diff=t\n"
        assert _planted(world) == []
        assert_history_intact(world)
        delivered = f"{commit} commit\trefs/heads/corral/s1\n"
        assert git(world.repo, "for-each-ref").replace(delivered, "") == refs
        assert all(_objects(world.repo).get(k) == v for k, v in objects.items())
        ok, why = spaces.remove(str(wt), force=True)
        assert ok, why
    finally:
        spaces.close()


async def test_a_changed_pointer_stops_corrals_git_before_it_runs(world: World) -> None:
    spaces = Workspaces(world.state, world.state / "leases.db")
    try:
        made = spaces.provision(world.repo, "s2", None)
        wt = made.workspace.path
        evil = world.base / "evil"
        (evil / "info").mkdir(parents=True)
        (evil / "objects").mkdir()
        (evil / "refs").mkdir()
        (evil / "HEAD").write_text(f"{made.start_commit}\n")
        (evil / "config").write_text(
            f'[core]\n\tfsmonitor = "touch {world.marker}-fsmonitor; true"\n'
            f'[filter "x"]\n\tclean = "touch {world.marker}-filter; cat"\n'
        )
        (evil / "info" / "attributes").write_text("* filter=x\n")
        (wt / "hello.txt").write_text("hello\n")
        dotgit = (wt / ".git").read_bytes()
        (wt / ".git").write_text(f"gitdir: {evil}\n")  # an unconfined agent could
        with pytest.raises(WorktreeMetadataChanged, match=METADATA_CHANGED):
            snapshot_tree(wt)
        (wt / ".git").write_bytes(dotgit)
        admin = Path(dotgit.decode().split("gitdir:")[1].strip())
        (admin / "commondir").write_text(f"{evil}\n")
        with pytest.raises(WorktreeMetadataChanged, match="commondir"):
            snapshot_tree(wt)
        with pytest.raises(WorktreeMetadataChanged):
            GitWorkspace(world.repo, wt).is_pristine(made.start_commit)
        ok, why = spaces.remove(str(wt), force=True)  # delete refuses, with the sentence
        assert not ok and METADATA_CHANGED in why
        assert _planted(world) == []
    finally:
        spaces.close()


# -- agents in panes, through the whole session ------------------------------------------


async def _open(world: World, **sandbox: Any) -> Supervisor:
    sup = build_supervisor(
        world.state,
        FixedDrafter(FEATURE),
        socket_dir=world.base / "tmux",
        config=fast_config(sandbox=sandbox),
    )
    await sup.open()
    return sup


def _agent(world: World, body: str) -> str:
    script = world.base / f"agent-{time.time_ns()}.sh"
    script.write_text(
        "#!/bin/bash\n"
        "printf '> '\n"
        "IFS= read -r task\n"
        "echo 'Working… (esc to interrupt)'\n"
        f"{{\n{body}\n}} > .attack-report 2>&1\n"
        "echo done > feature.txt\n"
        'sh -c "$CORRAL_HOOK_CMD Stop" </dev/null\n'
        "sleep 1.5\n"
        "clear; printf '> '\n"
        "IFS= read -r more\n"
        "sleep 600\n"
    )
    script.chmod(0o755)
    return f"external:custom:{script}"


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
async def test_a_confined_agent_plants_and_destroys_and_corral_delivers_untouched(
    world: World,
) -> None:
    sup = await _open(world, agents=True)
    try:
        body = "".join(
            script.format(marker=world.marker, repo=world.repo, feature=world.feature)
            for script in (PLANT, DESTROY, REDIRECT)
        )
        started = await sup.start("do the task", world.repo, engine=_agent(world, body))
        sid, wt = started.session_id, Path(started.worktree or "")
        await sup.confirm(sid)
        row = await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=60)
        report = (wt / ".attack-report").read_text()
        assert row.state is S.NEEDS_APPROVAL, (row.error, report)
        for refused in REFUSED:
            assert refused not in report, report
        for works in WORKS:
            assert works in report, report
        diff = sup.get(sid).session.diff
        assert diff is not None and "feature.txt" in diff.stat and ".gitattributes" in diff.stat
        result = await sup.approve(sid, delivery="branch")
        assert result.state is S.MERGED and result.branch
        assert git(world.repo, "show", f"{result.branch}:feature.txt") == "done\n"
        assert _planted(world) == []
        assert_history_intact(world)
    finally:
        await sup.close()


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
@pytest.mark.parametrize("pointer", [".git", "commondir"])
async def test_an_unconfined_agent_that_redirects_git_fails_its_session(
    world: World, pointer: str
) -> None:
    redirect = {
        ".git": 'printf "gitdir: %s/evil\\n" "$PWD" > .git',
        "commondir": 'echo "$PWD/evil" > "$(sed -n "s/^gitdir: //p" .git)/commondir"',
    }[pointer]
    body = EVIL.format(marker=world.marker, repo=world.repo) + f"{redirect}\n"
    sup = await _open(world, agents=False)
    try:
        started = await sup.start("do the task", world.repo, engine=_agent(world, body))
        sid = started.session_id
        await sup.confirm(sid)
        row = await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=60)
        assert row.state is S.FAILED, row.state
        assert METADATA_CHANGED in (row.error or ""), row.error
        assert _planted(world) == []
        assert_history_intact(world)
    finally:
        await sup.close()


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
async def test_a_pointer_changed_while_waiting_at_gate_2_fails_the_session_on_approve(
    world: World,
) -> None:
    sup = await _open(world, agents=False)
    try:
        body = EVIL.format(marker=world.marker, repo=world.repo)
        started = await sup.start("do the task", world.repo, engine=_agent(world, body))
        sid, wt = started.session_id, Path(started.worktree or "")
        await sup.confirm(sid)
        row = await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=60)
        assert row.state is S.NEEDS_APPROVAL, row.error
        (wt / ".git").write_text(f"gitdir: {wt / 'evil'}\n")  # what its leftover process does
        with pytest.raises(CorralError, match=METADATA_CHANGED):
            await sup.approve(sid, delivery="branch")
        row = sup.get(sid)
        assert row.session.state is S.FAILED and METADATA_CHANGED in (row.session.error or "")
        assert f"corral/{sid}" not in git(world.repo, "branch", "--list")
        assert _planted(world) == []
        assert_history_intact(world)
    finally:
        await sup.close()
