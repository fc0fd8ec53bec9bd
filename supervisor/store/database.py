"""Session snapshots in one SQLite database (WAL) per state dir.

Readers such as `corral sessions` open it read-only and never need the owner
lock. A database that is corrupt or was written by a newer corral is never
reset: the error names the file and the original stays where it is.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Callable, Collection, Iterable
from pathlib import Path

from pydantic import ValidationError

from ..errors import DiskFullError, StateDirError, disk_full, is_disk_full
from ..models import CoderSession, ScheduledTask, SessionSummary, TaskRun
from ..paths import ensure_private_dir
from .listing import UNFINISHED, Listing, read_listing

# 2: each row keeps its board summary (`summary`, see listing.py);
# 3: the agent's own session id (`agent_session`) and the scheduler's tables.
SCHEMA_VERSION = 3
DB_NAME = "corral.sqlite3"
# Space set aside in the state dir and given back when the disk is full, so
# that how each session ended can still be recorded (a store that says
# `running` for a run that is over is worse than a refusal).
RESERVE_NAME = "disk-reserve"
RESERVE_BYTES = 256 * 1024

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    repo TEXT NOT NULL,
    state TEXT NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    data TEXT NOT NULL,
    summary TEXT,
    agent_session TEXT
);
CREATE INDEX IF NOT EXISTS sessions_updated ON sessions(updated_at);
CREATE TABLE IF NOT EXISTS tasks (id TEXT PRIMARY KEY, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS task_runs (
    task_id TEXT NOT NULL,
    at REAL NOT NULL,
    data TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS task_runs_task ON task_runs(task_id, at);
"""
TASK_RUNS_KEPT = 200  # the last runs of each scheduled task
# Columns added since schema 1, each with what fills it in for rows already
# stored. Added by presence rather than by version number, so a database
# that has either one already (any earlier build) migrates the same way.
_ADDED_COLUMNS = {
    # the board row; filled in once by `keep_summaries` at the next start
    "summary": "ALTER TABLE sessions ADD COLUMN summary TEXT;",
    # the agent's own session id (Claude Code's `session_id`, Codex's thread
    # id), so a hook or a pane naming it finds its corral session
    "agent_session": """
ALTER TABLE sessions ADD COLUMN agent_session TEXT;
UPDATE sessions SET agent_session = json_extract(data, '$.agent_identity.session_id')
    WHERE json_valid(data);
""",
}
_INDEXES = "CREATE INDEX IF NOT EXISTS sessions_agent ON sessions(agent_session);"


class Store:
    """Session snapshots in SQLite. Writes are small and synchronous: a
    transition is on disk before anything announces it."""

    def __init__(
        self,
        state_dir: Path,
        *,
        readonly: bool = False,
        summarize: Callable[[CoderSession], str] | None = None,
    ) -> None:
        self.state_dir = state_dir
        # the board row of a session as JSON, kept beside it so that listing
        # never parses a whole session (see listing.py); None: not kept
        self.summarize = summarize
        self.path = state_dir / DB_NAME
        self.readonly = readonly
        self.full: DiskFullError | None = None  # set once a write found the disk full
        if readonly:
            if not self.path.exists():
                self._conn: sqlite3.Connection | None = None
                return
            uri = f"file:{self.path}?mode=ro"
            self._conn = self._connect(uri, uri=True)
        else:
            ensure_private_dir(state_dir)
            self._conn = self._connect(str(self.path))
        self._check_schema()
        if not readonly:
            # Only once the file is known to be ours: switching to WAL rewrites
            # the header, and a refused database must stay byte-identical.
            try:
                self._conn.execute("PRAGMA journal_mode = WAL")
                self._conn.execute("PRAGMA synchronous = NORMAL")
            except sqlite3.DatabaseError as exc:
                raise self._corrupt(exc) from exc
            self._keep_reserve()

    def _keep_reserve(self) -> None:
        reserve = self.state_dir / RESERVE_NAME
        if reserve.exists():
            return
        try:
            with open(reserve, "wb") as f:
                f.write(bytes(RESERVE_BYTES))
        except OSError:
            reserve.unlink(missing_ok=True)  # already short of space: nothing to set aside

    def _disk_full(self) -> DiskFullError:
        """Give the reserve back (room to record how things ended) and name
        the state dir and its free space."""
        self.full = disk_full(self.state_dir)  # the free space before the reserve goes back
        if not self.readonly:
            (self.state_dir / RESERVE_NAME).unlink(missing_ok=True)
        return self.full

    def _connect(self, target: str, *, uri: bool = False) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(target, uri=uri, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA busy_timeout = 5000")
            return conn
        except sqlite3.DatabaseError as exc:
            raise self._corrupt(exc) from exc

    def _corrupt(self, exc: Exception) -> StateDirError:
        if is_disk_full(exc):
            return self._disk_full()
        return StateDirError(
            f"{self.path} is not a readable corral database ({exc}). It was left untouched: "
            f"move it aside (mv {self.path} {self.path}.bad) to start fresh, or restore a backup"
        )

    def _check_schema(self) -> None:
        assert self._conn is not None
        try:
            tables = {
                r[0]
                for r in self._conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
            }
            if "meta" in tables:
                row = self._conn.execute(
                    "SELECT value FROM meta WHERE key='schema_version'"
                ).fetchone()
                version = int(row[0]) if row else 0
            else:
                version = 0
            if version > SCHEMA_VERSION:
                raise StateDirError(
                    f"{self.path} was written by a newer corral (schema {version}; this one "
                    f"reads up to {SCHEMA_VERSION}). Upgrade corral, or set CORRAL_HOME to "
                    "another state dir; the file was left untouched"
                )
            if tables and "sessions" not in tables and "meta" not in tables:
                raise StateDirError(
                    f"{self.path} is an SQLite file but not a corral database; it was left "
                    "untouched. Move it aside or set CORRAL_HOME to another state dir"
                )
            if not self.readonly and version < SCHEMA_VERSION:
                if "sessions" in tables:
                    columns = {r[1] for r in self._conn.execute("PRAGMA table_info(sessions)")}
                    for column, migration in _ADDED_COLUMNS.items():
                        if column not in columns:
                            self._conn.executescript(migration)
                self._conn.executescript(_SCHEMA)
                self._conn.execute(_INDEXES)
                self._conn.execute(
                    "INSERT OR REPLACE INTO meta(key, value) VALUES ('schema_version', ?)",
                    (str(SCHEMA_VERSION),),
                )
        except sqlite3.DatabaseError as exc:
            raise self._corrupt(exc) from exc

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # -- sessions ------------------------------------------------------------

    def save_session(self, session: CoderSession) -> None:
        assert self._conn is not None and not self.readonly
        try:
            self._save(session)
        except sqlite3.Error as exc:
            if is_disk_full(exc):
                raise self._disk_full() from exc
            raise

    def _save(self, session: CoderSession) -> None:
        assert self._conn is not None
        self._conn.execute(
            "INSERT INTO sessions(id, repo, state, created_at, updated_at, data, summary, "
            "agent_session) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET "
            "repo=excluded.repo, state=excluded.state, updated_at=excluded.updated_at, "
            "data=excluded.data, summary=excluded.summary, agent_session=excluded.agent_session",
            (
                session.id,
                session.repo,
                session.state.value,
                session.created_at,
                session.updated_at,
                session.model_dump_json(),
                self.summarize(session) if self.summarize else None,
                session.agent_identity.session_id if session.agent_identity else None,
            ),
        )

    def load_session(self, session_id: str) -> CoderSession | None:
        if self._conn is None:
            return None
        row = self._conn.execute("SELECT data FROM sessions WHERE id=?", (session_id,)).fetchone()
        return _parse(row[0]) if row else None

    def find_by_agent_session(self, agent_session: str) -> CoderSession | None:
        """The corral session whose agent named itself `agent_session`."""
        if self._conn is None:
            return None
        row = self._conn.execute(
            "SELECT data FROM sessions WHERE agent_session=? ORDER BY updated_at DESC",
            (agent_session,),
        ).fetchone()
        return _parse(row[0]) if row else None

    def list_sessions(self) -> tuple[list[CoderSession], list[str]]:
        """All stored sessions, newest first, plus ids whose rows do not parse
        (kept on disk untouched, reported rather than dropped)."""
        if self._conn is None:
            return [], []
        sessions: list[CoderSession] = []
        broken: list[str] = []
        try:
            rows = self._conn.execute(
                "SELECT id, data FROM sessions ORDER BY updated_at DESC"
            ).fetchall()
        except sqlite3.DatabaseError as exc:
            raise self._corrupt(exc) from exc
        for sid, data in rows:
            parsed = _parse(data)
            if parsed is None:
                broken.append(sid)
            else:
                sessions.append(parsed)
        return sessions, broken

    def summaries(self, summarize: Callable[[CoderSession], SessionSummary]) -> Listing:
        """Every stored session's board row, newest first, without parsing the
        sessions (see listing.py); rows kept by an older corral are parsed and
        made board rows by `summarize`."""
        if self._conn is None:
            return Listing([], [], [])
        try:
            return read_listing(self._conn, self._has_summaries(), summarize)
        except sqlite3.DatabaseError as exc:
            raise self._corrupt(exc) from exc

    def _has_summaries(self) -> bool:
        assert self._conn is not None
        columns = {r[1] for r in self._conn.execute("PRAGMA table_info(sessions)")}
        return "summary" in columns

    def load_sessions(self, where: str) -> tuple[list[CoderSession], list[str]]:
        """The sessions whose rows match an SQL condition, newest first, plus
        the ids of those that do not parse."""
        if self._conn is None:
            return [], []
        try:
            rows = self._conn.execute(
                f"SELECT id, data FROM sessions WHERE {where} ORDER BY updated_at DESC"
            ).fetchall()
        except sqlite3.DatabaseError as exc:
            raise self._corrupt(exc) from exc
        sessions: list[CoderSession] = []
        broken: list[str] = []
        for sid, data in rows:
            parsed = _parse(data)
            if parsed is None:
                broken.append(sid)
            else:
                sessions.append(parsed)
        return sessions, broken

    def finished_panes(self) -> list[CoderSession]:
        """Finished sessions that had an agent pane, as much as stopping a
        leftover agent needs (id, repo, state, pane); the rest is left out."""
        if self._conn is None:
            return []
        rows = self._conn.execute(
            "SELECT id, repo, state, json_extract(data, '$.pane') FROM sessions "
            f"WHERE NOT ({UNFINISHED}) AND json_valid(data) "
            "AND json_type(data, '$.pane') = 'object'"
        ).fetchall()
        heads: list[CoderSession] = []
        for sid, repo, state, pane in rows:
            with contextlib.suppress(ValueError, ValidationError):
                heads.append(
                    CoderSession(id=sid, repo=repo, intent="", state=state, pane=json.loads(pane))
                )
        return heads

    def keep_summaries(self, sessions: Iterable[CoderSession]) -> None:
        """Write the board rows of sessions stored without one (a database
        migrated from schema 1), once, so the next start reads them directly."""
        assert self._conn is not None and not self.readonly and self.summarize is not None
        self._conn.executemany(
            "UPDATE sessions SET summary=? WHERE id=?",
            [(self.summarize(s), s.id) for s in sessions],
        )

    # -- scheduled tasks -----------------------------------------------------------

    def transcript_paths(self, agents: Collection[str] | None = None) -> dict[str, str]:
        """Each session's agent transcript path, where its agent named one
        (read from the stored JSON by SQLite: no session is parsed); with
        `agents`, only the sessions of those agents."""
        if self._conn is None:
            return {}
        rows = self._conn.execute(
            "SELECT id, json_extract(data, '$.agent_identity.transcript_path'), "
            "json_extract(data, '$.agent_identity.agent') FROM sessions "
            "WHERE agent_session IS NOT NULL AND json_valid(data)"
        ).fetchall()
        return {
            sid: path
            for sid, path, agent in rows
            if isinstance(path, str) and path and (agents is None or agent in agents)
        }

    def agent_threads(self, agent: str) -> dict[str, str]:
        """Each session's own session id of `agent` (Codex's thread id), by
        corral session id."""
        if self._conn is None:
            return {}
        rows = self._conn.execute(
            "SELECT id, agent_session FROM sessions WHERE agent_session IS NOT NULL "
            "AND json_valid(data) AND json_extract(data, '$.agent_identity.agent') = ?",
            (agent,),
        ).fetchall()
        return {sid: thread for sid, thread in rows if isinstance(thread, str) and thread}

    def save_task(self, task: ScheduledTask) -> None:
        assert self._conn is not None and not self.readonly
        self._conn.execute(
            "INSERT INTO tasks(id, data) VALUES (?, ?) ON CONFLICT(id) DO UPDATE SET "
            "data=excluded.data",
            (task.id, task.model_dump_json()),
        )

    def list_tasks(self) -> list[ScheduledTask]:
        if self._conn is None or not self._has("tasks"):
            return []
        rows = self._conn.execute("SELECT data FROM tasks ORDER BY id").fetchall()
        tasks = []
        for (data,) in rows:
            try:
                tasks.append(ScheduledTask.model_validate_json(data))
            except ValidationError:
                continue  # kept on disk untouched
        return tasks

    def delete_task(self, task_id: str) -> bool:
        assert self._conn is not None and not self.readonly
        gone = self._conn.execute("DELETE FROM tasks WHERE id=?", (task_id,)).rowcount
        self._conn.execute("DELETE FROM task_runs WHERE task_id=?", (task_id,))
        return bool(gone)

    def add_task_run(self, run: TaskRun) -> None:
        """Record one run; only the last `TASK_RUNS_KEPT` of a task are kept."""
        assert self._conn is not None and not self.readonly
        self._conn.execute(
            "INSERT INTO task_runs(task_id, at, data) VALUES (?, ?, ?)",
            (run.task_id, run.at, run.model_dump_json()),
        )
        self._conn.execute(
            "DELETE FROM task_runs WHERE task_id=? AND rowid NOT IN (SELECT rowid FROM "
            "task_runs WHERE task_id=? ORDER BY at DESC, rowid DESC LIMIT ?)",
            (run.task_id, run.task_id, TASK_RUNS_KEPT),
        )

    def task_runs(self, task_id: str) -> list[TaskRun]:
        """A task's kept runs, newest first."""
        if self._conn is None or not self._has("task_runs"):
            return []
        rows = self._conn.execute(
            "SELECT data FROM task_runs WHERE task_id=? ORDER BY at DESC, rowid DESC",
            (task_id,),
        ).fetchall()
        return [TaskRun.model_validate_json(d) for (d,) in rows]

    def _has(self, table: str) -> bool:
        assert self._conn is not None
        row = self._conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (table,)
        ).fetchone()
        return row is not None

    def delete_sessions(self, ids: Iterable[str]) -> None:
        assert self._conn is not None and not self.readonly
        self._conn.executemany("DELETE FROM sessions WHERE id=?", [(i,) for i in ids])


def _parse(data: str) -> CoderSession | None:
    try:  # straight from the JSON text: about twice as fast as json.loads first
        return CoderSession.model_validate_json(data)
    except (ValueError, ValidationError):
        return None


def read_sessions(state_dir: Path) -> tuple[list[CoderSession], list[str]]:
    """Every stored session (newest first) and the ids of rows that do not
    parse, read-only: a running owner is fine, and no database is no sessions."""
    store = Store(state_dir, readonly=True)
    try:
        return store.list_sessions()
    finally:
        store.close()
