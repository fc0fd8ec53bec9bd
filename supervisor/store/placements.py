"""The foreman's records: each foreman session's split (what gate 1 shows and
the operator edits) and its placement ledger (subtask → host → worktree →
result), in the state dir's database so both survive a restart.

The tables are this module's own and are created idempotently
(`CREATE TABLE IF NOT EXISTS`) on a connection of its own; the session
store's schema version and migrations are not involved, so either can change
without the other.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

from ..models import Placement

_SCHEMA = """
CREATE TABLE IF NOT EXISTS foreman_splits (
    session_id TEXT PRIMARY KEY,
    data TEXT NOT NULL,
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS foreman_placements (
    session_id TEXT NOT NULL,
    subtask TEXT NOT NULL,
    position INTEGER NOT NULL,
    child_id TEXT NOT NULL,
    host TEXT NOT NULL,
    worktree TEXT,
    result TEXT NOT NULL,
    reason TEXT,
    files TEXT NOT NULL DEFAULT '',
    commit_id TEXT,
    updated_at REAL NOT NULL,
    attempt INTEGER NOT NULL DEFAULT 1,
    first_reason TEXT,
    first_worktree TEXT,
    PRIMARY KEY (session_id, subtask)
);
"""

# Columns added after the table first shipped (the re-placement of a failed subtask).
_ADDED = (
    ("attempt", "INTEGER NOT NULL DEFAULT 1"),
    ("first_reason", "TEXT"),
    ("first_worktree", "TEXT"),
)

# The results a placement moves through; `integrated` is what landed in the union.
PENDING = "pending"
RUNNING = "running"
VERIFIED = "verified"
INTEGRATED = "integrated"
FAILED = "failed"
CONFLICT = "conflict"
CANCELLED = "cancelled"
INTERRUPTED = "interrupted"
UNFINISHED = (PENDING, RUNNING)


class PlacementStore:
    """Splits and placements in the SQLite database at `db_path`. Calls block
    briefly (small writes); a lock lets worker threads share the connection."""

    def __init__(self, db_path: Path) -> None:
        self._lock = threading.Lock()
        conn = sqlite3.connect(db_path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA busy_timeout = 5000")
        conn.executescript(_SCHEMA)
        have = {str(r[1]) for r in conn.execute("PRAGMA table_info(foreman_placements)")}
        for column, kind in _ADDED:  # a ledger written before re-placement existed
            if column not in have:
                conn.execute(f"ALTER TABLE foreman_placements ADD COLUMN {column} {kind}")
        self._conn = conn

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    # -- the split ------------------------------------------------------------------------

    def save_split(self, session_id: str, data: str) -> None:
        with self._lock:
            self._conn.execute(
                "INSERT INTO foreman_splits (session_id, data, updated_at) VALUES (?, ?, ?) "
                "ON CONFLICT(session_id) DO UPDATE SET data=excluded.data, "
                "updated_at=excluded.updated_at",
                (session_id, data, time.time()),
            )

    def load_split(self, session_id: str) -> str | None:
        with self._lock:
            row = self._conn.execute(
                "SELECT data FROM foreman_splits WHERE session_id = ?", (session_id,)
            ).fetchone()
        return None if row is None else str(row[0])

    # -- the ledger -----------------------------------------------------------------------

    def record(self, placement: Placement) -> None:
        """Write (or rewrite) one subtask's row."""
        placement.updated_at = time.time()
        p = placement
        with self._lock:
            self._conn.execute(
                "INSERT INTO foreman_placements (session_id, subtask, position, child_id, host, "
                "worktree, result, reason, files, commit_id, updated_at, attempt, first_reason, "
                "first_worktree) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT(session_id, subtask) DO UPDATE SET position=excluded.position, "
                "child_id=excluded.child_id, host=excluded.host, worktree=excluded.worktree, "
                "result=excluded.result, reason=excluded.reason, files=excluded.files, "
                "commit_id=excluded.commit_id, updated_at=excluded.updated_at, "
                "attempt=excluded.attempt, first_reason=excluded.first_reason, "
                "first_worktree=excluded.first_worktree",
                (
                    p.session_id,
                    p.subtask,
                    p.position,
                    p.child_id,
                    p.host,
                    p.worktree,
                    p.result,
                    p.reason,
                    "\n".join(p.files),
                    p.commit,
                    p.updated_at,
                    p.attempt,
                    p.first_reason,
                    p.first_worktree,
                ),
            )

    def placements(self, session_id: str) -> list[Placement]:
        """The ledger of one session, in the split's order."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT session_id, subtask, position, child_id, host, worktree, result, reason, "
                "files, commit_id, updated_at, attempt, first_reason, first_worktree "
                "FROM foreman_placements WHERE session_id = ? "
                "ORDER BY position",
                (session_id,),
            ).fetchall()
        return [
            Placement(
                session_id=r[0],
                subtask=r[1],
                position=r[2],
                child_id=r[3],
                host=r[4],
                worktree=r[5],
                result=r[6],
                reason=r[7],
                files=[f for f in str(r[8]).split("\n") if f],
                commit=r[9],
                updated_at=r[10],
                attempt=r[11],
                first_reason=r[12],
                first_worktree=r[13],
            )
            for r in rows
        ]

    def forget(self, session_id: str) -> None:
        """A deleted session's split and ledger go with it."""
        with self._lock:
            self._conn.execute("DELETE FROM foreman_splits WHERE session_id = ?", (session_id,))
            self._conn.execute("DELETE FROM foreman_placements WHERE session_id = ?", (session_id,))

    def interrupt_unfinished(self, live_ids: set[str], reason: str) -> list[str]:
        """Rows left pending or running by an earlier owner say they were
        interrupted (their subtask is not running anywhere now). Returns the
        sessions touched."""
        marks = ",".join("?" for _ in UNFINISHED)
        with self._lock:
            rows = self._conn.execute(
                f"SELECT DISTINCT session_id FROM foreman_placements WHERE result IN ({marks})",
                UNFINISHED,
            ).fetchall()
            touched = [str(r[0]) for r in rows if str(r[0]) not in live_ids]
            for sid in touched:
                self._conn.execute(
                    f"UPDATE foreman_placements SET result = ?, reason = ?, updated_at = ? "
                    f"WHERE session_id = ? AND result IN ({marks})",
                    (INTERRUPTED, reason, time.time(), sid, *UNFINISHED),
                )
        return touched
