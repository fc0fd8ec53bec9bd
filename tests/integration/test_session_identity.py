"""The agent's own session identity: read from its hooks, stored with the
session (schema 3, migrated from schemas 1 and 2), and what makes a session whose
agent went away dormant (revivable, resumed) instead of failed."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import pytest

from corral.supervisor.api import Supervisor
from corral.supervisor.errors import CorralError
from corral.supervisor.models import AgentIdentity, CoderSession, IdentityState
from corral.supervisor.states import CoderState as S
from corral.supervisor.store import SCHEMA_VERSION, Store
from tests.conftest import fast_config, hello_contract, plan_texts, row_of
from tests.fakes.owner import owner_with_registry
from tests.fakes.scripted import ScriptedDrafter, ScriptedEngine, ScriptedEngines, Wait, Write

# The schema corral wrote before this one (schema 1), verbatim.
SCHEMA_1 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE sessions (
    id TEXT PRIMARY KEY,
    repo TEXT NOT NULL,
    state TEXT NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    data TEXT NOT NULL
);
CREATE INDEX sessions_updated ON sessions(updated_at);
INSERT INTO meta VALUES ('schema_version', '1');
"""


# One user turn as Claude Code saves it: a transcript holding one can be resumed.
SAVED_TURN = json.dumps({"type": "user", "message": {"role": "user", "content": "say hi"}}) + "\n"


def test_a_schema_1_database_is_migrated_and_its_sessions_still_load(tmp_path: Path) -> None:
    db = tmp_path / "corral.sqlite3"
    conn = sqlite3.connect(db)
    conn.executescript(SCHEMA_1)
    old = CoderSession(id="old", repo="/r", intent="x", state=S.MERGED)
    conn.execute(
        "INSERT INTO sessions VALUES (?, ?, ?, ?, ?, ?)",
        ("old", "/r", "merged", 1.0, 1.0, old.model_dump_json(exclude={"agent_identity"})),
    )
    conn.commit()
    conn.close()

    store = Store(tmp_path)
    try:
        loaded = store.load_session("old")
        assert loaded is not None and loaded.state is S.MERGED and loaded.agent_identity is None
        version = store._conn.execute(  # type: ignore[union-attr]
            "SELECT value FROM meta WHERE key='schema_version'"
        ).fetchone()[0]
        assert int(version) == SCHEMA_VERSION == 3
        new = CoderSession(
            id="new",
            repo="/r",
            intent="y",
            agent_identity=AgentIdentity(agent="claude", session_id="abc-123"),
        )
        store.save_session(new)
        assert store.list_tasks() == []  # the scheduler's tables came with the migration
        found = store.find_by_agent_session("abc-123")
        assert found is not None and found.id == "new"
        assert store.find_by_agent_session("nope") is None
    finally:
        store.close()
    # a reader of the migrated file sees both
    reader = Store(tmp_path, readonly=True)
    sessions, broken = reader.list_sessions()
    reader.close()
    assert {s.id for s in sessions} == {"old", "new"} and not broken


def test_a_schema_2_database_keeps_its_board_rows_and_gains_agent_ids(tmp_path: Path) -> None:
    """Schema 2 (board summaries, no agent ids) → 3: the rows already kept
    stay as they were, and a stored agent id is backfilled into its column."""
    db = tmp_path / "corral.sqlite3"
    conn = sqlite3.connect(db)
    conn.executescript(SCHEMA_1.replace("data TEXT NOT NULL", "data TEXT NOT NULL, summary TEXT"))
    conn.execute("UPDATE meta SET value='2' WHERE key='schema_version'")
    known = CoderSession(
        id="known",
        repo="/r",
        intent="x",
        agent_identity=AgentIdentity(agent="claude", session_id="sess-9"),
    )
    conn.execute(
        "INSERT INTO sessions VALUES (?, ?, ?, ?, ?, ?, ?)",
        ("known", "/r", "running", 1.0, 1.0, known.model_dump_json(), '{"kept": true}'),
    )
    conn.commit()
    conn.close()

    store = Store(tmp_path)
    try:
        found = store.find_by_agent_session("sess-9")
        assert found is not None and found.id == "known"
        row = store._conn.execute(  # type: ignore[union-attr]
            "SELECT summary FROM sessions WHERE id='known'"
        ).fetchone()
        assert row == ('{"kept": true}',)
    finally:
        store.close()


def supervisor(state: Path, engine: ScriptedEngine) -> Supervisor:
    return Supervisor(
        state,
        drafter=ScriptedDrafter([hello_contract()]),
        engines=ScriptedEngines(engine),
        config=fast_config(),
    )


async def running_with_identity(state: Path, repo: Path, hook: dict[str, object]) -> str:
    """A running session whose agent reported `hook`, closed mid-run."""
    sup, registry = owner_with_registry(
        state,
        drafter=ScriptedDrafter([hello_contract()]),
        engine=ScriptedEngine([[Wait(asyncio.Event())]]),
        config=fast_config(),
    )
    await sup.open()
    try:
        sid = (await sup.start("say hi", repo)).session_id
        await sup.confirm(sid)
        await sup.wait_for(sid, {S.RUNNING}, timeout=10)
        registry.note_agent_hook(sid, hook)  # what the pane manager hears from the agent
    finally:
        await sup.close()
    return sid


async def test_a_session_whose_agent_named_itself_is_dormant_after_a_restart_and_revives(
    tmp_path: Path, repo: Path
) -> None:
    state = tmp_path / "state"
    transcript = tmp_path / "t.jsonl"
    transcript.write_text(SAVED_TURN)  # the agent saved its conversation
    sid = await running_with_identity(
        state,
        repo,
        {
            "hook_event_name": "SessionStart",
            "session_id": "abc-123",
            "transcript_path": str(transcript),
        },
    )
    stored = Store(state, readonly=True).load_session(sid)
    assert stored is not None and stored.agent_identity is not None
    assert stored.agent_identity.session_id == "abc-123"
    assert stored.agent_identity.transcript_path == str(transcript)

    engine = ScriptedEngine([[Write("hello.txt", "hi\n")]])
    sup = supervisor(state, engine)
    await sup.open()
    try:
        row = row_of(sup, sid)
        assert row.state is S.RUNNING and row.dormant and not row.live
        assert row.needs_you is None and row.error is None
        assert Path(row.worktree or "").is_dir()  # the worktree is kept

        await sup.revive(sid)
        row = await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=20)
        assert row.state is S.NEEDS_APPROVAL, row.error
        assert not row.dormant
        assert [c.resume_id() for c in engine.contexts] == ["abc-123"]
        assert any("Revived" in t and "abc-123" in t for t in plan_texts(sup, sid))
        with pytest.raises(CorralError, match="cannot be revived"):
            await sup.revive(sid)
    finally:
        await sup.close()


async def test_a_session_whose_agent_never_named_itself_still_fails(
    tmp_path: Path, repo: Path
) -> None:
    state = tmp_path / "state"
    sid = await running_with_identity(state, repo, {"hook_event_name": "Stop"})
    sup = supervisor(state, ScriptedEngine())
    await sup.open()
    try:
        row = row_of(sup, sid)
        assert row.state is S.FAILED and not row.dormant
        with pytest.raises(CorralError, match="cannot be revived"):
            await sup.revive(sid)
        with pytest.raises(CorralError, match="no corral session"):
            await sup.revive("nope")
    finally:
        await sup.close()


def test_codex_notify_names_its_thread() -> None:
    from corral.supervisor.session.identity import note_hook

    session = CoderSession(id="s", repo="/r", intent="x")
    payload = json.loads('{"type": "agent-turn-complete", "thread-id": "th-9"}')
    assert note_hook(session, "codex", payload)
    assert session.agent_identity == AgentIdentity(
        agent="codex", session_id="th-9", state=IdentityState.LIVE
    )
    assert not note_hook(session, "codex", payload)  # unchanged: nothing to store


async def test_a_dormant_session_can_be_cancelled_instead_of_revived(
    tmp_path: Path, repo: Path
) -> None:
    state = tmp_path / "state"
    sid = await running_with_identity(state, repo, {"session_id": "abc-123"})
    sup = supervisor(state, ScriptedEngine())
    await sup.open()
    try:
        assert row_of(sup, sid).dormant
        result = await sup.cancel(sid)
        assert result.state is S.ABANDONED and result.worktree is not None
        row = row_of(sup, sid)
        assert row.state is S.ABANDONED and not row.dormant
        with pytest.raises(CorralError, match="cannot be revived"):
            await sup.revive(sid)
    finally:
        await sup.close()


def test_an_agent_killed_before_it_saved_its_transcript_starts_afresh(tmp_path: Path) -> None:
    """Claude Code names its transcript before writing it: resuming an id
    whose transcript never reached the disk fails ("No conversation found")."""
    from corral.supervisor.session.identity import resume_id

    transcript = tmp_path / "t.jsonl"
    session = CoderSession(
        id="s",
        repo="/r",
        intent="x",
        agent_identity=AgentIdentity(
            agent="claude", session_id="abc", transcript_path=str(transcript)
        ),
    )
    assert resume_id(session) is None
    transcript.write_text(SAVED_TURN)
    assert resume_id(session) == "abc"
