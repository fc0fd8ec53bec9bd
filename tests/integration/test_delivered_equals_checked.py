"""For random trees and random operator states, the tree a delivery writes is
the tree the checks ran on, byte for byte: file contents, executable bits,
symlinks and names that are not UTF-8. The checks' tree is recorded from the
fresh checkout they run in (`git write-tree` of it through a private index),
the delivered tree from the branch's commit or from the checkout's files.
That checkout is a reused one: an earlier run scribbled over it first."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from corral.supervisor.errors import CorralError
from corral.supervisor.gates.scratch_tree import ScratchTrees
from corral.supervisor.git.delivery import apply_to_checkout
from corral.supervisor.git.result_tree import changes_between, compose
from corral.supervisor.git.trees import commit_tree, snapshot_tree, tree_of
from corral.supervisor.workspaces import Workspaces
from tests.conftest import git, init_repo

NAMES = [
    "a.txt",
    "dir/b.txt",
    os.fsdecode(b"caf\xe9.txt"),
    os.fsdecode(b"d\xffir/n\xe9w.bin"),
    "with space.txt",
    "-leading-dash.txt",
    "new\nline.txt",
    "deep/er/tool.sh",
]
IGNORED = ["junk.ign", "dir/cache.ign"]

Entry = tuple[str, bytes]  # ("644" | "755" | "link", content or link target)
entry = st.one_of(
    st.tuples(st.sampled_from(["644", "755"]), st.binary(max_size=40)),
    st.tuples(st.just("link"), st.sampled_from([b"a.txt", b"missing", b"dir/b.txt"])),
)
state = st.dictionaries(st.sampled_from(NAMES), entry, max_size=len(NAMES))
# None deletes the path
edits = st.dictionaries(st.sampled_from(NAMES), st.none() | entry, max_size=len(NAMES))


def put(root: Path, name: str, value: Entry | None) -> None:
    path = os.path.join(os.fsencode(root), os.fsencode(name))
    if os.path.lexists(path):
        os.unlink(path)
    if value is None:
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    kind, data = value
    if kind == "link":
        os.symlink(data, path)
    else:
        with open(path, "wb") as fh:
            fh.write(data)
        os.chmod(path, 0o755 if kind == "755" else 0o644)


def raw_git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout


class Scene:
    def __init__(self, root: Path, base: dict[str, Entry]) -> None:
        root.mkdir(parents=True)
        self.repo = init_repo(root / "repo")
        (self.repo / ".gitignore").write_text("*.ign\n")
        for name, value in base.items():
            put(self.repo, name, value)
        git(self.repo, "add", "-A")
        git(self.repo, "commit", "-q", "-m", "base")
        self.start = git(self.repo, "rev-parse", "HEAD").strip()
        self.state = root / "state"
        self.state.mkdir()
        self.workspaces = Workspaces(self.state, self.state / "leases.db")
        self.trees = ScratchTrees(self.workspaces)

    def agent_tree(self, edits: dict[str, Entry | None]) -> str:
        worktree = self.state / "agent"
        git(self.repo, "worktree", "add", "-q", "--detach", str(worktree), self.start)
        for name, value in edits.items():
            put(worktree, name, value)
        for name in IGNORED:  # leftovers no delivery carries
            put(worktree, name, ("644", b"left behind"))
        return snapshot_tree(worktree)

    async def scribbled_over(self) -> Path:
        """An earlier run's checks left their mark on the checkout that will
        be reused: tracked files changed, removed and re-typed, ignored and
        untracked files, a nested repository."""
        async with self.trees.checkout(self.repo, self.start, "earlier") as scratch:
            for name in NAMES:
                put(scratch, name, ("755", b"written by an earlier check"))
            put(scratch, "junk.ign", ("644", b"ignored leftover"))
            put(scratch, "dir/left.txt", ("644", b"untracked leftover"))
            put(scratch, "a.txt", ("link", b"dir/left.txt"))
            init_repo(scratch / "nested")
        return scratch

    async def checked_tree(self, tree: str, parent: str) -> str:
        """What a check sees: the fresh checkout's content, as a tree."""
        used = await self.scribbled_over()
        async with self.trees.materialized(self.repo, tree, parent, "prop") as scratch:
            assert scratch == used  # the same checkout, moved to the new tree
            names = {n for n in raw_git(scratch, "ls-files", "-o").splitlines()}
            assert not names, f"files beyond the tree in the checks' checkout: {names}"
            return await asyncio.to_thread(snapshot_tree, scratch)


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(base=state, agent=edits, operator=edits, to_checkout=st.booleans())
def test_the_delivered_tree_is_the_tree_the_checks_ran_on(
    tmp_path_factory, base, agent, operator, to_checkout
) -> None:
    scene = Scene(tmp_path_factory.mktemp("prop") / "s", base)
    try:
        asyncio.run(_deliver_and_compare(scene, agent, operator, to_checkout))
    finally:
        scene.trees.close()
        scene.workspaces.close()


async def _deliver_and_compare(
    scene: Scene, agent: dict, operator: dict, to_checkout: bool
) -> None:
    repo, start = scene.repo, scene.start
    verified = scene.agent_tree(agent)
    changes = changes_between(repo, start, verified)
    if to_checkout:
        for name, value in operator.items():
            put(repo, name, value)  # the operator's own edits, uncommitted
        put(repo, "mine.ign", ("644", b"operator's ignored file"))
        files = snapshot_tree(repo)
        composed = compose(repo, files, start, changes)
        if composed.conflicts:
            # the operator changed a path the change writes: refused before
            # anything is checked or written; and a delivery against the
            # start commit's entries refuses it too
            with pytest.raises(CorralError, match="you changed"):
                apply_to_checkout(repo, start, verified, composed.conflicts)
            return
        checked = await scene.checked_tree(composed.tree, start)
        apply_to_checkout(repo, files, composed.tree, [c.path for c in changes])
        assert snapshot_tree(repo) == checked == composed.tree
        assert git(repo, "rev-parse", "HEAD").strip() == start  # HEAD untouched
    else:
        for name, value in operator.items():  # the operator commits on HEAD meanwhile
            put(repo, name, value)
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "--allow-empty", "-m", "operator")
        head = git(repo, "rev-parse", "HEAD").strip()
        composed = compose(repo, head, start, changes)
        if composed.conflicts:
            return  # refused before anything is checked or written
        checked = await scene.checked_tree(composed.tree, head)
        commit = commit_tree(repo, composed.tree, head, "delivered\n")
        assert tree_of(repo, commit) == checked == composed.tree
