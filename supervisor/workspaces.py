"""Where sessions work: leased git worktrees under `<state>/worktrees`, and
disposable scratch copies under `<state>/scratch` for baselines.

All methods block (git, SQLite); the supervisor calls them through
`asyncio.to_thread`. The lease book has its own SQLite connection guarded by
a lock, so worker threads never share a cursor with the event loop.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .git.leases import (
    Lease,
    LeaseBook,
    LeaseState,
    add_worktree,
    is_clean,
    list_worktrees,
    matches,
    reconcile,
    remove_worktree,
)
from .git.repo import head_commit
from .git.snapshot import is_dirty, snapshot_checkout
from .git.workspace import GitWorkspace
from .models import CheckoutIdentity
from .states import label

REJECTED_RETENTION_SECS = 86400.0


@dataclass
class Provisioned:
    workspace: GitWorkspace
    start_commit: str
    identity: CheckoutIdentity | None  # None: checkout delivery is not offered


class Workspaces:
    def __init__(self, state_dir: Path, db_path: Path) -> None:
        self.state_dir = state_dir
        self._lock = threading.Lock()
        conn = sqlite3.connect(db_path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA busy_timeout = 5000")
        self._conn = conn
        self.book = LeaseBook(conn)

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    # -- sessions -------------------------------------------------------------

    def provision(self, repo: Path, session_id: str, base: str | None) -> Provisioned:
        """A worktree for a new session. Without `base` it starts from exactly
        what the operator sees (a private snapshot when the checkout is dirty);
        then checkout delivery is offered. An explicit base equal to a clean
        HEAD offers it too."""
        if base is None:
            identity: CheckoutIdentity | None = snapshot_checkout(repo, session_id)
            assert identity is not None
            start = identity.base
        else:
            start = base
            head = head_commit(repo)
            identity = CheckoutIdentity(head=base) if base == head and not is_dirty(repo) else None
        path = self.state_dir / "worktrees" / label(session_id)
        with self._lock:
            add_worktree(self.book, repo, path, start, session_id=session_id)
        return Provisioned(GitWorkspace(repo, path.resolve()), start, identity)

    def mark(self, path: str | None, state: LeaseState, **kw: object) -> None:
        if path is None:
            return
        with self._lock:
            self.book.set_state(str(Path(path).resolve()), state, **kw)  # type: ignore[arg-type]

    def retain(self, path: str | None, *, rejected: bool = False, note: str = "") -> None:
        """Keep a worktree for a look (failed, cancelled, partially delivered).
        A rejected one may be cleaned by the sweep after a day."""
        until = time.time() + REJECTED_RETENTION_SECS if rejected else None
        self.mark(
            path, LeaseState.RETAINED, note=note or None, retain_until=until, discard_ok=rejected
        )

    def disposable(self, path: str) -> bool:
        """A worktree kept only until its rejection's day is up."""
        with self._lock:
            lease = self.book.get(str(Path(path).resolve()))
        return lease is not None and lease.state is LeaseState.RETAINED and lease.discard_ok

    def remove(self, path: str | None, *, force: bool = False) -> tuple[bool, str]:
        if path is None:
            return True, "no worktree"
        with self._lock:
            lease = self.book.get(str(Path(path).resolve()))
            if lease is None:
                return False, "no lease for this worktree; remove it by hand if it is yours"
            return remove_worktree(self.book, lease, force=force)

    def forget(self, session_ids: set[str]) -> None:
        """Drop the lease rows of deleted sessions whose worktrees are gone
        (a lease of anything still on disk stays, so nothing is orphaned)."""
        with self._lock:
            for lease in self.book.all():
                if lease.session_id in session_ids and lease.state is LeaseState.REMOVED:
                    self.book.drop(lease.path)

    # -- scratch --------------------------------------------------------------

    def add_scratch(self, repo: Path, commit: str, owner: str) -> Lease:
        """A leased detached worktree at `commit` under `scratch/`; the
        caller removes it (`drop_scratch`), or the start-up reconcile does."""
        path = self.state_dir / "scratch" / f"{label(owner)}-{uuid.uuid4().hex[:6]}"
        with self._lock:
            return add_worktree(self.book, repo, path, commit, session_id=owner, kind="scratch")

    def drop_scratch(self, lease: Lease) -> tuple[bool, str]:
        with self._lock:
            return remove_worktree(self.book, lease, force=True)

    @contextlib.contextmanager
    def scratch(self, repo: Path, commit: str, session_id: str) -> Iterator[Path]:
        """A disposable detached worktree at `commit`, removed afterwards."""
        lease = self.add_scratch(repo, commit, session_id)
        try:
            yield Path(lease.path)
        finally:
            self.drop_scratch(lease)

    # -- housekeeping -----------------------------------------------------------

    def reconcile(self) -> list[Lease]:
        with self._lock:
            return reconcile(self.book)

    def discard_unclaimed(self, claimed: set[str]) -> list[str]:
        """Remove session worktrees that no stored session claims (a crash came
        between creating one and saving its session) when they hold nothing:
        clean and exactly as leased. Anything else is left for a look.
        Returns the removed paths."""
        removed: list[str] = []
        for lease in self.leases():
            if (
                lease.kind != "session"
                or lease.state is not LeaseState.READY
                or lease.session_id is None
                or lease.session_id in claimed
                or not Path(lease.path).is_dir()
                or not is_clean(Path(lease.path))
                or matches(lease, list_worktrees(Path(lease.repo))) is not None
            ):
                continue
            ok, _why = self.remove(lease.path)
            if ok:
                removed.append(lease.path)
        return removed

    def leases(self) -> list[Lease]:
        with self._lock:
            return self.book.all()

    def expired_rejections(self, now: float) -> list[Lease]:
        return [
            lease
            for lease in self.leases()
            if lease.state is LeaseState.RETAINED
            and lease.discard_ok
            and lease.retain_until is not None
            and lease.retain_until <= now
        ]

    def discard_expired_rejections(self, now: float) -> list[str]:
        """Remove the worktrees of rejected sessions once their day is up (each
        only when git's listing still matches its lease); returns the paths."""
        removed: list[str] = []
        for lease in self.expired_rejections(now):
            ok, _why = self.remove(lease.path)
            if ok:
                removed.append(lease.path)
        return removed

    def unknown_worktrees(self) -> list[str]:
        """Worktrees under our state dir that git lists but no lease knows."""
        known = {lease.path for lease in self.leases() if lease.state is not LeaseState.REMOVED}
        repos = {lease.repo for lease in self.leases()}
        ours = str((self.state_dir).resolve())
        found: list[str] = []
        for repo in repos:
            if not Path(repo).is_dir():
                continue
            for path in list_worktrees(Path(repo)):
                if path.startswith(ours) and path not in known:
                    found.append(path)
        return sorted(set(found))


def describe_dirty(path: str) -> str:
    return "clean" if is_clean(Path(path)) else "uncommitted changes"
