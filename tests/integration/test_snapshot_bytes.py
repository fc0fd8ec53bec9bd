"""The snapshot corral verifies, shows and delivers is the worktree's bytes:
no filter or conversion runs, links stay links, modes and odd path names are
kept, a directory swapped for a link never pulls in what it points at, and a
same-size rewrite right after a snapshot is still seen (real git)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
from pathlib import Path

from corral.supervisor.git.leases import LeaseBook, add_worktree
from corral.supervisor.git.trees import snapshot_tree
from tests.conftest import git, init_repo


def _worktree(tmp_path: Path) -> tuple[Path, Path]:
    repo = init_repo(tmp_path / "repo")
    (repo / "dir").mkdir()
    (repo / "dir" / "a.txt").write_text("a\n")
    (repo / "run.sh").write_text("#!/bin/sh\n")
    (repo / "run.sh").chmod(0o755)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "files")
    book = LeaseBook(sqlite3.connect(":memory:"))
    wt = tmp_path / "state" / "worktrees" / "w"
    add_worktree(book, repo, wt, git(repo, "rev-parse", "HEAD").strip(), session_id="s")
    return repo, wt


def blob(repo: Path, rev: str, kind: str = "-p") -> bytes:
    """An object's bytes (every object's with `--batch-all-objects`)."""
    if rev == "--batch-all-objects":
        argv = ["git", "cat-file", "--batch-all-objects", "--batch"]
    else:
        argv = ["git", "cat-file", kind, rev]
    return subprocess.run(argv, cwd=repo, capture_output=True, check=True).stdout


def _listing(repo: Path, tree: str) -> str:
    return git(repo, "ls-tree", "-r", tree)


def test_a_plain_worktree_gives_the_tree_git_add_would(tmp_path: Path) -> None:
    repo, wt = _worktree(tmp_path)
    assert snapshot_tree(wt) == git(repo, "rev-parse", "HEAD^{tree}").strip()
    (wt / "new.txt").write_text("new\n")
    (wt / "dir" / "a.txt").unlink()
    tree = snapshot_tree(wt)
    listed = _listing(repo, tree)
    assert "new.txt" in listed and "dir/a.txt" not in listed and "100755" in listed


def test_bytes_links_modes_and_odd_names_are_kept(tmp_path: Path) -> None:
    repo, wt = _worktree(tmp_path)
    marker = tmp_path / "filter-ran"
    git(repo, "config", "filter.x.clean", f"touch {marker}; tr a-z A-Z")
    (wt / ".gitattributes").write_text("* filter=x text eol=crlf\n")
    (wt / "crlf.txt").write_bytes(b"one\r\ntwo\n")
    os.symlink("dir/a.txt", wt / "link")
    (wt / "run.sh").chmod(0o644)
    odd = b"caf\xe9 n\xffame.txt"  # not UTF-8
    with open(os.path.join(os.fsencode(wt), odd), "wb") as f:
        f.write(b"odd\n")
    tree = snapshot_tree(wt)
    assert not marker.exists()  # no filter ran
    assert blob(repo, f"{tree}:crlf.txt") == b"one\r\ntwo\n"  # no conversion either
    rows = _listing(repo, tree)
    assert "120000 blob" in rows and git(repo, "cat-file", "-p", f"{tree}:link") == "dir/a.txt"
    assert any(r.startswith("100644 blob") and r.endswith("\trun.sh") for r in rows.splitlines())
    names = subprocess.run(
        ["git", "ls-tree", "-r", "-z", "--name-only", tree], cwd=repo, capture_output=True
    ).stdout.split(b"\0")
    assert odd in names and blob(repo, tree + ":" + os.fsdecode(odd)) == b"odd\n"


def test_a_directory_swapped_for_a_link_never_pulls_in_its_target(tmp_path: Path) -> None:
    repo, wt = _worktree(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "a.txt").write_text("SECRET\n")
    (wt / "dir" / "a.txt").unlink()
    (wt / "dir").rmdir()
    os.symlink(outside, wt / "dir")  # tracked dir/a.txt now reads through a link
    tree = snapshot_tree(wt)
    rows = _listing(repo, tree)
    assert "dir/a.txt" not in rows and b"SECRET" not in blob(repo, "--batch-all-objects", "")
    assert git(repo, "cat-file", "-p", f"{tree}:dir") == str(outside)  # the link itself


def test_a_same_size_rewrite_right_after_a_snapshot_is_seen(tmp_path: Path) -> None:
    repo, wt = _worktree(tmp_path)
    first = snapshot_tree(wt)
    target = wt / "dir" / "a.txt"
    before = target.stat()
    target.write_text("b\n")  # same size, maybe the same timestamp granule
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
    second = snapshot_tree(wt)
    assert second != first
    assert git(repo, "cat-file", "-p", f"{second}:dir/a.txt") == "b\n"
    assert snapshot_tree(wt) == second  # and again, from the cache


def test_an_unchanged_worktree_whose_tree_was_pruned_gets_its_tree_written_again(
    tmp_path: Path,
) -> None:
    """The second read of an unchanged worktree reuses the first's tree while
    the repository holds it; after gc prunes it, the tree is written again
    (never an id the repository no longer has)."""
    repo, wt = _worktree(tmp_path)
    (wt / "new.txt").write_text("new\n")
    tree = snapshot_tree(wt)
    assert snapshot_tree(wt) == tree
    loose = repo / ".git" / "objects" / tree[:2] / tree[2:]
    assert loose.is_file()
    loose.unlink()  # as `git gc --prune=now` would (the tree is reachable from nothing)
    again = snapshot_tree(wt)
    assert again == tree
    assert blob(repo, tree, "-t").strip() == b"tree"
