"""Every failed session keeps its worktree and what its agent wrote there (a
failure is not the operator's decision to throw work away): red checks after
the repairs, a plain engine failure, a budget cut, the owner going away mid-run
and a drafting failure (the crash of the owning process itself is
`test_store_restart.test_a_process_that_died_mid_run_is_recovered_as_failed`).
A retry carries on from it; removing it is the operator's, and asked."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from corral.supervisor.config import SupervisorConfig
from corral.supervisor.contracts.drafting import DraftingError
from corral.supervisor.errors import CorralError
from corral.supervisor.git.leases import LeaseState
from corral.supervisor.states import CoderState, FailureKind, LoopFailure
from tests.conftest import (
    SupervisorFactory,
    eventually,
    git,
    lease_of,
    proposed,
    run_to_gate,
    stored_session,
)
from tests.fakes.scripted import Fail, ScriptedDrafter, ScriptedEngine, Wait, Write

S = CoderState
REPO_ROOT = Path(__file__).resolve().parents[2]


def test_an_older_config_asking_to_remove_failed_worktrees_is_still_read() -> None:
    assert SupervisorConfig.model_validate({"keep_workspace_on_failure": False})


async def test_a_plain_failure_keeps_its_worktree_and_the_agents_work(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    engine = ScriptedEngine([[Write("hello.txt", "no\n"), Fail(LoopFailure.EXECUTION, "boom")]])
    sup = await make_supervisor(engine=engine)
    started = await sup.start("say hi", repo)
    worktree = Path(started.worktree or "")
    row = await run_to_gate(sup, started.session_id)
    assert row.state is S.FAILED and row.failure_kind is FailureKind.ERROR
    await asyncio.sleep(0.3)  # a removal, had one been started, would have run by now
    assert (worktree / "hello.txt").read_text() == "no\n"
    lease = lease_of(sup.state_dir, started.worktree)
    assert lease is not None and lease.state is LeaseState.RETAINED and not lease.discard_ok
    assert "retained for postmortem" in str([e.data for e in sup.replay(started.session_id)])


async def test_a_session_failing_after_its_repairs_keeps_its_work_and_a_retry_builds_on_it(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    """Red checks after every repair: the worktree stays with the agent's
    partial work (committed and not), and `retry --keep-edits` starts there."""
    rounds = [[Write("draft.txt", "half done\n"), Write("hello.txt", "nearly\n")]] * 2
    sup = await make_supervisor(engine=ScriptedEngine(rounds), repair_invokes=1)
    sid = await proposed(sup, repo)
    row = await run_to_gate(sup, sid)
    assert row.state is S.FAILED and row.error and "contract not satisfied" in row.error
    old = Path(sup.get(sid).session.worktree or "")
    await asyncio.sleep(0.3)
    assert (old / "draft.txt").read_text() == "half done\n"
    assert (old / "hello.txt").read_text() == "nearly\n"

    retry = await sup.retry(sid, wait=True, keep_edits=True)
    tree = Path(sup.get(retry.session_id).session.worktree or "")
    assert tree != old and (tree / "draft.txt").read_text() == "half done\n"
    assert (old / "draft.txt").exists()  # the old attempt is untouched


def _prune(home: Path, *args: str, stdin: int | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, CORRAL_HOME=str(home), CORRAL_CONFIG=str(home / "none.toml"))
    env["PYTHONPATH"] = str(REPO_ROOT)
    return subprocess.run(
        [sys.executable, "-m", "corral.tui.cli", "worktrees", "prune", *args],
        env=env,
        stdin=stdin if stdin is not None else subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.slow
async def test_pruning_a_failed_sessions_work_asks_first(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    engine = ScriptedEngine([[Write("hello.txt", "no\n"), Fail(LoopFailure.EXECUTION, "boom")]])
    sup = await make_supervisor(engine=engine)
    started = await sup.start("say hi", repo)
    worktree = Path(started.worktree or "")
    assert (await run_to_gate(sup, started.session_id)).state is S.FAILED
    home = sup.state_dir
    await sup.close()

    # dirty: kept without --force, and said so
    out = _prune(home)
    assert out.returncode == 0, out.stderr
    assert "uncommitted changes; --force to remove" in out.stdout and worktree.is_dir()
    # --force off a terminal: asks for --yes, removes nothing
    out = _prune(home, "--force")
    assert out.returncode == 2, out.stderr
    assert "add --yes" in out.stderr and (worktree / "hello.txt").exists()
    assert f"remove {worktree}" in out.stdout and "its session failed" in out.stdout
    # on a terminal it asks; "n" keeps everything
    main, child = os.openpty()
    try:
        os.write(main, b"n\n")
        out = _prune(home, "--force", stdin=child)
    finally:
        os.close(child)
        os.close(main)
    assert out.returncode == 2 and "Remove 1 worktree listed above" in out.stdout
    assert "nothing was removed" in out.stderr and (worktree / "hello.txt").exists()
    out = _prune(home, "--force", "--yes")
    assert out.returncode == 0, out.stderr
    assert "1 removed" in out.stdout and not worktree.exists()
    assert git(repo, "status", "--porcelain") == ""


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
