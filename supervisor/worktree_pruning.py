"""corral's session worktrees as their leases and sessions see them, and
pruning the ones no live session needs.

Listing needs no owner lock (the database is opened read-only); pruning
changes the state dir, so it takes the lock, and refuses while a console owns
it. Nothing dirty, unknown or mismatched is removed without `force`. Blocks
on SQLite and git.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel

from .errors import CorralError
from .git.leases import Lease, LeaseBook, LeaseState, is_clean, remove_worktree
from .git.run import GitError, git
from .states import CoderState, label
from .store import DB_NAME, OwnerLock, read_sessions
from .workspaces import Workspaces

__all__ = [
    "PruneOutcome",
    "PruneReport",
    "PruneStep",
    "WorktreeRow",
    "prune_worktrees",
    "worktrees",
]


def _session_states(state_dir: Path) -> dict[str, CoderState]:
    sessions, _ = read_sessions(state_dir)
    return {s.id: s.state for s in sessions}


class WorktreeRow(BaseModel):
    """One of corral's session worktrees as its lease and its session see it."""

    path: str
    session: str | None  # the session's label
    session_state: CoderState | None  # None: no stored session
    lease: LeaseState
    note: str | None
    exists: bool
    clean: bool | None  # None: the directory is gone


def _read_leases(state_dir: Path) -> list[Lease]:
    db = state_dir / DB_NAME
    if not db.exists():
        return []
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return LeaseBook(conn, readonly=True).all()
    finally:
        conn.close()


def worktrees(state_dir: Path) -> list[WorktreeRow]:
    """Session worktrees not yet removed (scratch copies are corral's own)."""
    states = _session_states(state_dir)
    rows: list[WorktreeRow] = []
    for lease in _read_leases(state_dir):
        if lease.state is LeaseState.REMOVED or lease.kind == "scratch":
            continue
        exists = Path(lease.path).is_dir()
        rows.append(
            WorktreeRow(
                path=lease.path,
                session=label(lease.session_id) if lease.session_id else None,
                session_state=states.get(lease.session_id or ""),
                lease=lease.state,
                note=lease.note,
                exists=exists,
                clean=is_clean(Path(lease.path)) if exists else None,
            )
        )
    return rows


ACTIVE_LEASES = {LeaseState.ALLOCATING, LeaseState.READY, LeaseState.IN_USE}


class PruneOutcome(StrEnum):
    """What pruning did (or, in a dry run, would do) with one worktree."""

    KEPT_SESSION_LIVE = "kept_session_live"  # its session has not ended
    WOULD_REMOVE = "would_remove"  # dry run
    WOULD_KEEP_DIRTY = "would_keep_dirty"  # dry run: uncommitted changes, --force removes it
    REMOVED = "removed"
    KEPT_UNSAFE = "kept_unsafe"  # removal was refused: `detail` says why
    KEPT_UNKNOWN = "kept_unknown"  # no lease records it; --force removes it
    REMOVED_UNKNOWN = "removed_unknown"  # no lease, removed because of --force
    KEPT_UNKNOWN_FAILED = "kept_unknown_failed"  # --force, but git refused: `detail`


REMOVING = {PruneOutcome.REMOVED, PruneOutcome.REMOVED_UNKNOWN}


@dataclass(frozen=True)
class PruneStep:
    path: str
    outcome: PruneOutcome
    # the live session's state, why the removal failed, or (dry run) the
    # ended session's state
    detail: str = ""

    @property
    def removed(self) -> bool:
        return self.outcome in REMOVING


@dataclass
class PruneReport:
    state_dir: Path
    dry_run: bool
    has_store: bool = True  # False: no database, so no worktrees
    steps: list[PruneStep] = field(default_factory=list)

    @property
    def removed(self) -> int:
        return sum(step.removed for step in self.steps)

    @property
    def kept(self) -> int:
        return len(self.steps) - self.removed


def prune_worktrees(
    state_dir: Path,
    *,
    dry_run: bool,
    force: bool,
    on_step: Callable[[PruneStep], None] | None = None,
) -> PruneReport:
    """Remove the worktrees no live session needs. Pruning changes the state
    dir, so it takes the owner lock (a dry run too: it reconciles the leases).
    Nothing dirty, unknown or mismatched is removed without `force`; a
    worktree whose HEAD moved or that git no longer lists as ours never is.
    `on_step` hears each decision as it is made."""
    lock = OwnerLock(state_dir)
    try:
        lock.acquire()
    except CorralError as exc:
        raise CorralError(
            f"{exc}. Pruning changes the state dir; close the console first (it also removes "
            "expired worktrees itself, hourly)"
        ) from None
    report = PruneReport(state_dir, dry_run)
    try:
        if not (state_dir / DB_NAME).exists():
            report.has_store = False
            return report
        states = _session_states(state_dir)
        workspaces = Workspaces(state_dir, state_dir / DB_NAME)
        try:
            for step in _decide(workspaces, states, dry_run=dry_run, force=force):
                report.steps.append(step)
                if on_step is not None:
                    on_step(step)
        finally:
            workspaces.close()
    finally:
        lock.release()
    return report


def _decide(
    workspaces: Workspaces, states: dict[str, CoderState], *, dry_run: bool, force: bool
) -> Iterator[PruneStep]:
    """The decisions one at a time (removals happen as they are decided)."""
    workspaces.reconcile()
    for lease in workspaces.leases():
        if lease.state is LeaseState.REMOVED:
            continue
        state = states.get(lease.session_id or "")
        if lease.state in ACTIVE_LEASES and state is not None and not state.is_terminal:
            continue  # a session still uses it: not a candidate
        if state is not None and not state.is_terminal:
            yield PruneStep(lease.path, PruneOutcome.KEPT_SESSION_LIVE, state.value)
            continue
        if dry_run:
            clean = is_clean(Path(lease.path)) if Path(lease.path).exists() else True
            removable = clean or force or lease.discard_ok
            outcome = PruneOutcome.WOULD_REMOVE if removable else PruneOutcome.WOULD_KEEP_DIRTY
            yield PruneStep(lease.path, outcome, state.value if state is not None else "")
            continue
        ok, why = remove_worktree(workspaces.book, lease, force=force)
        yield PruneStep(
            lease.path,
            PruneOutcome.REMOVED if ok else PruneOutcome.KEPT_UNSAFE,
            "" if ok else why,
        )
    for path in workspaces.unknown_worktrees():
        if not force or dry_run:
            yield PruneStep(path, PruneOutcome.KEPT_UNKNOWN)
            continue
        try:
            git(Path(path), "worktree", "remove", "--force", "--", path)
        except GitError as exc:
            yield PruneStep(path, PruneOutcome.KEPT_UNKNOWN_FAILED, str(exc))
        else:
            yield PruneStep(path, PruneOutcome.REMOVED_UNKNOWN)
