"""A checkout kept ready for the next checks holds exactly the next tree:
whatever the last confined checks did in it (rewrote files, committed,
left ignored files, locked a directory), the next checks see that tree's
files and its commit, and nothing else.

Everything lives under /var/tmp (the sandbox's /tmp is private)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from corral.supervisor.contracts.checks import run_command
from corral.supervisor.gates.scratch_tree import MATERIALIZED_MESSAGE, ScratchTrees
from corral.supervisor.git.trees import snapshot_tree, tree_of
from corral.supervisor.sandbox import SandboxPolicy, sandbox_status, set_active_policy
from corral.supervisor.workspaces import Workspaces
from tests.conftest import git, init_repo

STATUS = sandbox_status()
pytestmark = pytest.mark.skipif(
    not STATUS.available, reason=f"no sandbox can run here: {STATUS.detail}"
)
GIT_ID = "git -c user.name=check -c user.email=check@example.com"


@dataclass
class Scene:
    repo: Path
    first: str  # a commit: a.txt says one
    second: str  # a tree: a.txt says two, b.txt added
    trees: ScratchTrees


@pytest.fixture
def scene() -> Iterator[Scene]:
    base = Path(tempfile.mkdtemp(prefix="ready-", dir="/var/tmp"))
    state = base / "state"
    state.mkdir()
    set_active_policy(SandboxPolicy(state_dir=state))
    repo = init_repo(base / "repo")
    (repo / ".gitignore").write_text("*.ign\n")
    (repo / "a.txt").write_text("one\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "one")
    first = git(repo, "rev-parse", "HEAD").strip()
    (repo / "a.txt").write_text("two\n")
    (repo / "b.txt").write_text("new\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "two")
    second = tree_of(repo, "HEAD")
    git(repo, "reset", "-q", "--hard", first)
    workspaces = Workspaces(state, state / "leases.db")
    trees = ScratchTrees(workspaces)
    try:
        yield Scene(repo, first, second, trees)
    finally:
        trees.close()
        workspaces.close()
        set_active_policy(SandboxPolicy())
        for top, dirs, _ in __import__("os").walk(base):
            for name in dirs:
                (Path(top) / name).chmod(0o755)
        shutil.rmtree(base, ignore_errors=True)


async def test_the_next_checks_see_the_next_tree_and_its_commit_whatever_the_last_did(
    scene: Scene,
) -> None:
    async with scene.trees.checkout(scene.repo, scene.first, "earlier") as used:
        code, out, _ = await run_command(
            f"echo mine > a.txt && echo x > left.ign && touch stray.txt"
            f" && {GIT_ID} commit -qam mine && git log -1 --format=%s",
            used,
            30,
        )
        assert code == 0 and "mine" in out, out
    async with scene.trees.materialized(scene.repo, scene.second, scene.first, "next") as path:
        assert path == used  # the same checkout, moved
        code, out, _ = await run_command(
            "cat a.txt; ls -A; echo status:; git status --porcelain --ignored; git log -1 --format=%s",
            path,
            30,
        )
        assert code == 0, out
        lines = out.splitlines()
        assert lines[0] == "two"
        assert sorted(lines[1 : lines.index("status:")]) == [".git", ".gitignore", "a.txt", "b.txt"]
        assert lines[lines.index("status:") + 1 :] == [MATERIALIZED_MESSAGE.strip()]
        assert snapshot_tree(path) == scene.second


async def test_a_checkout_whose_directory_a_check_locked_is_still_moved_or_replaced(
    scene: Scene,
) -> None:
    async with scene.trees.checkout(scene.repo, scene.first, "earlier") as used:
        code, out, _ = await run_command(
            "mkdir -p locked/in && touch locked/in/f && chmod 500 locked/in locked && chmod 500 .",
            used,
            30,
        )
        assert code == 0, out
    async with scene.trees.checkout(scene.repo, scene.first, "next") as path:
        assert sorted(p.name for p in path.iterdir()) == [".git", ".gitignore", "a.txt"]
        assert (path / "a.txt").read_text() == "one\n"
