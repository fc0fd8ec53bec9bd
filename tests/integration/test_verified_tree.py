"""Verified means verified: the worktree is captured as a git tree before and
after the checks, only a tree that held still is a result, and everything
after (the diff, partial approval, both deliveries, a restart) reads that
tree, never the live worktree. Event numbers never repeat across restarts.
(A crash at each step of delivery, and of every other stage, is in
`test_fault_injection.py`.)"""

from __future__ import annotations

import shlex
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from corral.supervisor.api import Supervisor
from corral.supervisor.models import EventKind
from corral.supervisor.session.journal import read_journal
from corral.supervisor.states import CoderState
from tests.conftest import (
    SupervisorFactory,
    events_of,
    eventually,
    fast_config,
    git,
    hello_contract,
    row_of,
    run_to_gate,
)
from tests.fakes.scripted import (
    Run,
    ScriptedDrafter,
    ScriptedEngine,
    ScriptedEngines,
    Write,
    contract,
)

S = CoderState


def new_supervisor(state_dir: Path, **config: object) -> Supervisor:
    return Supervisor(
        state_dir,
        drafter=ScriptedDrafter([hello_contract()]),
        engines=ScriptedEngines(ScriptedEngine([[Write("hello.txt", "hi\n")]])),
        config=fast_config(**config),
    )


@pytest.fixture
async def stop_writers(tmp_path: Path) -> AsyncIterator[Path]:
    """A file whose existence stops the background writers a test starts."""
    stop = tmp_path / "stop-writers"
    yield stop
    stop.touch()
    await eventually(lambda: not _running_with(str(stop)))


def _running_with(arg: str) -> list[int]:
    """Processes whose command line names `arg` (the writers watch the stop file)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and arg in (proc / "cmdline").read_text(errors="replace"):
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def detached(script: str) -> str:
    """A shell command that starts `script` in its own session, so it outlives
    the agent's command (the way a process an agent leaves behind does)."""
    # the pause lets `setsid` leave the command's process group before corral
    # kills that group (as it does for every command an engine runs)
    return f"setsid bash -c {shlex.quote(script)} >/dev/null 2>&1 </dev/null & sleep 0.3"


def assert_unique_increasing(seqs: list[int]) -> None:
    assert seqs == sorted(set(seqs)), f"seq repeated or out of order: {seqs}"


# --- before and after the checks -------------------------------------------------------------


@pytest.mark.slow
async def test_a_file_rewritten_while_the_checks_run_is_never_accepted(
    make_supervisor: SupervisorFactory, repo: Path, stop_writers: Path
) -> None:
    writer = detached(
        f"i=0; while [ ! -e {shlex.quote(str(stop_writers))} ] && [ $i -lt 600 ]; do "
        "echo $i > clock.txt; i=$((i+1)); sleep 0.05; done"
    )
    engine = ScriptedEngine([[Write("hello.txt", "hi\n"), Run(writer)]])
    slow_check = contract(("hello", "sleep 0.5; grep -q hi hello.txt"))
    sup = await make_supervisor(
        drafter=ScriptedDrafter([slow_check]), engine=engine, repair_invokes=0
    )
    sid = (await sup.start("say hi", repo)).session_id
    row = await run_to_gate(sup, sid)

    assert row.state is S.FAILED
    error = sup.get(sid).session.error or ""
    assert "the worktree changed during verification, on each of 3 attempts (clock.txt)" in error
    moved = [
        e.data.model_dump() for e in events_of(sup, sid) if e.kind is EventKind.WORKTREE_CHANGED
    ]
    assert [(d["phase"], d["files"], d["attempt"]) for d in moved] == [
        ("during_verification", ["clock.txt"], n) for n in (1, 2, 3)
    ]
    evaluated = [e for e in events_of(sup, sid) if e.kind is EventKind.CONTRACT_EVALUATED]
    assert (
        evaluated[-1].data.model_dump()["passed"] is False
    )  # every check passed, but on a moving tree
    assert sup.get(sid).session.review_tree is None
    assert git(repo, "branch", "--list", "corral/*").strip() == ""


@pytest.mark.slow
async def test_a_file_written_once_during_the_checks_is_verified_again(
    make_supervisor: SupervisorFactory, repo: Path, tmp_path: Path, stop_writers: Path
) -> None:
    # made by the check (also at the baseline, before the writer runs) in the
    # fresh checkout it runs in (under the state dir's scratch): outside the
    # agent's tree, and writable from the sandbox; the writer looks for it there
    go = "go-signal"
    scratch = shlex.quote(str(tmp_path / "state" / "scratch"))
    seen = f"ls {scratch}/*/go-signal >/dev/null 2>&1"
    writer = detached(
        f"i=0; while ! {seen} && [ ! -e {shlex.quote(str(stop_writers))} ]"
        " && [ $i -lt 600 ]; do i=$((i+1)); sleep 0.02; done; echo late > late.txt"
    )
    engine = ScriptedEngine([[Write("hello.txt", "hi\n"), Run(writer)]])
    check = contract(("hello", f"touch {go}; sleep 0.5; grep -q hi hello.txt"))
    sup = await make_supervisor(drafter=ScriptedDrafter([check]), engine=engine)
    sid = (await sup.start("say hi", repo)).session_id
    row = await run_to_gate(sup, sid)

    assert row.state is S.NEEDS_APPROVAL
    moved = [
        e.data.model_dump() for e in events_of(sup, sid) if e.kind is EventKind.WORKTREE_CHANGED
    ]
    assert moved == [{"phase": "during_verification", "files": ["late.txt"], "attempt": 1, "of": 3}]
    session = sup.get(sid).session
    assert session.review_tree is not None
    assert "late.txt" in git(repo, "ls-tree", "--name-only", session.review_tree)
    assert session.diff is not None and "late.txt" in session.diff.stat


# --- after verification: the verified tree, never the live worktree ------------------------


async def test_checkout_delivery_of_a_changed_worktree_applies_the_verified_content(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    sup = await make_supervisor()
    sid = (await sup.start("say hi", repo)).session_id
    await run_to_gate(sup, sid)
    worktree = Path(sup.get(sid).session.worktree or "")
    (worktree / "hello.txt").write_text("tampered\n")
    (worktree / "extra.txt").write_text("never reviewed\n")

    result = await sup.approve(sid, delivery="checkout")
    assert result.state is S.MERGED and result.already_applied is False
    assert (repo / "hello.txt").read_text() == "hi\n"
    assert not (repo / "extra.txt").exists()
    assert result.note is not None and "(extra.txt, hello.txt)" in result.note
    assert sup.get(sid).session.changed_since_verification == ["extra.txt", "hello.txt"]
    assert (worktree / "extra.txt").exists()  # the later changes are kept


async def test_partial_approval_reads_and_re_verifies_the_verified_tree(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    engine = ScriptedEngine([[Write("a.txt", "a\n"), Write("b.txt", "b\n")]])
    sup = await make_supervisor(
        drafter=ScriptedDrafter([contract(("a", "grep -qx a a.txt"))]), engine=engine
    )
    sid = (await sup.start("a and b", repo)).session_id
    await run_to_gate(sup, sid)
    worktree = Path(sup.get(sid).session.worktree or "")
    (worktree / "a.txt").write_text("zzz\n")  # fails the check if anything reads it

    files = {f.path: f for f in await sup.review_files(sid)}
    assert [ln for h in files["a.txt"].hunks for ln in h.lines] == ["+a\n"]
    result = await sup.approve(sid, selection={"a.txt": None})
    assert result.partial is True and [r.passed for r in result.verification] == [True]
    assert git(repo, "show", f"{result.branch}:a.txt") == "a\n"
    assert "b.txt" not in git(repo, "ls-tree", "--name-only", result.branch or "")
    assert (worktree / "a.txt").read_text() == "zzz\n"


async def test_after_a_restart_the_review_is_of_the_verified_tree(
    state_dir: Path, repo: Path
) -> None:
    first = new_supervisor(state_dir)
    await first.open()
    try:
        sid = (await first.start("say hi", repo)).session_id
        await run_to_gate(first, sid)
        verified = first.get(sid).session.review_tree
        worktree = Path(first.get(sid).session.worktree or "")
    finally:
        await first.close()
    assert verified is not None
    anchor = git(repo, "rev-parse", f"refs/corral/verified/{sid}^{{tree}}").strip()
    assert anchor == verified  # the tree is kept reachable

    second = new_supervisor(state_dir)
    await second.open()
    try:  # unchanged: exactly as verified
        assert row_of(second, sid).needs_you == "merge"
        assert second.get(sid).session.changed_since_verification == []
        texts = [str(getattr(e.data, "text", "")) for e in events_of(second, sid)]
        assert any("the worktree is exactly as verified" in t for t in texts)
    finally:
        await second.close()

    (worktree / "hello.txt").write_text("edited while corral was closed\n")
    third = new_supervisor(state_dir)
    await third.open()
    try:
        row = row_of(third, sid)
        assert row.live is True and row.needs_you == "merge"
        assert row.changed_since_verification is True
        session = third.get(sid).session
        assert session.review_tree == verified
        assert session.changed_since_verification == ["hello.txt"]
        texts = [str(getattr(e.data, "text", "")) for e in events_of(third, sid)]
        assert any("the worktree changed since verification (hello.txt)" in t for t in texts)
        result = await third.approve(sid)
        assert git(repo, "show", f"{result.branch}:hello.txt") == "hi\n"
        assert result.note is not None and "(hello.txt)" in result.note
    finally:
        await third.close()


# --- event numbers across restarts ------------------------------------------------------------


async def test_event_numbers_stay_unique_across_restarts(state_dir: Path, repo: Path) -> None:
    sup = new_supervisor(state_dir)
    await sup.open()
    try:
        sid = (await sup.start("say hi", repo)).session_id
        await run_to_gate(sup, sid)  # ends with state_changed, emitted after the save
    finally:
        await sup.close()
    for _ in range(2):
        sup = new_supervisor(state_dir)
        await sup.open()
        try:
            assert sup.is_live(sid)  # restored: it announces that with a new event
            next_seq = sup.get(sid).next_seq
        finally:
            await sup.close()
    seqs = [event.seq for event in read_journal(sup.journal_path(sid))]
    assert_unique_increasing(seqs)
    assert next_seq == seqs[-1] + 1
