"""What the command line may do about a state dir without owning it: list
stored sessions and worktrees while a console runs, and prune only what no
live session needs (and only once that console is closed)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from corral.supervisor.errors import CorralError
from corral.supervisor.paths import ensure_unowned, read_lock_holder
from corral.supervisor.states import CoderState
from corral.supervisor.stored_board import stored_sessions
from corral.supervisor.worktree_pruning import PruneOutcome, PruneStep, prune_worktrees, worktrees
from tests.conftest import SupervisorFactory, git


async def test_pruning_keeps_what_a_live_session_needs(
    make_supervisor: SupervisorFactory, state_dir: Path, repo: Path
) -> None:
    sup = await make_supervisor()
    finished = (await sup.start("say hi", repo)).session_id
    pending = (await sup.start("say hi again", repo)).session_id
    await sup.cancel(finished)

    # while the console owns the state dir: reading works, pruning is refused
    holder = read_lock_holder(state_dir)
    assert holder is not None and holder.pid == os.getpid()
    with pytest.raises(CorralError, match=f"pid {os.getpid()}"):
        ensure_unowned(state_dir)
    with pytest.raises(CorralError, match="close the console first"):
        prune_worktrees(state_dir, dry_run=True, force=False)
    stored = stored_sessions(state_dir)
    assert {r.session_id for r in stored.rows} == {finished, pending} and not stored.unreadable
    states = {r.path: r.session_state for r in worktrees(state_dir)}
    assert sorted(states.values()) == sorted([CoderState.ABANDONED, CoderState.CONTRACT_PROPOSED])
    finished_path = next(p for p, s in states.items() if s is CoderState.ABANDONED)
    pending_path = next(p for p, s in states.items() if s is CoderState.CONTRACT_PROPOSED)
    await sup.close()
    assert read_lock_holder(state_dir) is None
    ensure_unowned(state_dir)

    stray = state_dir / "worktrees" / "stray"
    git(repo, "worktree", "add", "-q", "--detach", str(stray))
    stray_path = str(stray.resolve())

    heard: list[PruneStep] = []
    plan = prune_worktrees(state_dir, dry_run=True, force=False, on_step=heard.append)
    assert heard == plan.steps
    assert [(s.path, s.outcome) for s in plan.steps] == [
        (finished_path, PruneOutcome.WOULD_REMOVE),
        (stray_path, PruneOutcome.KEPT_UNKNOWN),
    ]  # the pending session's worktree is not even a candidate
    assert Path(finished_path).is_dir() and stray.is_dir()

    done = prune_worktrees(state_dir, dry_run=False, force=False)
    assert [(s.path, s.outcome) for s in done.steps] == [
        (finished_path, PruneOutcome.REMOVED),
        (stray_path, PruneOutcome.KEPT_UNKNOWN),
    ]
    assert (done.removed, done.kept) == (1, 1)
    assert not Path(finished_path).exists() and Path(pending_path).is_dir() and stray.is_dir()

    forced = prune_worktrees(state_dir, dry_run=False, force=True)
    assert [(s.path, s.outcome) for s in forced.steps] == [
        (stray_path, PruneOutcome.REMOVED_UNKNOWN)
    ]
    assert not stray.exists() and Path(pending_path).is_dir()


def test_an_empty_state_dir_has_nothing_to_prune(tmp_path: Path) -> None:
    report = prune_worktrees(tmp_path / "state", dry_run=False, force=True)
    assert not report.has_store and report.steps == []
    assert worktrees(tmp_path / "state") == []
    assert stored_sessions(tmp_path / "state").rows == []
