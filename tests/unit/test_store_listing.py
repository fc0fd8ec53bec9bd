"""The board rows the store keeps beside each session (schema 2) are the rows
a parsed session gives; a database from schema 1 is migrated and its rows get
their summaries once; a row whose summary is missing or broken is parsed."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from corral.supervisor.models import CheckResult, CoderSession
from corral.supervisor.session.registry import SessionRegistry
from corral.supervisor.session.summaries import stored_summary, summary_json
from corral.supervisor.states import CoderState, FailureKind
from corral.supervisor.store import SCHEMA_VERSION, Store
from tests.conftest import fast_config

S = CoderState

V1_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE sessions (id TEXT PRIMARY KEY, repo TEXT NOT NULL, state TEXT NOT NULL,
    created_at REAL NOT NULL, updated_at REAL NOT NULL, data TEXT NOT NULL);
CREATE INDEX sessions_updated ON sessions(updated_at);
INSERT INTO meta VALUES ('schema_version', '1');
"""


def _sessions(tmp_path: Path) -> list[CoderSession]:
    kept = tmp_path / "kept-worktree"
    kept.mkdir(exist_ok=True)
    return [
        CoderSession(
            id="a" * 24,
            repo="/r",
            intent="délivré ✓",
            state=S.MERGED,
            updated_at=3.25,
            result_branch="corral/x",
            authored_by=["claude"],
            name="mine",
        ),
        CoderSession(
            id="b" * 24,
            repo="/r",
            intent="failed",
            state=S.FAILED,
            updated_at=2.5,
            error="red",
            failure_kind=FailureKind.BUDGET_EXHAUSTED,
            worktree=str(kept),
            last_check_results=[CheckResult(name="t", passed=False, output_tail="x" * 9000)],
        ),
        CoderSession(
            id="c" * 24,
            repo="/r",
            intent="gone",
            state=S.ABANDONED,
            updated_at=1.0,
            worktree=str(tmp_path / "removed"),
            archived_at=5.0,
            changed_since_verification=["a.txt"],
        ),
        CoderSession(
            id="d" * 24,
            repo="/r",
            intent="waiting",
            state=S.NEEDS_APPROVAL,
            updated_at=4.0,
            failure_kind=None,
        ),
    ]


def test_kept_summaries_are_the_rows_of_the_parsed_sessions(tmp_path: Path) -> None:
    sessions = _sessions(tmp_path)
    store = Store(tmp_path / "state", summarize=summary_json)
    for s in sessions:
        store.save_session(s)
    listing = Store(tmp_path / "state", readonly=True).summaries(stored_summary)
    assert listing.stale == [] and listing.unreadable == []
    expected = sorted((stored_summary(s) for s in sessions), key=lambda r: -r.updated_at)
    assert listing.rows == expected
    assert [r.worktree for r in listing.rows if r.session_id[0] in "bc"] == [
        str(tmp_path / "kept-worktree"),
        None,  # its worktree is gone: not named, as for a parsed session
    ]


def test_a_schema_1_database_is_migrated_and_its_summaries_written_once(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    conn = sqlite3.connect(state / "corral.sqlite3")
    conn.executescript(V1_SCHEMA)
    for s in _sessions(tmp_path):
        conn.execute(
            "INSERT INTO sessions VALUES (?, ?, ?, ?, ?, ?)",
            (s.id, s.repo, s.state.value, s.created_at, s.updated_at, s.model_dump_json()),
        )
    conn.execute("INSERT INTO sessions VALUES ('bad', '/r', 'failed', 0, 0, '{not json')")
    conn.commit()
    conn.close()
    # a reader of the old schema (a console not upgraded yet) parses every row
    old = Store(state, readonly=True).summaries(stored_summary)
    assert len(old.rows) == 4 and old.unreadable == ["bad"]

    registry = SessionRegistry(state, config=fast_config(), clock=lambda: 10.0, panes=None)
    _sessions_back, broken = registry.open()
    assert broken == ["bad"]
    assert {r.session_id for r in registry.summaries()} == {s.id for s in _sessions(tmp_path)}
    registry.release()
    conn = sqlite3.connect(state / "corral.sqlite3")
    assert conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == (
        str(SCHEMA_VERSION),
    )
    # every readable row now keeps its summary: the next listing parses none
    assert conn.execute("SELECT count(*) FROM sessions WHERE summary IS NULL").fetchone() == (1,)
    conn.close()
    again = Store(state, readonly=True).summaries(stored_summary)
    assert again.stale == [] and len(again.rows) == 4


def test_a_finished_session_is_parsed_only_when_asked_for(tmp_path: Path) -> None:
    state = tmp_path / "state"
    store = Store(state, summarize=summary_json)
    for s in _sessions(tmp_path):
        store.save_session(s)
    store.close()
    registry = SessionRegistry(state, config=fast_config(), clock=lambda: 10.0, panes=None)
    registry.open()
    try:
        assert set(registry._stored) == {"d" * 24}  # only the unfinished one is parsed
        failed = registry.stored("b" * 24)
        assert failed is not None and failed.last_check_results[0].output_tail == "x" * 9000
        assert registry.summary("b" * 24) == stored_summary(failed)
    finally:
        registry.release()


def test_a_summary_that_does_not_fit_is_parsed_instead(tmp_path: Path) -> None:
    state = tmp_path / "state"
    store = Store(state, summarize=summary_json)
    sessions = _sessions(tmp_path)
    for s in sessions:
        store.save_session(s)
    assert store._conn is not None
    store._conn.execute("UPDATE sessions SET summary='{\"session_id\": 1}' WHERE id=?", ("a" * 24,))
    listing = store.summaries(stored_summary)
    assert [s.id for s in listing.stale] == ["a" * 24]
    assert next(r for r in listing.rows if r.session_id == "a" * 24).name == "mine"
