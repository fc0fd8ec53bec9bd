"""Managed worktrees with durable leases, so no worktree is lost or removed twice.

`allocating → ready → in_use → retained | removed`, plus `cleanup_blocked`
(git's view no longer matches the lease, or the tree is dirty) and
`recovery_required` (found in a state a crash could leave).

The lease is written before `git worktree add`. Reconciliation compares leases
with `git worktree list --porcelain`, and removal never touches a worktree
whose path and head do not match its lease exactly, nor a dirty one unless
forced. Scratch worktrees (baselines) are disposable by definition.
"""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
import time
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from .pins import pin_worktree, pins_for, unpin
from .run import GitError, WorktreeMetadataChanged, git

LEASE_SCHEMA = """
CREATE TABLE IF NOT EXISTS leases (
    path TEXT PRIMARY KEY,
    session_id TEXT,
    repo TEXT NOT NULL,
    head TEXT,
    kind TEXT NOT NULL,
    state TEXT NOT NULL,
    note TEXT,
    retain_until REAL,
    discard_ok INTEGER NOT NULL DEFAULT 0,
    updated_at REAL NOT NULL
);
"""


class LeaseState(StrEnum):
    ALLOCATING = "allocating"
    READY = "ready"
    IN_USE = "in_use"
    RETAINED = "retained"
    REMOVED = "removed"
    CLEANUP_BLOCKED = "cleanup_blocked"
    RECOVERY_REQUIRED = "recovery_required"


class Lease(BaseModel):
    path: str
    session_id: str | None
    repo: str
    head: str | None
    kind: str = "session"  # or "scratch"
    state: LeaseState = LeaseState.ALLOCATING
    note: str | None = None
    retain_until: float | None = None
    discard_ok: bool = False
    updated_at: float = 0.0


@dataclass
class GitWorktree:
    path: str
    head: str | None
    branch: str | None
    prunable: bool


def list_worktrees(repo: Path) -> dict[str, GitWorktree]:
    """git's own listing, keyed by resolved path."""
    out = git(repo, "worktree", "list", "--porcelain", "-z", check=False)
    found: dict[str, GitWorktree] = {}
    current: dict[str, str] = {}

    def flush() -> None:
        if "worktree" in current:
            path = str(Path(current["worktree"]).resolve())
            found[path] = GitWorktree(
                path=path,
                head=current.get("HEAD"),
                branch=current.get("branch"),
                prunable="prunable" in current,
            )
        current.clear()

    for field in out.split("\0"):
        if not field:
            flush()
            continue
        key, _, value = field.partition(" ")
        current[key] = value
    flush()
    return found


def is_clean(path: Path) -> bool:
    try:
        return git(path, "status", "--porcelain", "--untracked-files=all").strip() == ""
    except GitError:
        return False


class LeaseBook:
    """Lease rows in the supervisor's SQLite database."""

    def __init__(self, conn: sqlite3.Connection, *, readonly: bool = False) -> None:
        self.conn = conn
        if not readonly:
            conn.executescript(LEASE_SCHEMA)

    def put(self, lease: Lease) -> None:
        lease.updated_at = time.time()
        self.conn.execute(
            "INSERT OR REPLACE INTO leases(path, session_id, repo, head, kind, state, note, "
            "retain_until, discard_ok, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?)",
            (
                lease.path,
                lease.session_id,
                lease.repo,
                lease.head,
                lease.kind,
                lease.state.value,
                lease.note,
                lease.retain_until,
                int(lease.discard_ok),
                lease.updated_at,
            ),
        )

    def get(self, path: str) -> Lease | None:
        row = self.conn.execute(
            "SELECT path, session_id, repo, head, kind, state, note, retain_until, discard_ok, "
            "updated_at FROM leases WHERE path=?",
            (path,),
        ).fetchone()
        return _row(row) if row else None

    def drop(self, path: str) -> None:
        """Forget a lease row (only for a worktree already removed)."""
        self.conn.execute("DELETE FROM leases WHERE path=?", (path,))

    def all(self) -> list[Lease]:
        try:
            exists = self.conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type='table' AND name='leases'"
            ).fetchone()
        except sqlite3.DatabaseError:
            return []
        if not exists:
            return []
        rows = self.conn.execute(
            "SELECT path, session_id, repo, head, kind, state, note, retain_until, discard_ok, "
            "updated_at FROM leases ORDER BY updated_at"
        ).fetchall()
        return [_row(r) for r in rows]

    def set_state(
        self,
        path: str,
        state: LeaseState,
        *,
        note: str | None = None,
        head: str | None = None,
        retain_until: float | None = None,
        discard_ok: bool | None = None,
    ) -> Lease | None:
        lease = self.get(path)
        if lease is None:
            return None
        lease.state = state
        if note is not None:
            lease.note = note
        if head is not None:
            lease.head = head
        if retain_until is not None:
            lease.retain_until = retain_until
        if discard_ok is not None:
            lease.discard_ok = discard_ok
        self.put(lease)
        return lease


def _row(row: tuple[Any, ...]) -> Lease:
    return Lease(
        path=row[0],
        session_id=row[1],
        repo=row[2],
        head=row[3],
        kind=row[4],
        state=LeaseState(row[5]),
        note=row[6],
        retain_until=row[7],
        discard_ok=bool(row[8]),
        updated_at=row[9],
    )


def add_worktree(
    book: LeaseBook,
    repo: Path,
    path: Path,
    commit: str,
    *,
    session_id: str | None,
    kind: str = "session",
) -> Lease:
    """Write the lease, then create the worktree; on failure the lease says so."""
    resolved = str(path.resolve())
    lease = Lease(path=resolved, session_id=session_id, repo=str(repo), head=commit, kind=kind)
    book.put(lease)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        # checked out by parallel workers: a scratch of a large tree is made per verification
        git(
            repo,
            *("-c", "checkout.workers=0", "-c", "checkout.thresholdForParallelism=200"),
            *("worktree", "add", "--detach", "--", str(path), commit),
            timeout=300,
        )
        common = git(repo, "rev-parse", "--path-format=absolute", "--git-common-dir").strip()
        pin_worktree(path, Path(common))
    except GitError:
        if not path.exists():
            book.set_state(resolved, LeaseState.REMOVED, note="git worktree add failed")
        else:
            book.set_state(
                resolved,
                LeaseState.RECOVERY_REQUIRED,
                note="git worktree add failed after creating the directory",
            )
        raise
    return book.set_state(resolved, LeaseState.READY) or lease


def matches(lease: Lease, listing: dict[str, GitWorktree]) -> str | None:
    """None when git's listing matches the lease exactly, else why not."""
    entry = listing.get(lease.path)
    if entry is None:
        return "git does not list it as a worktree"
    if lease.kind == "scratch":
        return None  # a check may commit or switch branches in its own checkout
    if entry.branch is not None:
        return f"it now has branch {entry.branch} checked out"
    if lease.head and entry.head != lease.head:
        return f"its HEAD moved to {(entry.head or '?')[:12]} (lease says {lease.head[:12]})"
    return None


def remove_worktree(book: LeaseBook, lease: Lease, *, force: bool = False) -> tuple[bool, str]:
    """Remove a leased worktree if it is safe. Returns (removed, reason)."""
    repo = Path(lease.repo)
    path = Path(lease.path)
    listing = list_worktrees(repo) if repo.is_dir() else {}
    mismatch = matches(lease, listing)
    if mismatch is not None:
        if not path.exists() and lease.path not in listing:
            book.set_state(lease.path, LeaseState.REMOVED, note="already gone")
            return True, "already gone"
        book.set_state(lease.path, LeaseState.CLEANUP_BLOCKED, note=mismatch)
        return False, mismatch
    pins = pins_for(path)
    if pins is not None:
        try:
            pins.check()
        except WorktreeMetadataChanged as exc:
            book.set_state(lease.path, LeaseState.CLEANUP_BLOCKED, note=str(exc))
            return False, str(exc)
    disposable = force or lease.kind == "scratch" or lease.discard_ok
    if not disposable and not is_clean(path):
        note = "it has uncommitted changes (use --force to remove anyway)"
        book.set_state(lease.path, LeaseState.CLEANUP_BLOCKED, note=note)
        return False, note
    try:
        git(repo, "worktree", "remove", "--force", "--", str(path), timeout=300)
    except GitError as exc:
        book.set_state(lease.path, LeaseState.CLEANUP_BLOCKED, note=str(exc))
        return False, str(exc)
    if path.exists():
        shutil.rmtree(path, ignore_errors=True)
    unpin(path)
    with contextlib.suppress(GitError):
        git(repo, "worktree", "prune")
    book.set_state(lease.path, LeaseState.REMOVED, note="removed")
    return True, "removed"


def reconcile(book: LeaseBook) -> list[Lease]:
    """Start-up pass: settle leases a crash may have left half-way.

    Allocating leases with nothing on disk become removed; scratch worktrees
    that match their lease are removed; anything else that does not match
    becomes recovery_required. Nothing unmatched is ever deleted."""
    changed: list[Lease] = []
    listings: dict[str, dict[str, GitWorktree]] = {}
    for lease in book.all():
        if lease.state is LeaseState.REMOVED:
            continue
        repo = Path(lease.repo)
        if lease.repo not in listings:
            listings[lease.repo] = list_worktrees(repo) if repo.is_dir() else {}
        listing = listings[lease.repo]
        exists = Path(lease.path).exists()
        mismatch = matches(lease, listing)
        if lease.kind == "scratch":
            if mismatch is None or (not exists and lease.path not in listing):
                remove_worktree(book, lease, force=True)
            else:
                book.set_state(lease.path, LeaseState.RECOVERY_REQUIRED, note=mismatch)
        elif not exists and lease.path not in listing:
            book.set_state(lease.path, LeaseState.REMOVED, note="gone (nothing on disk)")
        elif mismatch is not None:
            book.set_state(lease.path, LeaseState.RECOVERY_REQUIRED, note=mismatch)
        elif lease.state is LeaseState.ALLOCATING:
            book.set_state(
                lease.path,
                LeaseState.RECOVERY_REQUIRED,
                note="created, but corral stopped before recording it ready",
            )
        else:
            continue
        changed.append(book.get(lease.path) or lease)
    return changed
