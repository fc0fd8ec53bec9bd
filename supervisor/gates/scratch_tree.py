"""Verification trees: the checks run on a fresh checkout of exactly the tree
a delivery would produce, never on a worktree an agent used.

A tree is materialized as a detached git worktree of a commit holding it, so
only what the tree holds is there: no ignored file (`__pycache__`,
`node_modules`, `build/`, a `.venv`) and nothing else an agent left behind,
and none of the operator's files a delivery will not carry. It is a real
worktree with a `.git`, so tools that read git metadata (setuptools-scm,
hatch-vcs, `git describe`) work in it as in a clone. Checks and the setup
write into it freely; what they write never reaches the agent's worktree.

Checking out a large repository from objects takes most of a second, so a
checkout the checks are done with is kept ready (a few per repository) and
moved to the next tree instead. When the checks are done, and again before
the next ones, `git checkout --force --detach` rewrites only the files that
differ, `git clean -ffdx` removes everything the checks wrote (ignored files
included), its private sandbox git dir is forgotten, and then git must report
it exactly at the commit with nothing modified, untracked or ignored, or it
is removed and a fresh one is made. Checks run
confined and cannot write the worktree's real git metadata, so git's own view
of the checkout (index, HEAD) is corral's.

Each scratch is leased (see `Workspaces.add_scratch`): the ready ones are
removed by `close`, and by the start-up reconcile when corral died first.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import stat
import threading
from collections.abc import AsyncIterator
from pathlib import Path

from ..git.errors import GitError
from ..git.leases import Lease
from ..git.pins import WorktreeMetadataChanged
from ..git.run import git
from ..git.trees import commit_tree
from ..sandbox.gitview import discard_view
from ..sandbox.layout import git_layout
from ..sandbox.policy import active_policy
from ..workspaces import Workspaces

MATERIALIZED_MESSAGE = "corral: a tree under verification\n"
READY_PER_REPO = 2  # idle checkouts kept per repository
READY_OWNER = "verification"  # the lease's owner: no one session's
PARALLEL_CHECKOUT = ("-c", "checkout.workers=0", "-c", "checkout.thresholdForParallelism=200")

log = logging.getLogger(__name__)


class ScratchTrees:
    """Fresh checkouts of given commits for checks, each used by one run at
    a time; the ones a run is done with wait, ready to be moved to the next."""

    def __init__(self, workspaces: Workspaces) -> None:
        self._workspaces = workspaces
        self._ready: dict[str, list[Lease]] = {}
        self._lock = threading.Lock()  # taken and given back from worker threads

    @contextlib.asynccontextmanager
    async def materialized(
        self, repo: Path, tree: str, parent: str, owner: str
    ) -> AsyncIterator[Path]:
        """A fresh checkout of `tree` (as a commit on `parent`) for `owner`'s
        checks, for as long as the block runs (also when it is cancelled)."""
        commit = await asyncio.to_thread(commit_tree, repo, tree, parent, MATERIALIZED_MESSAGE)
        async with self.checkout(repo, commit, owner) as path:
            yield path

    @contextlib.asynccontextmanager
    async def checkout(self, repo: Path, commit: str, owner: str) -> AsyncIterator[Path]:
        """A checkout of exactly `commit` with nothing else in it. Ready
        checkouts serve any session, so `owner` (the session asking) is kept
        off the checkout and its lease."""
        lease = await asyncio.to_thread(self._take, repo, commit)
        try:
            yield Path(lease.path)
        finally:
            await asyncio.shield(asyncio.to_thread(self._give_back, repo, lease, commit))

    def close(self) -> None:
        """Remove the ready checkouts (blocking)."""
        with self._lock:
            ready = [lease for leases in self._ready.values() for lease in leases]
            self._ready.clear()
        for lease in ready:
            self._workspaces.drop_scratch(lease)

    def _take(self, repo: Path, commit: str) -> Lease:
        key = str(repo.resolve())
        while True:
            with self._lock:
                ready = self._ready.get(key)
                lease = ready.pop() if ready else None
            if lease is None:
                # kept ready for any session's checks afterwards: named for none
                return self._workspaces.add_scratch(repo, commit, READY_OWNER)
            if _moved_to(Path(lease.path), commit):
                return lease
            self._workspaces.drop_scratch(lease)

    def _give_back(self, repo: Path, lease: Lease, commit: str) -> None:
        """Back to the ready ones, emptied of what the checks wrote now (it
        must not linger where a later run could look for it), or removed."""
        key = str(repo.resolve())
        if not _moved_to(Path(lease.path), commit):
            self._workspaces.drop_scratch(lease)
            return
        with self._lock:
            ready = self._ready.setdefault(key, [])
            if len(ready) < READY_PER_REPO:
                ready.append(lease)
                return
        self._workspaces.drop_scratch(lease)


def _moved_to(path: Path, commit: str) -> bool:
    """Move a used checkout to `commit` and prove it holds exactly that:
    False (and a line in the log) when git cannot say so."""
    try:
        try:
            _reset(path, commit)
        except GitError:
            _writable_dirs(path)  # a check may have locked a directory it made
            _reset(path, commit)
        left = git(
            path, "status", "--porcelain", "-z", "--ignored", "--untracked-files=all", timeout=300
        )
        head = git(path, "rev-parse", "--verify", "HEAD").strip()
        discard_view(git_layout(path), active_policy().state_dir)
    except (GitError, WorktreeMetadataChanged, OSError) as exc:
        log.info("a ready checkout could not be reused (%s); making a fresh one", exc)
        return False
    if left or head != commit:
        log.info("a ready checkout still held %r at %s; making a fresh one", left[:200], head)
        return False
    return True


def _reset(path: Path, commit: str) -> None:
    """Only the files that differ from `commit` are written; everything
    else in the checkout (ignored files included) is removed."""
    git(path, *PARALLEL_CHECKOUT, "checkout", "-q", "--force", "--detach", commit, timeout=300)
    git(path, "clean", "-ffdxq", timeout=300)


def _writable_dirs(root: Path) -> None:
    """Give the owner back write and search on every directory of the
    checkout (never following a link), so git can replace what is inside."""
    with contextlib.suppress(OSError):
        os.chmod(root, stat.S_IMODE(os.lstat(root).st_mode) | 0o700)
    for top, dirs, _files in os.walk(root):
        for name in dirs:
            full = os.path.join(top, name)
            with contextlib.suppress(OSError):
                mode = os.lstat(full).st_mode
                if stat.S_ISDIR(mode) and mode & 0o700 != 0o700:
                    os.chmod(full, stat.S_IMODE(mode) | 0o700)
