"""Durable state: the owner lock, read-only readers, refusing corrupt or newer
databases without touching them, and what survives a restart."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from corral.supervisor.api import Supervisor
from corral.supervisor.errors import CorralError, StateDirError
from corral.supervisor.models import CoderSession
from corral.supervisor.states import CoderState, FailureKind, label
from corral.supervisor.store import DB_NAME, LOCK_NAME, SCHEMA_VERSION, Store, read_lock_holder
from tests.conftest import SupervisorFactory, fast_config, git, hello_contract, stored_session
from tests.fakes.scripted import ScriptedDrafter, ScriptedEngine, ScriptedEngines, Wait, Write

S = CoderState
REPO_ROOT = Path(__file__).resolve().parents[2]


def new_supervisor(state_dir: Path) -> Supervisor:
    return Supervisor(
        state_dir,
        drafter=ScriptedDrafter([hello_contract()]),
        engines=ScriptedEngines(ScriptedEngine([[Write("hello.txt", "hi\n")]])),
        config=fast_config(),
    )


# --- the owner lock -------------------------------------------------------------------


async def test_a_second_supervisor_on_the_same_state_dir_names_the_holder(
    make_supervisor: SupervisorFactory, state_dir: Path
) -> None:
    await make_supervisor()
    holder = read_lock_holder(state_dir)
    assert holder is not None and holder.pid == os.getpid()
    assert holder.describe() == f"pid {os.getpid()}"

    second = new_supervisor(state_dir)
    with pytest.raises(StateDirError) as info:
        await second.open()
    message = str(info.value)
    assert f"pid {os.getpid()}" in message
    assert str(state_dir) in message
    assert "CORRAL_HOME" in message
    # the failed attempt did not steal or break the lock
    assert read_lock_holder(state_dir) == holder


async def test_the_lock_is_released_on_close(state_dir: Path) -> None:
    sup = new_supervisor(state_dir)
    await sup.open()
    await sup.close()
    assert read_lock_holder(state_dir) is None
    again = new_supervisor(state_dir)
    await again.open()
    await again.close()


def test_a_lock_left_by_a_dead_process_does_not_block(tmp_path: Path) -> None:
    state = tmp_path / "state"
    script = textwrap.dedent(
        f"""
        import os, sys
        sys.path.insert(0, {str(REPO_ROOT)!r})
        from pathlib import Path
        from corral.supervisor.store import OwnerLock
        OwnerLock(Path({str(state)!r})).acquire()
        os._exit(0)
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=30)
    assert (state / LOCK_NAME).exists()
    assert read_lock_holder(state) is None  # the flock died with its process


# --- read-only readers ----------------------------------------------------------------


async def test_a_read_only_store_lists_sessions_while_the_owner_holds_the_lock(
    make_supervisor: SupervisorFactory, state_dir: Path, repo: Path
) -> None:
    sup = await make_supervisor()
    started = await sup.start("say hi", repo)
    reader = Store(state_dir, readonly=True)
    try:
        sessions, broken = reader.list_sessions()
        assert [s.id for s in sessions] == [started.session_id]
        assert sessions[0].state is S.CONTRACT_PROPOSED
        assert broken == []
        loaded = reader.load_session(started.session_id)
        assert loaded is not None and loaded.contract == started.contract
        # the owner keeps writing while the reader is open
        await sup.confirm(started.session_id)
        await sup.wait_for(started.session_id, needs=True, timeout=10)
        loaded = reader.load_session(started.session_id)
        assert loaded is not None and loaded.state is S.NEEDS_APPROVAL
    finally:
        reader.close()


def test_a_read_only_store_of_a_missing_database_is_empty(tmp_path: Path) -> None:
    reader = Store(tmp_path / "nothing-here", readonly=True)
    assert reader.list_sessions() == ([], [])
    assert reader.load_session("x") is None
    assert not (tmp_path / "nothing-here").exists()


def test_rows_that_do_not_parse_are_reported_not_dropped(tmp_path: Path) -> None:
    store = Store(tmp_path)
    good = CoderSession(id="good", repo="/r", intent="x")
    store.save_session(good)
    store._conn.execute(  # type: ignore[union-attr]
        "INSERT INTO sessions(id, repo, state, created_at, updated_at, data) "
        "VALUES ('bad', '/r', 'running', 0, 0, '{not json')"
    )
    sessions, broken = store.list_sessions()
    assert [s.id for s in sessions] == ["good"]
    assert broken == ["bad"]
    store.close()


def test_a_minimal_legacy_row_still_loads(tmp_path: Path) -> None:
    store = Store(tmp_path)
    store._conn.execute(  # type: ignore[union-attr]
        "INSERT INTO sessions(id, repo, state, created_at, updated_at, data) VALUES "
        """('old', '/r', 'failed', 0, 0, '{"id": "old", "repo": "/r", "intent": "x", """
        """"state": "failed", "some_future_field": 1}')"""
    )
    loaded = store.load_session("old")
    assert loaded is not None and loaded.state is S.FAILED and loaded.failure_kind is None
    store.close()


# --- refusing databases we cannot read ------------------------------------------------


async def test_a_corrupt_database_is_refused_and_left_untouched(state_dir: Path) -> None:
    state_dir.mkdir(mode=0o700)
    db = state_dir / DB_NAME
    garbage = b"this is not an sqlite database\x00\xff" * 200
    db.write_bytes(garbage)

    sup = new_supervisor(state_dir)
    with pytest.raises(StateDirError) as info:
        await sup.open()
    assert str(db) in str(info.value)
    assert "left untouched" in str(info.value)
    assert db.read_bytes() == garbage
    assert read_lock_holder(state_dir) is None  # the lock was released

    with pytest.raises(StateDirError, match=str(db)):
        Store(state_dir, readonly=True)
    assert db.read_bytes() == garbage


def make_db_with_schema(db: Path, version: int) -> bytes:
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(version),))
    conn.execute("CREATE TABLE sessions (id TEXT PRIMARY KEY, future_column BLOB)")
    conn.commit()
    conn.close()
    return db.read_bytes()


async def test_a_database_from_a_newer_corral_is_refused_and_left_untouched(
    state_dir: Path,
) -> None:
    state_dir.mkdir(mode=0o700)
    db = state_dir / DB_NAME
    original = make_db_with_schema(db, SCHEMA_VERSION + 1)

    sup = new_supervisor(state_dir)
    with pytest.raises(StateDirError) as info:
        await sup.open()
    message = str(info.value)
    assert str(db) in message and "newer corral" in message
    assert f"schema {SCHEMA_VERSION + 1}" in message
    assert db.read_bytes() == original
    assert read_lock_holder(state_dir) is None

    with pytest.raises(StateDirError, match="newer corral"):
        Store(state_dir, readonly=True)
    assert db.read_bytes() == original


def test_an_sqlite_file_that_is_not_ours_is_refused(tmp_path: Path) -> None:
    db = tmp_path / DB_NAME
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE photos (id INTEGER)")
    conn.commit()
    conn.close()
    original = db.read_bytes()
    with pytest.raises(StateDirError, match="not a corral database"):
        Store(tmp_path)
    assert db.read_bytes() == original


# --- restart --------------------------------------------------------------------------


async def test_a_restart_restores_intact_gates_and_fails_interrupted_runs(
    state_dir: Path, repo: Path, tmp_path: Path
) -> None:
    hold = asyncio.Event()
    engine = ScriptedEngine([[Wait(hold)]])
    first = Supervisor(
        state_dir,
        drafter=ScriptedDrafter([hello_contract()]),
        engines=ScriptedEngines(engine),
        config=fast_config(),
    )
    await first.open()
    try:
        proposed = (await first.start("say hi", repo)).session_id
        orphan = (await first.start("say hey", repo)).session_id
        running = (await first.start("say hello", repo)).session_id
        await first.confirm(running)
        assert first.get(running).session.state is S.RUNNING
        orphan_tree = first.get(orphan).session.worktree
    finally:
        await first.close()
    assert read_lock_holder(state_dir) is None
    # the operator deletes one gate's worktree while corral is closed
    git(repo, "worktree", "remove", "--force", orphan_tree or "")

    second = new_supervisor(state_dir)
    await second.open()
    try:
        rows = {r.session_id: r for r in second.list()}
        assert set(rows) == {proposed, orphan, running}
        # an interrupted run is failed, with a reason, and never live
        assert rows[running].state is S.FAILED and rows[running].live is False
        assert rows[running].failure_kind is FailureKind.INFRASTRUCTURE
        assert "corral stopped while this session was running" in (rows[running].error or "")
        assert rows[running].needs_you is None and rows[running].next_seq is None
        # an intact contract gate is back, live, and can be confirmed
        assert rows[proposed].live is True
        assert rows[proposed].needs_you == "contract"
        # a gate whose worktree vanished is listed as stored, offering nothing
        assert rows[orphan].live is False and rows[orphan].needs_you is None
        assert rows[orphan].next_seq is None and rows[orphan].steering_available is False
        with pytest.raises(CorralError) as info:
            await second.approve(orphan)
        assert "is not running in this corral" in str(info.value)
        with pytest.raises(CorralError, match="did not survive a restart"):
            await second.confirm(orphan)
        with pytest.raises(CorralError, match="already finished \\(state: failed\\)"):
            await second.approve(running)

        # cancel of a stored session answers without raising
        result = await second.cancel(running)
        assert result.state is S.FAILED and result.already_terminal is True
        assert result.message == (
            f"{label(running)} already finished (state: failed) — nothing to cancel"
        )
        result = await second.cancel(orphan)
        assert result.state is S.CONTRACT_PROPOSED and result.already_terminal is False
        assert result.message == (
            f"{label(orphan)} is not running in this corral (state: contract_proposed) — "
            "nothing to cancel"
        )

        # subscribe answers from the snapshot
        sub_result, sub = second.subscribe(running)
        assert sub is None
        assert (sub_result.state, sub_result.live, sub_result.replay_available) == (
            S.FAILED,
            False,
            False,
        )
        assert sub_result.events_replayed == 0

        # the restored gate works end to end: its events continue after the old cursor
        sub_result, sub = second.subscribe(proposed)
        assert sub is not None and sub_result.live
        assert await second.confirm(proposed) == {"state": "running"}
        hold.set()
    finally:
        await second.close()


def test_a_process_that_died_mid_run_is_recovered_as_failed(tmp_path: Path, repo: Path) -> None:
    """The owner crashes (no close): the next open marks the running session failed."""
    state = tmp_path / "state"
    script = textwrap.dedent(
        f"""
        import asyncio, os, sys
        sys.path.insert(0, {str(REPO_ROOT)!r})
        sys.path.insert(0, {str(REPO_ROOT / "tests")!r})
        from pathlib import Path
        from corral.supervisor.api import Supervisor
        from corral.supervisor.config import SupervisorConfig
        from corral.supervisor.models import ContractCheck, OutcomeContract
        from corral.supervisor.states import CoderState
        from tests.fakes.scripted import ScriptedDrafter, ScriptedEngine, ScriptedEngines, Wait

        async def main():
            contract = OutcomeContract(checks=[ContractCheck(name="hello",
                                                             command="grep -q hi hello.txt")])
            sup = Supervisor(Path({str(state)!r}), drafter=ScriptedDrafter([contract]),
                             engines=ScriptedEngines(ScriptedEngine([[Wait(asyncio.Event())]])),
                             config=SupervisorConfig())
            await sup.open()
            sid = (await sup.start("say hi", {str(repo)!r})).session_id
            await sup.confirm(sid)
            await sup.wait_for(sid, {{CoderState.RUNNING}}, timeout=10)
            print(sid, flush=True)
            os._exit(0)  # die without closing anything

        asyncio.run(main())
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], check=True, timeout=60, capture_output=True, text=True
    )
    sid = out.stdout.strip()

    reader = Store(state, readonly=True)
    stored = reader.load_session(sid)
    reader.close()
    assert stored is not None and stored.state is S.RUNNING  # what the dead process left

    async def reopen() -> None:
        sup = new_supervisor(state)
        await sup.open()
        try:
            [row] = sup.list()
            assert row.session_id == sid
            assert row.state is S.FAILED and row.live is False
            assert row.failure_kind is FailureKind.INFRASTRUCTURE
            assert "corral stopped while this session was running" in (row.error or "")
            on_disk = stored_session(sup.state_dir, sid)
            assert on_disk is not None and on_disk.state is S.FAILED
            assert on_disk.keep_workspace_on_failure is True
            assert on_disk.worktree and Path(on_disk.worktree).is_dir()
        finally:
            await sup.close()

    asyncio.run(reopen())
