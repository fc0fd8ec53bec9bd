"""The git layer on real repositories: dirty snapshots, partial patches,
branch and checkout delivery, leases and reconciliation."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from corral.supervisor.errors import CorralError
from corral.supervisor.git.delivery import (
    DeliveryRefused,
    apply_to_checkout,
    commit_patch,
    create_branch,
    touched_paths,
)
from corral.supervisor.git.leases import (
    LeaseBook,
    LeaseState,
    add_worktree,
    list_worktrees,
    reconcile,
    remove_worktree,
)
from corral.supervisor.git.patches import build_patch, parse_patch, validate_selection
from corral.supervisor.git.snapshot import snapshot_checkout
from corral.supervisor.git.trees import snapshot_tree, tree_patch


def task_patch(wt: Path, start: str) -> str:
    """The worktree's change since `start`, through its snapshot tree."""
    return tree_patch(wt, start, snapshot_tree(wt))


def sh(cwd: Path, cmd: str) -> str:
    return subprocess.run(
        cmd, shell=True, cwd=cwd, check=True, capture_output=True, text=True
    ).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    sh(root, "git init -q -b main && git config user.name t && git config user.email t@t")
    (root / "a.txt").write_text("one\n")
    (root / "long.txt").write_text("".join(f"{i}\n" for i in range(1, 31)))
    (root / ".gitignore").write_text(".env\n")
    sh(root, "git add -A && git commit -qm init")
    return root


def worktree_at(repo: Path, dest: Path, commit: str) -> Path:
    sh(repo, f"git worktree add -q --detach {dest} {commit}")
    return dest


def test_a_clean_checkout_starts_from_head(repo: Path) -> None:
    ident = snapshot_checkout(repo, "s1")
    assert ident.snapshot is None
    assert ident.head == sh(repo, "git rev-parse HEAD").strip()


def test_a_dirty_checkout_is_snapshotted_without_touching_it(repo: Path) -> None:
    (repo / "a.txt").write_text("one\nstaged\n")
    sh(repo, "git add a.txt")
    (repo / "a.txt").write_text("one\nstaged\nunstaged\n")
    (repo / "new file ü.txt").write_text("untracked\n")
    (repo / ".env").write_text("SECRET=1\n")
    status_before = sh(repo, "git status --porcelain")
    index_before = sh(repo, "git ls-files -s")
    head_before = sh(repo, "git rev-parse HEAD")
    ident = snapshot_checkout(repo, "s1")
    assert ident.snapshot is not None
    assert sh(repo, "git status --porcelain") == status_before
    assert sh(repo, "git ls-files -s") == index_before
    assert sh(repo, "git rev-parse HEAD") == head_before
    assert sh(repo, f"git show {ident.snapshot}:a.txt") == "one\nstaged\nunstaged\n"
    assert sh(repo, f"git show '{ident.snapshot}:new file ü.txt'") == "untracked\n"
    files = sh(repo, f"git ls-tree -r --name-only {ident.snapshot}")
    assert ".env" not in files  # ignored secrets never enter the snapshot
    assert sh(repo, "git rev-parse refs/corral/snapshots/s1").strip() == ident.snapshot


def _change_three_hunks(wt: Path) -> None:
    lines = (wt / "long.txt").read_text().splitlines()
    lines[1], lines[14], lines[28] = "two", "fifteen", "twentynine"
    (wt / "long.txt").write_text("\n".join(lines) + "\n")


def test_partial_approval_keeps_exactly_the_selected_hunk(repo: Path, tmp_path: Path) -> None:
    head = sh(repo, "git rev-parse HEAD").strip()
    wt = worktree_at(repo, tmp_path / "wt", head)
    _change_three_hunks(wt)
    (wt / "b.bin").write_bytes(b"\x00\x01\x02")
    files = parse_patch(task_patch(wt, head))
    long = next(f for f in files if f.path == "long.txt")
    assert len(long.hunks) == 3
    assert validate_selection(files, {"long.txt": {7}}) == ["long.txt has 3 hunk(s); no hunk 8"]
    assert validate_selection(files, {"b.bin": {0}}) == [
        "b.bin can only be approved as a whole file (binary)"
    ]
    patch = build_patch(files, {"long.txt": {1}})
    commit = commit_patch(repo, head, patch, "partial\n")
    content = sh(repo, f"git show {commit}:long.txt").splitlines()
    assert content[1] == "2" and content[14] == "fifteen" and content[28] == "29"
    assert "b.bin" not in sh(repo, f"git ls-tree -r --name-only {commit}")


def test_branch_is_rebuilt_on_the_current_head_and_refuses_conflicts(
    repo: Path, tmp_path: Path
) -> None:
    head = sh(repo, "git rev-parse HEAD").strip()
    wt = worktree_at(repo, tmp_path / "wt", head)
    (wt / "a.txt").write_text("one\ntask\n")
    patch = task_patch(wt, head)
    # the operator commits something unrelated meanwhile: HEAD moves
    (repo / "other.txt").write_text("x\n")
    sh(repo, "git add other.txt && git commit -qm other")
    new_head = sh(repo, "git rev-parse HEAD").strip()
    commit = commit_patch(repo, new_head, patch, "task\n")
    create_branch(repo, "corral/abc", commit)
    assert sh(repo, "git show corral/abc:a.txt") == "one\ntask\n"
    assert sh(repo, "git show corral/abc:other.txt") == "x\n"
    with pytest.raises(DeliveryRefused, match="already exists"):
        create_branch(repo, "corral/abc", commit)
    # a conflicting change on HEAD is refused, naming the file
    (repo / "a.txt").write_text("operator\n")
    sh(repo, "git commit -qam conflict")
    with pytest.raises(DeliveryRefused, match=r"a\.txt"):
        commit_patch(repo, sh(repo, "git rev-parse HEAD").strip(), patch, "task\n")


def test_checkout_delivery_touches_only_working_files(repo: Path, tmp_path: Path) -> None:
    head = sh(repo, "git rev-parse HEAD").strip()
    wt = worktree_at(repo, tmp_path / "wt", head)
    (wt / "a.txt").write_text("one\ntask\n")
    (wt / "added.txt").write_text("new\n")
    (wt / "long.txt").unlink()
    files = parse_patch(task_patch(wt, head))
    result = commit_patch(repo, head, build_patch(files, None), "r\n")
    index_before = sh(repo, "git ls-files -s")
    assert apply_to_checkout(repo, head, result, touched_paths(files)) is False
    assert (repo / "a.txt").read_text() == "one\ntask\n"
    assert (repo / "added.txt").read_text() == "new\n"
    assert not (repo / "long.txt").exists()
    assert sh(repo, "git ls-files -s") == index_before
    assert sh(repo, "git rev-parse HEAD").strip() == head
    assert (
        apply_to_checkout(repo, head, result, touched_paths(files)) is True
    )  # a repeat: already applied


def test_checkout_delivery_refuses_a_file_the_operator_changed(repo: Path, tmp_path: Path) -> None:
    head = sh(repo, "git rev-parse HEAD").strip()
    wt = worktree_at(repo, tmp_path / "wt", head)
    (wt / "a.txt").write_text("one\ntask\n")
    files = parse_patch(task_patch(wt, head))
    result = commit_patch(repo, head, build_patch(files, None), "r\n")
    (repo / "a.txt").write_text("operator edit\n")
    with pytest.raises(DeliveryRefused, match=r"you changed a\.txt"):
        apply_to_checkout(repo, head, result, touched_paths(files))
    assert (repo / "a.txt").read_text() == "operator edit\n"


def test_a_snapshot_tree_changes_with_any_edit_and_leaves_the_index_alone(
    repo: Path, tmp_path: Path
) -> None:
    head = sh(repo, "git rev-parse HEAD").strip()
    wt = worktree_at(repo, tmp_path / "wt", head)
    (wt / "a.txt").write_text("v1\n")
    (wt / ".env").write_text("ignored\n")
    first = snapshot_tree(wt)
    assert snapshot_tree(wt) == first
    assert sh(wt, "git diff --cached --name-only") == ""  # the worktree's index is untouched
    assert ".env" not in sh(repo, f"git ls-tree --name-only {first}")
    (wt / "sneaky.txt").write_text("late edit\n")
    assert snapshot_tree(wt) != first


def _book(tmp_path: Path) -> LeaseBook:
    import sqlite3

    return LeaseBook(sqlite3.connect(tmp_path / "leases.db", isolation_level=None))


def test_lease_lifecycle_and_dirty_worktrees_need_force(repo: Path, tmp_path: Path) -> None:
    book = _book(tmp_path)
    head = sh(repo, "git rev-parse HEAD").strip()
    lease = add_worktree(book, repo, tmp_path / "wts" / "one", head, session_id="s1")
    assert lease.state is LeaseState.READY
    assert lease.path in list_worktrees(repo)
    (Path(lease.path) / "dirty.txt").write_text("work\n")
    removed, why = remove_worktree(book, lease)
    assert not removed and "uncommitted" in why
    assert Path(lease.path, "dirty.txt").exists()
    assert book.get(lease.path).state is LeaseState.CLEANUP_BLOCKED  # type: ignore[union-attr]
    removed, _ = remove_worktree(book, lease, force=True)
    assert removed and not Path(lease.path).exists()
    assert book.get(lease.path).state is LeaseState.REMOVED  # type: ignore[union-attr]


def test_a_worktree_whose_head_moved_is_never_removed(repo: Path, tmp_path: Path) -> None:
    book = _book(tmp_path)
    head = sh(repo, "git rev-parse HEAD").strip()
    lease = add_worktree(book, repo, tmp_path / "wts" / "two", head, session_id="s2")
    sh(Path(lease.path), "git -c user.name=a -c user.email=a@a commit -q --allow-empty -m agent")
    removed, why = remove_worktree(book, lease, force=True)
    assert not removed and "HEAD moved" in why
    assert Path(lease.path).is_dir()


def test_reconcile_after_a_crash_between_lease_and_worktree_add(repo: Path, tmp_path: Path) -> None:
    from corral.supervisor.git.leases import Lease

    book = _book(tmp_path)
    head = sh(repo, "git rev-parse HEAD").strip()
    # crash 1: lease written, git never ran
    ghost = str((tmp_path / "wts" / "ghost").resolve())
    book.put(Lease(path=ghost, session_id="g", repo=str(repo), head=head))
    # crash 2: git ran, the lease was never marked ready
    half = tmp_path / "wts" / "half"
    book.put(Lease(path=str(half.resolve()), session_id="h", repo=str(repo), head=head))
    sh(repo, f"git worktree add -q --detach {half} {head}")
    # a scratch baseline copy left behind
    scratch = add_worktree(
        book, repo, tmp_path / "scratch" / "b", head, session_id="h", kind="scratch"
    )
    changed = {lease.path: lease.state for lease in reconcile(book)}
    assert changed[ghost] is LeaseState.REMOVED
    assert changed[str(half.resolve())] is LeaseState.RECOVERY_REQUIRED
    assert half.is_dir()  # never deleted: only marked
    assert changed[scratch.path] is LeaseState.REMOVED
    assert not Path(scratch.path).exists()


def test_snapshot_of_an_empty_repository_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "empty"
    root.mkdir()
    sh(root, "git init -q")
    with pytest.raises(CorralError, match="no commits yet"):
        snapshot_checkout(root, "s")
