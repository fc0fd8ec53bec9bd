"""Which failed sessions keep their worktree, with the default settings: a
plain failure removes it; a budget cut, the owner going away mid-run and a
drafting failure keep it (the crash of the owning process itself is
`test_store_restart.test_a_process_that_died_mid_run_is_recovered_as_failed`)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from corral.supervisor.config import SupervisorConfig
from corral.supervisor.contracts.drafting import DraftingError
from corral.supervisor.errors import CorralError
from corral.supervisor.git.leases import LeaseState
from corral.supervisor.states import CoderState, FailureKind, LoopFailure
from tests.conftest import SupervisorFactory, eventually, lease_of, run_to_gate, stored_session
from tests.fakes.scripted import Fail, ScriptedDrafter, ScriptedEngine, Wait, Write

S = CoderState


def test_the_default_keeps_no_worktree_of_a_plain_failure() -> None:
    assert SupervisorConfig().keep_workspace_on_failure is False


async def test_a_plain_failure_removes_its_worktree(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    engine = ScriptedEngine([[Write("hello.txt", "no\n"), Fail(LoopFailure.EXECUTION, "boom")]])
    sup = await make_supervisor(engine=engine)
    started = await sup.start("say hi", repo)
    worktree = Path(started.worktree or "")
    row = await run_to_gate(sup, started.session_id)
    assert row.state is S.FAILED and row.failure_kind is FailureKind.ERROR
    await eventually(lambda: not worktree.exists())
    assert "retained for postmortem" not in str([e.data for e in sup.replay(started.session_id)])


async def test_a_budget_cut_keeps_its_worktree(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    engine = ScriptedEngine(
        [[Write("hello.txt", "half\n"), Fail(LoopFailure.BUDGET_EXHAUSTED, "out of turns")]]
    )
    sup = await make_supervisor(engine=engine)
    started = await sup.start("say hi", repo)
    row = await run_to_gate(sup, started.session_id)
    assert row.state is S.FAILED and row.failure_kind is FailureKind.BUDGET_EXHAUSTED
    # kept, not removed: the lease says retained (what `corral worktrees` lists),
    # written with the failure, where a removal would have been started instead
    lease = lease_of(sup.state_dir, started.worktree)
    assert lease is not None and lease.state is LeaseState.RETAINED
    worktree = Path(started.worktree or "")
    assert (worktree / "hello.txt").read_text() == "half\n"
    assert sup.get(started.session_id).session.keep_workspace_on_failure


async def test_a_run_cut_short_by_its_owner_going_away_keeps_its_worktree(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    hold = asyncio.Event()
    engine = ScriptedEngine([[Write("hello.txt", "half\n"), Wait(hold)]])
    sup = await make_supervisor(engine=engine)
    started = await sup.start("say hi", repo)
    await sup.confirm(started.session_id)
    worktree = Path(started.worktree or "")
    await eventually(lambda: (worktree / "hello.txt").exists())
    await sup.close()
    stored = stored_session(sup.state_dir, started.session_id)
    assert stored is not None and stored.state is S.FAILED
    assert stored.failure_kind is FailureKind.INFRASTRUCTURE
    assert (worktree / "hello.txt").read_text() == "half\n"


async def test_a_drafting_failure_keeps_its_worktree(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    sup = await make_supervisor(drafter=ScriptedDrafter([DraftingError("503 unavailable")]))
    with pytest.raises(CorralError, match="503"):
        await sup.start("say hi", repo)
    [row] = sup.list()
    assert row.state is S.FAILED and row.worktree and Path(row.worktree).is_dir()
    lease = lease_of(sup.state_dir, row.worktree)  # retained, never handed to a removal
    assert lease is not None and lease.state is LeaseState.RETAINED
