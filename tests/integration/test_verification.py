"""Runtime verification through the `Supervisor` facade: the runtime re-runs
every check itself, hands failing checks back for repair rounds, fails a red
contract once the budget is spent, calls a green run that changed nothing a
finding, and delivers only the tree it verified."""

from __future__ import annotations

from pathlib import Path

import pytest

from corral.supervisor.errors import CorralError
from corral.supervisor.models import EventKind
from corral.supervisor.states import CoderState, FailureKind, NeedsYou, label
from tests.conftest import (
    SupervisorFactory,
    events_of,
    eventually,
    git,
    plan_texts,
    proposed,
    row_of,
    run_to_gate,
)
from tests.fakes.scripted import (
    Say,
    ScriptedDrafter,
    ScriptedEngine,
    Write,
    contract,
)

S = CoderState


# --- the runtime's verdict -----------------------------------------------------------------


async def test_a_repair_round_gets_the_failing_checks(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    engine = ScriptedEngine(
        [[Say("first try, wrong file"), Write("other.txt", "hi\n")], [Write("hello.txt", "hi\n")]]
    )
    sup = await make_supervisor(engine=engine, repair_invokes=2)
    sid = await proposed(sup, repo)
    row = await run_to_gate(sup, sid)

    assert row.state is S.NEEDS_APPROVAL
    assert [c.round for c in engine.contexts] == [1, 2]
    assert engine.contexts[0].failing_checks == []
    failing = engine.contexts[1].failing_checks
    assert [(r.name, r.passed) for r in failing] == [("hello", False)]
    texts = plan_texts(sup, sid)
    assert any("handing them back to the engine (repair 1 of 2)" in t for t in texts)
    evaluated = [e.data.passed for e in sup.replay(sid) if e.kind is EventKind.CONTRACT_EVALUATED]
    assert evaluated == [False, True]


async def test_a_red_contract_fails_after_the_repair_budget(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    engine = ScriptedEngine([[Say("I did nothing useful")]])
    sup = await make_supervisor(engine=engine, repair_invokes=1)
    sid = await proposed(sup, repo)
    row = await run_to_gate(sup, sid)

    assert row.state is S.FAILED
    assert row.failure_kind is FailureKind.ERROR
    assert row.error is not None and "not satisfied" in row.error and "hello" in row.error
    assert row.needs_you is None
    assert len(engine.contexts) == 2  # the first run plus one repair round
    # the repair prompt states the budget truly: the one repair, and none after it
    from corral.supervisor.engines.external import repair_prompt

    repair = engine.contexts[1]
    assert (repair.round, repair.rounds, repair.rounds_left) == (2, 2, 0)
    assert "repair round 1; 0 left after this one" in repair_prompt(
        repair.failing_checks, repair.round, repair.rounds_left
    )
    detail = sup.get(sid)
    assert [r.passed for r in detail.session.last_check_results] == [False]

    name = label(sid)
    with pytest.raises(CorralError) as info:
        await sup.approve(sid)
    assert str(info.value) == f"{name} already finished (state: failed) — nothing to approve"

    cancelled = await sup.cancel(sid)
    assert cancelled.state is S.FAILED
    assert cancelled.already_terminal is True
    assert cancelled.message == f"{name} already finished (state: failed) — nothing to cancel"
    assert sup.get(sid).session.state is S.FAILED


async def test_a_green_run_that_changed_nothing_is_a_runtime_finding(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    drafter = ScriptedDrafter([contract(("ok", "true"))])
    engine = ScriptedEngine([[Say("nothing to change")]])
    sup = await make_supervisor(drafter=drafter, engine=engine)
    sid = await proposed(sup, repo)
    row = await run_to_gate(sup, sid)

    assert row.state is S.NEEDS_APPROVAL
    assert row.needs_you is NeedsYou.FINDING
    finding = sup.get(sid).session.no_change_finding
    assert finding is not None and "no report_no_change" in finding.evidence
    assert sup.get(sid).session.diff is None
    assert (await sup.approve(sid, accept_finding=True)).state is S.REPORTED


# --- only the verified tree ----------------------------------------------------------------


async def test_an_edited_worktree_after_review_is_not_delivered(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    """Approve delivers the verified tree, says which paths changed since, and
    keeps the worktree (with those changes) instead of removing it."""
    sup = await make_supervisor(verified_watch_secs=0.05)
    sid = await proposed(sup, repo)
    await run_to_gate(sup, sid)
    worktree = Path(sup.get(sid).session.worktree or "")
    (worktree / "hello.txt").write_text("hi there\n")
    await eventually(lambda: sup.get(sid).session.changed_since_verification == ["hello.txt"])
    assert row_of(sup, sid).changed_since_verification is True
    changed = [e for e in events_of(sup, sid) if e.kind is EventKind.WORKTREE_CHANGED]
    assert changed[-1].data.model_dump(exclude_none=True) == {
        "phase": "since_verification",
        "files": ["hello.txt"],
    }
    files = await sup.review_files(sid)  # the verified change, not the live one
    assert [ln for f in files for h in f.hunks for ln in h.lines] == ["+hi\n"]

    result = await sup.approve(sid)
    assert result.state is S.MERGED
    assert git(repo, "show", f"{result.branch}:hello.txt") == "hi\n"
    assert "Corral-Check: hello pass" in git(repo, "log", "-1", "--format=%B", result.branch or "")
    assert result.note is not None
    assert result.note.startswith(f"the worktree of {label(sid)} changed after verification")
    assert "(hello.txt)" in result.note and "verified tree you reviewed" in result.note
    assert (worktree / "hello.txt").read_text() == "hi there\n"  # kept, not delivered
    assert sup.get(sid).session.changed_since_verification == ["hello.txt"]
