"""`corral worktrees` and `corral worktrees prune [--dry-run] [--force]`.

Listing reads the database read-only (a running console is fine). Pruning
changes things, so it needs the state dir: close the console first. Nothing
dirty, unknown or mismatched is removed without `--force`; a worktree whose
HEAD moved or that git no longer lists as ours is never removed.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from corral.supervisor.errors import CorralError
from corral.supervisor.git.leases import Lease, LeaseBook, LeaseState, is_clean, remove_worktree
from corral.supervisor.git.run import GitError, git
from corral.supervisor.paths import default_state_dir
from corral.supervisor.states import CoderState, label
from corral.supervisor.store import DB_NAME, OwnerLock, Store
from corral.supervisor.workspaces import Workspaces

ACTIVE = {LeaseState.ALLOCATING, LeaseState.READY, LeaseState.IN_USE}


def _sessions(state_dir: Path) -> dict[str, CoderState]:
    store = Store(state_dir, readonly=True)
    try:
        sessions, _ = store.list_sessions()
    finally:
        store.close()
    return {s.id: s.state for s in sessions}


def _read_leases(state_dir: Path) -> list[Lease]:
    db = state_dir / DB_NAME
    if not db.exists():
        return []
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return LeaseBook(conn, readonly=True).all()
    finally:
        conn.close()


def list_worktrees(*, as_json: bool) -> int:
    state_dir = default_state_dir()
    states = _sessions(state_dir)
    rows = []
    for lease in _read_leases(state_dir):
        if lease.state is LeaseState.REMOVED or lease.kind == "scratch":
            continue
        state = states.get(lease.session_id or "")
        exists = Path(lease.path).is_dir()
        rows.append(
            {
                "path": lease.path,
                "session": label(lease.session_id) if lease.session_id else None,
                "session_state": state.value if state else None,
                "lease": lease.state.value,
                "note": lease.note,
                "exists": exists,
                "clean": is_clean(Path(lease.path)) if exists else None,
            }
        )
    if as_json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print(f"no worktrees in {state_dir}")
    for r in rows:
        dirty = "" if r["clean"] in (True, None) else "  (uncommitted changes)"
        note = f"  — {r['note']}" if r["note"] else ""
        print(
            f"{r['session'] or '?':<16} {r['session_state'] or 'unknown':<17} "
            f"{r['lease']:<17} {r['path']}{dirty}{note}"
        )
    return 0


def prune(*, dry_run: bool, force: bool) -> int:
    state_dir = default_state_dir()
    lock = OwnerLock(state_dir)
    try:
        lock.acquire()
    except CorralError as exc:
        raise CorralError(
            f"{exc}. Pruning changes the state dir; close the console first (it also removes "
            "expired worktrees itself, hourly)"
        ) from None
    try:
        if not (state_dir / DB_NAME).exists():
            print(f"no worktrees in {state_dir}")
            return 0
        states = _sessions(state_dir)
        workspaces = Workspaces(state_dir, state_dir / DB_NAME)
        try:
            return _prune(workspaces, states, dry_run=dry_run, force=force)
        finally:
            workspaces.close()
    finally:
        lock.release()


def _prune(
    workspaces: Workspaces, states: dict[str, CoderState], *, dry_run: bool, force: bool
) -> int:
    workspaces.reconcile()
    removed = kept = 0
    for lease in workspaces.leases():
        if lease.state is LeaseState.REMOVED:
            continue
        state = states.get(lease.session_id or "")
        if lease.state in ACTIVE and state is not None and not state.is_terminal:
            continue  # a session still uses it
        if state is not None and not state.is_terminal:
            print(f"keep   {lease.path}: its session is still {state.value}")
            kept += 1
            continue
        if dry_run:
            clean = is_clean(Path(lease.path)) if Path(lease.path).exists() else True
            verdict = "remove" if clean or force or lease.discard_ok else "keep  "
            why = "" if verdict == "remove" else " (uncommitted changes; --force to remove)"
            print(f"{verdict} {lease.path}{why}")
            continue
        ok, why = remove_worktree(workspaces.book, lease, force=force)
        print(f"{'removed' if ok else 'kept   '} {lease.path}" + ("" if ok else f": {why}"))
        removed += ok
        kept += not ok
    for path in workspaces.unknown_worktrees():
        if force and not dry_run:
            try:
                git(Path(path), "worktree", "remove", "--force", "--", path)
                print(f"removed {path} (no lease; --force)")
                removed += 1
            except GitError as exc:
                print(f"kept    {path}: {exc}")
        else:
            print(f"keep   {path}: no lease records it (unknown); --force removes it")
            kept += 1
    if not dry_run:
        print(f"{removed} removed, {kept} kept")
    return 0
