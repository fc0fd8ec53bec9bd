"""Deleting a finished session through the facade: its worktree, stored row,
journal and lease rows really go (and stay gone after a restart), a delivered
branch stays in the repo, and a session that still runs or waits at a gate
is refused with what to do."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from corral.supervisor.errors import CorralError
from corral.supervisor.interface import WatchDropped
from corral.supervisor.states import CoderState, label
from tests.conftest import SupervisorFactory, git, proposed, run_to_gate

S = CoderState


def _leases(state_dir: Path, sid: str) -> int:
    conn = sqlite3.connect(state_dir / "corral.sqlite3")
    try:
        row = conn.execute("SELECT count(*) FROM leases WHERE session_id=?", (sid,)).fetchone()
        return int(row[0])
    finally:
        conn.close()


async def test_a_gated_session_is_refused_and_a_cancelled_one_is_gone_for_good(
    make_supervisor: SupervisorFactory, repo: Path, state_dir: Path
) -> None:
    sup = await make_supervisor()
    sid = await proposed(sup, repo)
    worktree = Path(sup.get(sid).session.worktree or "")
    assert worktree.is_dir()
    with pytest.raises(CorralError) as refused:
        await sup.delete(sid)
    assert "only a finished session can be deleted (cancel it first" in str(refused.value)
    assert worktree.is_dir() and any(r.session_id == sid for r in sup.list())

    await sup.cancel(sid)
    (worktree / "scratch.txt").write_text("left behind\n")  # undelivered work goes too
    journal = sup.journal_path(sid)
    assert journal.exists()
    rows, watcher = sup.watch()
    assert any(r.session_id == sid for r in rows)

    result = await sup.delete(sid)
    assert result.session_id == sid
    assert result.worktrees_removed == [str(worktree)] and result.branch_kept is None
    assert not worktree.exists()
    assert str(worktree) not in git(repo, "worktree", "list")
    assert not journal.exists()
    assert all(r.session_id != sid for r in sup.list())
    assert _leases(state_dir, sid) == 0
    with pytest.raises(WatchDropped):  # the board resyncs ...
        await watcher.get()
    rows, _again = sup.watch()  # ... from a snapshot without the row
    assert all(r.session_id != sid for r in rows)
    with pytest.raises(CorralError, match="no corral session"):
        await sup.delete(sid)

    await sup.close()
    again = await make_supervisor()
    assert all(r.session_id != sid for r in again.list())


@pytest.mark.slow
async def test_a_delivered_session_goes_and_its_branch_stays(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    sup = await make_supervisor()
    sid = await proposed(sup, repo)
    assert (await run_to_gate(sup, sid)).state is S.NEEDS_APPROVAL
    delivered = await sup.approve(sid)
    assert delivered.state is S.MERGED and delivered.branch
    branch = delivered.branch
    commit = git(repo, "rev-parse", f"refs/heads/{branch}").strip()

    result = await sup.delete(sid)
    assert result.branch_kept == branch
    assert git(repo, "rev-parse", f"refs/heads/{branch}").strip() == commit
    assert git(repo, "show", f"{branch}:hello.txt") == "hi\n"
    assert all(r.session_id != sid for r in sup.list())


async def test_a_worktree_changed_outside_corral_keeps_everything(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    sup = await make_supervisor()
    sid = await proposed(sup, repo)
    await sup.cancel(sid)
    worktree = Path(sup.get(sid).session.worktree or "")
    git(worktree, "checkout", "-q", "-b", "mine")  # the operator's own branch now lives there
    with pytest.raises(CorralError) as refused:
        await sup.delete(sid)
    text = str(refused.value)
    assert text.startswith(f"{label(sid)} was not deleted") and "git worktree remove" in text
    assert worktree.is_dir() and sup.journal_path(sid).exists()
    assert any(r.session_id == sid for r in sup.list())
