"""Delivery carries every kind of change, or refuses: modes, symlinks,
deletions, renames and binary files arrive in the checkout and on the branch
exactly as in the result commit, whole or as the selected files of a partial
approval. A repository with initialised submodules is refused at start, and a
worktree holding work the delivery did not carry is kept, never removed."""

from __future__ import annotations

import os
import stat
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from corral.supervisor.errors import CorralError
from corral.supervisor.git.delivery import plan_checkout, touched_paths
from corral.supervisor.git.leases import LeaseState
from corral.supervisor.git.patches import parse_patch
from corral.supervisor.git.trees import snapshot_tree, tree_patch
from corral.supervisor.states import CoderState as S
from tests.conftest import SupervisorFactory, git, init_repo, lease_of
from tests.fakes.scripted import Run, ScriptedDrafter, ScriptedEngine, Write, contract

BLOB = bytes(range(256)) + b"\0\r\n\xff"


def show_bytes(repo: Path, spec: str) -> bytes:
    return subprocess.run(
        ["git", "cat-file", "blob", spec], cwd=repo, capture_output=True, check=True
    ).stdout


def ls_tree(repo: Path, rev: str, path: str) -> tuple[str, str] | None:
    """(mode, type) of `path` in `rev`, None when absent."""
    out = git(repo, "ls-tree", rev, "--", path).strip()
    if not out:
        return None
    mode, kind, _rest = out.split(" ", 2)
    return mode, kind


def checkout_tree(repo: Path) -> str:
    """The checkout's files (modes, links, bytes) as a tree, via a throwaway index."""
    index = repo / ".git" / "test-index"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env["GIT_INDEX_FILE"] = str(index)
    try:
        subprocess.run(["git", "add", "-A"], cwd=repo, env=env, check=True)
        out = subprocess.run(
            ["git", "write-tree"], cwd=repo, env=env, check=True, capture_output=True, text=True
        )
        return out.stdout.strip()
    finally:
        index.unlink(missing_ok=True)


@dataclass
class Kind:
    setup: dict[str, bytes]  # committed before the task (name → bytes)
    links: dict[str, str]  # committed symlinks (name → target)
    modes: dict[str, int]  # committed modes
    command: str  # what the agent does
    check: str  # the contract check, true only after the change
    selected: list[str]  # the paths a partial approval selects


KINDS = {
    "mode": Kind(
        {"tool.sh": b"#!/bin/sh\necho hi\n"},
        {},
        {"tool.sh": 0o644},
        "chmod +x tool.sh",
        "test -x tool.sh",
        ["tool.sh"],
    ),
    "symlink": Kind(
        {"a.txt": b"a\n", "b.txt": b"b\n"},
        {"old_link": "a.txt"},
        {},
        "ln -sfn b.txt old_link && ln -s a.txt new_link && ln -s missing.txt dangling",
        "test $(readlink old_link) = b.txt && test -L new_link && test -L dangling",
        ["old_link", "new_link", "dangling"],
    ),
    "deletion": Kind(
        {"gone.txt": b"bye\n", "keep.txt": b"stay\n"},
        {},
        {},
        "rm gone.txt",
        "test ! -e gone.txt",
        ["gone.txt"],
    ),
    "rename": Kind(
        {"old.txt": b"".join(b"line %d\n" % i for i in range(20))},
        {},
        {},
        "mv old.txt new.txt",
        "test -f new.txt && test ! -e old.txt",
        ["new.txt"],
    ),
    "binary": Kind(
        {"img.bin": b"\0\1\2old\0"},
        {},
        {},
        # a changed binary file and a new one
        "printf '\\000\\001\\377new\\000' > img.bin && cp img.bin fresh.bin",
        "test -s fresh.bin",
        ["img.bin", "fresh.bin"],
    ),
}


def prepare(repo: Path, kind: Kind) -> None:
    for name, data in kind.setup.items():
        (repo / name).write_bytes(data)
        os.chmod(repo / name, kind.modes.get(name, 0o644))
    for name, target in kind.links.items():
        os.symlink(target, repo / name)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "before the task")


def expect_state(kind_name: str, repo: Path, rev: str | None) -> None:
    """The delivered kind's files in the checkout (rev None) or in `rev`."""
    if kind_name == "mode":
        if rev is None:
            assert os.stat(repo / "tool.sh").st_mode & 0o111, "tool.sh is not executable"
            assert (repo / "tool.sh").read_bytes() == b"#!/bin/sh\necho hi\n"
        else:
            assert ls_tree(repo, rev, "tool.sh") == ("100755", "blob")
    elif kind_name == "symlink":
        links = {"old_link": "b.txt", "new_link": "a.txt", "dangling": "missing.txt"}
        for name, target in links.items():
            if rev is None:
                assert os.path.islink(repo / name), f"{name} is not a symlink"
                assert os.readlink(repo / name) == target
            else:
                assert ls_tree(repo, rev, name) == ("120000", "blob")
                assert show_bytes(repo, f"{rev}:{name}") == target.encode()
    elif kind_name == "deletion":
        if rev is None:
            assert not os.path.lexists(repo / "gone.txt")
            assert (repo / "keep.txt").read_bytes() == b"stay\n"
        else:
            assert ls_tree(repo, rev, "gone.txt") is None
            assert ls_tree(repo, rev, "keep.txt") == ("100644", "blob")
    elif kind_name == "rename":
        body = b"".join(b"line %d\n" % i for i in range(20))
        if rev is None:
            assert not os.path.lexists(repo / "old.txt")
            assert (repo / "new.txt").read_bytes() == body
        else:
            assert ls_tree(repo, rev, "old.txt") is None
            assert show_bytes(repo, f"{rev}:new.txt") == body
    elif kind_name == "binary":
        data = b"\0\1\377new\0"
        for name in ("img.bin", "fresh.bin"):
            if rev is None:
                assert (repo / name).read_bytes() == data
            else:
                assert show_bytes(repo, f"{rev}:{name}") == data


@pytest.mark.parametrize("how", ["branch", "checkout", "partial-branch", "partial-checkout"])
@pytest.mark.parametrize("kind_name", sorted(KINDS))
async def test_every_kind_of_change_arrives_exactly(
    make_supervisor: SupervisorFactory, repo: Path, kind_name: str, how: str
) -> None:
    kind = KINDS[kind_name]
    prepare(repo, kind)
    engine = ScriptedEngine([[Run(kind.command), Write("other.txt", "not selected\n")]])
    sup = await make_supervisor(
        drafter=ScriptedDrafter([contract(("kind", kind.check))]), engine=engine
    )
    sid = (await sup.start("task", repo)).session_id
    await sup.confirm(sid)
    await sup.wait_for(sid, needs=True, timeout=20)
    partial = how.startswith("partial")
    delivery = how.removeprefix("partial-")
    selection = {p: None for p in kind.selected} if partial else None
    result = await sup.approve(sid, delivery=delivery, selection=selection, discard_rest=True)
    assert result.state is S.MERGED and result.partial is partial
    assert result.commit
    expect_state(kind_name, repo, result.commit)  # the result commit itself
    if delivery == "branch":
        assert result.branch
        expect_state(kind_name, repo, result.branch)
        assert (ls_tree(repo, result.branch, "other.txt") is None) is partial
        assert git(repo, "status", "--porcelain") == ""  # checkout untouched
    else:
        expect_state(kind_name, repo, None)
        assert os.path.exists(repo / "other.txt") is not partial
        assert git(repo, "diff", "--cached", "--name-only") == ""  # index untouched
        # the checkout now holds exactly the result commit's tree (mode bits too)
        assert checkout_tree(repo) == git(repo, "rev-parse", f"{result.commit}^{{tree}}").strip()
        again = await _redeliver_is_already(sid, repo)
        assert again


async def _redeliver_is_already(sid: str, repo: Path) -> bool:
    """A second session making the same change finds the checkout already holding it."""
    head = git(repo, "rev-parse", "HEAD").strip()
    result = git(repo, "rev-parse", "refs/corral/results/" + sid).strip()
    files = parse_patch(tree_patch(repo, head, result))
    plan = plan_checkout(repo, head, result, touched_paths(files))
    return not plan.to_apply and not plan.conflicts


async def test_a_mode_change_the_operator_reverted_is_a_conflict_not_a_silent_skip(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    prepare(repo, KINDS["mode"])
    sup = await make_supervisor(
        drafter=ScriptedDrafter([contract(("kind", "test -x tool.sh"))]),
        engine=ScriptedEngine([[Run("chmod +x tool.sh")]]),
    )
    sid = (await sup.start("task", repo)).session_id
    await sup.confirm(sid)
    await sup.wait_for(sid, needs=True, timeout=20)
    (repo / "tool.sh").write_bytes(b"operator\n")
    with pytest.raises(CorralError, match=r"you changed tool\.sh"):
        await sup.approve(sid, delivery="checkout")
    assert (repo / "tool.sh").read_bytes() == b"operator\n"
    assert not stat.S_IMODE(os.stat(repo / "tool.sh").st_mode) & 0o111


# -- submodules ---------------------------------------------------------------------------


def make_submodule_repo(tmp_path: Path, repo: Path) -> Path:
    lib = tmp_path / "lib"
    lib.mkdir()
    git(lib, "init", "-q", "-b", "main")
    (lib / "lib.txt").write_text("lib v1\n")
    git(lib, "add", "lib.txt")
    git(lib, "commit", "-q", "-m", "lib")
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib), "lib")
    git(repo, "commit", "-q", "-m", "add lib")
    return lib


async def test_a_checkout_with_initialised_submodules_is_refused_at_start(
    make_supervisor: SupervisorFactory, repo: Path, tmp_path: Path
) -> None:
    make_submodule_repo(tmp_path, repo)
    assert (repo / "lib" / "lib.txt").exists()  # initialised in the checkout
    sup = await make_supervisor(
        drafter=ScriptedDrafter([contract(("t", "true"))]), engine=ScriptedEngine([[]])
    )
    with pytest.raises(CorralError, match=r"initialised submodules \(lib\)"):
        await sup.start("task", repo)
    assert sup.list() == []
    assert not (sup.state_dir / "worktrees").exists() or not any(
        (sup.state_dir / "worktrees").iterdir()
    )


async def test_work_inside_an_uninitialised_submodule_keeps_the_worktree(
    make_supervisor: SupervisorFactory, repo: Path, tmp_path: Path
) -> None:
    make_submodule_repo(tmp_path, repo)
    git(repo, "submodule", "deinit", "-q", "--all", "--force")  # not initialised here
    assert not any((repo / "lib").iterdir())
    engine = ScriptedEngine(
        [[Write("app.txt", "app\n"), Run("mkdir -p lib && echo agent > lib/edit.txt")]]
    )
    sup = await make_supervisor(
        drafter=ScriptedDrafter([contract(("app", "test -f app.txt"))]), engine=engine
    )
    sid = (await sup.start("task", repo)).session_id
    await sup.confirm(sid)
    await sup.wait_for(sid, needs=True, timeout=20)
    result = await sup.approve(sid)
    assert result.state is S.MERGED
    worktree = sup.get(sid).session.worktree
    assert worktree and (Path(worktree) / "lib" / "edit.txt").read_text() == "agent\n"
    assert result.note and "lib" in result.note and worktree in result.note
    lease = lease_of(sup.state_dir, worktree)
    assert lease is not None and lease.state is LeaseState.RETAINED


def test_a_same_size_rewrite_in_the_index_second_is_in_the_snapshot(tmp_path: Path) -> None:
    """The binary-kind flake: a file rewritten with the same size in the second
    its index was written was missing from the verified tree (the private
    index copy got a fresh mtime, so git trusted the stale stat data)."""
    repo = init_repo(tmp_path / "r")
    for _ in range(20):
        (repo / "img.bin").write_bytes(b"\0\1\2old\0")
        git(repo, "add", "img.bin")
        (repo / "img.bin").write_bytes(b"\0\1\377new\0")  # same size, same inode
        index_mtime = int(os.stat(repo / ".git" / "index").st_mtime)
        st = os.stat(repo / "img.bin")
        if int(st.st_mtime) == index_mtime == int(st.st_ctime):
            break
    else:
        pytest.skip("could not write the file and the index within one second")
    time.sleep(1.1)  # the snapshot happens in a later second
    tree = snapshot_tree(repo)
    want = git(repo, "hash-object", "img.bin").strip()
    assert git(repo, "rev-parse", f"{tree}:img.bin").strip() == want
