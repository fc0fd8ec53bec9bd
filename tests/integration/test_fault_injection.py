"""Every side effect is reachable by a fault-injection test: a real owner
process runs a session from start to delivery and is killed (`os._exit(137)`,
as `kill -9` would) at one named point of `supervisor/faults.py`; a new
`Supervisor` then opens the same state dir and the test checks what it shows.

What a restart shows, per point (also tabled in README.md, "Crash tests"):

- `start:worktree` — the session was never saved: nothing is listed, and
  the worktree made for it (it holds no work) is removed at start-up;
- `start:session` … `baseline:after` — failed, "corral stopped while drafting
  this session's contract", worktree kept (untouched); a baseline's scratch
  worktree is removed at start-up;
- `contract:saved` — the contract waits for confirmation again; confirm, run
  and approve deliver once;
- `run:engine-started` … `verify:recorded` — failed, "corral stopped while
  this session was running" (an in-process agent died with the process), the
  worktree kept with the agent's edits;
- `delivery:*` — back at approval (the state was not saved); approving again
  delivers exactly once: a branch already written counts as the delivery, a
  checkout already holding the change says `already_applied`.

For every point: no branch or result ref before delivery wrote one, the branch
holds exactly one commit with the verified content, the checkout holds it
once, a partial delivery carries only the approved part (the rest stays in
the kept worktree), and event numbers in the journal are unique and
increasing.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from corral.supervisor.api import Supervisor, new_session_id
from corral.supervisor.errors import CorralError
from corral.supervisor.faults import ORDER, POINTS
from corral.supervisor.models import ApproveResult
from corral.supervisor.session.journal import read_journal
from corral.supervisor.states import CoderState, short_id
from corral.supervisor.store import Store
from tests.conftest import fast_config, git, hello_contract, row_of, run_to_gate
from tests.fakes.scripted import ScriptedDrafter, ScriptedEngine, ScriptedEngines, Write

S = CoderState
REPO_ROOT = Path(__file__).resolve().parents[2]
PARTIAL = {"hello.txt": None}  # approve hello.txt, leave extra.txt in the worktree


def steps() -> list[Write]:
    """What the agent does: the checked file, and one more for partial approval."""
    return [Write("hello.txt", "hi\n"), Write("extra.txt", "more\n")]


def new_supervisor(state_dir: Path, id_factory: Callable[[], str] = new_session_id) -> Supervisor:
    return Supervisor(
        state_dir,
        drafter=ScriptedDrafter([hello_contract()]),
        engines=ScriptedEngines(ScriptedEngine([steps()])),
        config=fast_config(),
        id_factory=id_factory,
    )


# --- the owner that is killed --------------------------------------------------------------

CRASHING_OWNER = """
import asyncio, sys
sys.path.insert(0, {root!r})
from pathlib import Path
from tests.integration.test_fault_injection import new_supervisor, PARTIAL

async def main():
    sup = new_supervisor(Path({state!r}), id_factory=lambda: {sid!r})
    await sup.open()
    await sup.start("say hi", {repo!r})
    await sup.confirm({sid!r})
    await sup.wait_for({sid!r}, needs=True, timeout=30)
    selection = PARTIAL if {partial!r} else None
    await sup.approve({sid!r}, delivery={delivery!r}, selection=selection)
    print("not killed", flush=True)

asyncio.run(main())
"""


def crash_at(
    fault: str, state: Path, repo: Path, *, delivery: str = "branch", partial: bool = False
) -> str:
    """Run an owner that takes a session from start to delivery and is killed
    at `fault`; returns the session's id (chosen up front, so a crash before
    `start` returns still names it)."""
    assert fault in POINTS
    sid = new_session_id()
    script = textwrap.dedent(CRASHING_OWNER).format(
        root=str(REPO_ROOT),
        state=str(state),
        repo=str(repo),
        sid=sid,
        delivery=delivery,
        partial=partial,
    )
    proc = subprocess.run(
        [sys.executable, "-c", script],
        env={**os.environ, "CORRAL_FAULT": fault},
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 137, f"not killed at {fault}: {proc.stdout}{proc.stderr}"
    return sid


# --- what a restart must show --------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    fault: str
    delivery: str = "branch"
    partial: bool = False

    @property
    def id(self) -> str:
        return f"{self.fault}-{'partial-' if self.partial else ''}{self.delivery}"

    @property
    def stage(self) -> str:
        return self.fault.split(":")[0]

    def reached(self, point: str) -> bool:
        """Whether the owner got to `point` (or past it) before it was killed."""
        return ORDER.index(point) <= ORDER.index(self.fault)


CASES = [
    *(
        Case(point)
        for point in ORDER
        if not point.startswith("delivery:")  # the run stops before delivery
    ),
    Case("delivery:partial-commit", "branch", partial=True),
    Case("delivery:partial-commit", "checkout", partial=True),
    Case("delivery:result-ref", "branch"),
    Case("delivery:result-ref", "checkout"),
    Case("delivery:result-ref", "branch", partial=True),
    Case("delivery:branch", "branch"),
    Case("delivery:branch", "branch", partial=True),
    Case("delivery:checkout", "checkout"),
    Case("delivery:checkout", "checkout", partial=True),
]

DRAFTING = {"start:session", "contract:drafted", "baseline:before", "baseline:after"}
RUNNING = {
    "run:engine-started",
    "run:edited",
    "verify:before-checks",
    "verify:between-snapshots",
    "verify:recorded",
}


def test_every_point_is_exercised() -> None:
    assert {case.fault for case in CASES} == POINTS
    assert DRAFTING | RUNNING | {"start:worktree", "contract:saved"} == {
        p for p in POINTS if not p.startswith("delivery:")
    }


def worktrees_of(repo: Path) -> set[str]:
    listing = git(repo, "worktree", "list", "--porcelain")
    return {
        str(Path(line.removeprefix("worktree ")).resolve())
        for line in listing.splitlines()
        if line.startswith("worktree ")
    }


def ref(repo: Path, name: str) -> str:
    return git(repo, "rev-parse", "--verify", "--quiet", name, check=False).strip()


def assert_unique_increasing(seqs: list[int]) -> None:
    assert seqs == sorted(set(seqs)), f"seq repeated or out of order: {seqs}"


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
async def test_a_crash_at_each_point_restarts_to_the_truth(
    tmp_path: Path, repo: Path, case: Case
) -> None:
    state = tmp_path / "state"
    sid = await asyncio.to_thread(
        crash_at, case.fault, state, repo, delivery=case.delivery, partial=case.partial
    )
    reader = Store(state, readonly=True)
    stored = reader.load_session(sid)
    reader.close()
    branch = f"corral/{short_id(sid)}"
    result_ref = f"refs/corral/results/{sid}"

    # what the crash left: nothing delivered before delivery wrote it
    written = ref(repo, branch)
    assert bool(written) is (case.fault == "delivery:branch")
    assert bool(ref(repo, result_ref)) is case.reached("delivery:result-ref")
    assert (repo / "hello.txt").exists() is (case.fault == "delivery:checkout")

    sup = new_supervisor(state)
    await sup.open()
    try:
        # no scratch worktree (a baseline's) outlives the restart
        worktree = Path(stored.worktree) if stored and stored.worktree else None
        assert worktrees_of(repo) <= {str(repo.resolve()), str(worktree and worktree.resolve())}
        if case.fault == "start:worktree":
            assert stored is None  # never saved: nothing to show, and no work in it
            assert worktrees_of(repo) == {str(repo.resolve())}  # its worktree removed
            assert all(row.session_id != sid for row in sup.list())
            return
        assert stored is not None and worktree is not None
        session = sup.get(sid).session
        if case.fault in DRAFTING or case.fault in RUNNING:
            assert session.state is S.FAILED
            drafting = case.fault in DRAFTING
            doing = "drafting this session's contract" if drafting else "this session was running"
            assert f"corral stopped while {doing}" in (session.error or "")
            assert worktree.is_dir()  # kept, with whatever the agent did
            edited = case.reached("run:edited")
            assert ((worktree / "hello.txt").exists()) is edited
            if edited:
                assert (worktree / "hello.txt").read_text() == "hi\n"
            if case.fault == "verify:recorded":
                assert session.review_tree is not None  # the record survives, unused
            with pytest.raises(CorralError):
                await sup.approve(sid)
            assert not ref(repo, branch)
        else:
            if case.fault == "contract:saved":
                assert row_of(sup, sid).state is S.CONTRACT_PROPOSED
                await run_to_gate(sup, sid)
            else:
                assert stored.state is S.NEEDS_APPROVAL  # the delivery was not saved
            assert row_of(sup, sid).needs_you == "merge"
            selection = PARTIAL if case.partial else None
            result = await sup.approve(sid, delivery=case.delivery, selection=selection)
            assert_delivered_once(repo, case, result, branch, written, worktree)
            with pytest.raises(CorralError):  # once: a second approve is refused
                await sup.approve(sid, delivery=case.delivery, selection=selection)
        journal = read_journal(sup.journal_path(sid))
    finally:
        await sup.close()
    assert journal or case.fault == "start:session"  # nothing was announced before that crash
    assert_unique_increasing([event.seq for event in journal])


def assert_delivered_once(
    repo: Path, case: Case, result: ApproveResult, branch: str, written: str, worktree: Path
) -> None:
    assert result.state is S.MERGED and result.partial is case.partial
    if case.delivery == "checkout":
        assert result.already_applied is (case.fault == "delivery:checkout")
        assert (repo / "hello.txt").read_text() == "hi\n"
        assert (repo / "extra.txt").exists() is not case.partial
        assert not ref(repo, branch)
    else:
        assert result.branch == branch
        assert git(repo, "rev-list", "--count", f"main..{branch}").strip() == "1"
        assert git(repo, "show", f"{branch}:hello.txt") == "hi\n"
        assert bool(ref(repo, f"{branch}:extra.txt")) is not case.partial
        assert bool(result.already_applied) is bool(written)
        if written:  # the branch already written counts as the delivery
            assert result.commit == written == ref(repo, branch)
        assert not (repo / "hello.txt").exists()
    if case.partial:  # the part not approved stays in the kept worktree
        assert (worktree / "extra.txt").read_text() == "more\n"


async def test_an_unsaved_sessions_worktree_that_holds_work_is_kept(
    tmp_path: Path, repo: Path
) -> None:
    """Only an unclaimed worktree holding nothing is removed at start-up."""
    state = tmp_path / "state"
    await asyncio.to_thread(crash_at, "start:worktree", state, repo)
    (made,) = worktrees_of(repo) - {str(repo.resolve())}
    (Path(made) / "notes.txt").write_text("mine\n")
    sup = new_supervisor(state)
    await sup.open()
    await sup.close()
    assert (Path(made) / "notes.txt").read_text() == "mine\n"
