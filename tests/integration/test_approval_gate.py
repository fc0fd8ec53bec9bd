"""Gate 2 through the `Supervisor` facade: approve and deliver a branch,
reject a diff, accept, deny or cancel a finding, refuse impossible
deliveries, and the sentence for acting past a gate."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from corral.supervisor.errors import CorralError
from corral.supervisor.models import EventKind
from corral.supervisor.states import CoderState, NeedsYou, label
from tests.conftest import (
    SupervisorFactory,
    git,
    kinds_of,
    proposed,
    row_of,
    run_to_gate,
    stored_session,
)
from tests.fakes.scripted import (
    Nominate,
    Say,
    ScriptedEngine,
    Wait,
    Write,
)

S = CoderState


# --- approve and reject --------------------------------------------------------------------


async def test_confirm_run_approve_delivers_a_branch(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    engine = ScriptedEngine([[Say("writing"), Write("hello.txt", "hi\n")]])
    sup = await make_supervisor(engine=engine)
    sid = await proposed(sup, repo, "say hi\n\nin hello.txt")
    row = await run_to_gate(sup, sid)

    assert row.state is S.NEEDS_APPROVAL
    assert row.needs_you is NeedsYou.MERGE
    assert row.needs_you_label == "diff ready for approval"
    detail = sup.get(sid)
    diff = detail.session.diff
    assert diff is not None and "hello.txt" in diff.stat and "+hi" in diff.patch
    assert [(f.path, f.change, f.added) for f in diff.files] == [("hello.txt", "added", 1)]
    assert [r.passed for r in detail.session.last_check_results] == [True]
    assert detail.session.iterations >= 1
    assert detail.session.engine_ran == "scripted"
    assert detail.session.authored_by == ["scripted"]
    kinds = kinds_of(sup, sid)
    for kind in (EventKind.TOOL_CALL, EventKind.CHECK_COMPLETED, EventKind.CONTRACT_EVALUATED):
        assert kind in kinds
    # DiffReady comes before the transition to needs_approval
    states = [e for e in sup.replay(sid) if e.kind is EventKind.STATE_CHANGED]
    assert [e.data.to for e in states if e.kind is EventKind.STATE_CHANGED][-1] == "needs_approval"
    assert kinds.index(EventKind.DIFF_READY) < max(
        i for i, k in enumerate(kinds) if k is EventKind.STATE_CHANGED
    )
    # accept_finding on a diff is refused
    with pytest.raises(CorralError, match="has a diff waiting, not a no-change finding"):
        await sup.approve(sid, accept_finding=True)

    result = await sup.approve(sid)
    short = sid[-8:]
    assert result.state is S.MERGED
    assert result.branch == f"corral/{short}"
    assert result.delivery == "branch"
    assert git(repo, "rev-parse", result.branch).strip() == result.commit
    assert git(repo, "show", f"{result.branch}:hello.txt") == "hi\n"
    message = git(repo, "log", "-1", "--format=%B", result.branch)
    assert message.startswith("say hi\n")
    assert "PASS hello: grep -q hi hello.txt" in message
    assert f"Corral-Session: {sid}" in message
    parent = git(repo, "rev-parse", f"{result.branch}~1").strip()
    assert parent == git(repo, "rev-parse", "main").strip()
    # the operator's checkout is untouched and the worktree is released
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD").strip() == "main"
    assert not (repo / "hello.txt").exists()
    assert git(repo, "status", "--porcelain").strip() == ""
    assert not Path(detail.session.worktree or "").exists()
    stored = stored_session(sup.state_dir, sid)
    assert stored is not None and stored.state is S.MERGED
    assert (stored.result_branch, stored.result_commit) == (result.branch, result.commit)
    final = row_of(sup, sid)
    assert final.needs_you is None and final.result_branch == result.branch


async def test_rejecting_a_diff_abandons_and_keeps_the_worktree(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    sup = await make_supervisor()
    sid = await proposed(sup, repo)
    await run_to_gate(sup, sid)
    result = await sup.approve(sid, approve=False, comment="not like this")
    assert result.state is S.ABANDONED
    session = sup.get(sid).session
    assert session.keep_workspace_on_cancel is True
    assert (Path(session.worktree or "") / "hello.txt").read_text() == "hi\n"
    assert git(repo, "branch", "--list", "corral/*").strip() == ""
    assert row_of(sup, sid).needs_you is None
    with pytest.raises(CorralError, match="already finished \\(state: abandoned\\)"):
        await sup.approve(sid)


async def test_checkout_delivery_and_unknown_destinations_are_refused(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    sup = await make_supervisor()
    git(
        repo,
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@t",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "second",
    )
    result = await sup.start("say hi", repo, base="HEAD~1")  # based elsewhere
    sid = result.session_id
    await run_to_gate(sup, sid)
    with pytest.raises(CorralError, match='unknown delivery destination "main"'):
        await sup.approve(sid, delivery="main")
    with pytest.raises(CorralError, match="Publish a branch instead"):
        await sup.approve(sid, delivery="checkout")
    assert sup.get(sid).session.state is S.NEEDS_APPROVAL


# --- findings ------------------------------------------------------------------------------


async def test_denying_a_finding_abandons_and_resolves_it(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    sup = await make_supervisor(engine=ScriptedEngine([[Nominate("nothing to do")]]))
    sid = await proposed(sup, repo)
    await run_to_gate(sup, sid)
    result = await sup.approve(sid, approve=False)
    assert result.state is S.ABANDONED
    finding = sup.get(sid).session.no_change_finding
    assert finding is not None and finding.resolved_at is not None
    assert finding.verification is None
    assert finding.resolver_comment == "rejected at the approval gate"


async def test_cancelling_at_the_finding_gate_resolves_the_finding(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    sup = await make_supervisor(engine=ScriptedEngine([[Nominate("nothing to do")]]))
    sid = await proposed(sup, repo)
    await run_to_gate(sup, sid)
    result = await sup.cancel(sid)
    assert result.state is S.ABANDONED and result.already_terminal is False
    finding = sup.get(sid).session.no_change_finding
    assert finding is not None and finding.resolved_at is not None
    assert finding.verification is None


# --- acting past a gate --------------------------------------------------------------------


async def test_acting_past_a_gate_says_what_already_happened(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    release = asyncio.Event()
    engine = ScriptedEngine([[Wait(release), Write("hello.txt", "hi\n")]])
    sup = await make_supervisor(engine=engine)
    sid = await proposed(sup, repo)
    name = label(sid)

    with pytest.raises(CorralError) as info:
        await sup.approve(sid)
    assert str(info.value) == (
        f"{name} is not ready to approve yet (state: contract_proposed, expected needs_approval)"
    )

    await sup.confirm(sid)
    with pytest.raises(CorralError) as info:
        await sup.confirm(sid)
    assert str(info.value) == f"contract already confirmed for {name} (state: running)"
    with pytest.raises(CorralError) as info:
        await sup.revise(sid, "also check the README")
    assert str(info.value) == f"contract already confirmed for {name} (state: running)"

    release.set()
    await sup.wait_for(sid, needs=True, timeout=10)
    with pytest.raises(CorralError) as info:
        await sup.confirm(sid)
    assert str(info.value) == f"contract already confirmed for {name} (state: needs_approval)"

    assert (await sup.approve(sid)).state is S.MERGED
    for action, call in (
        ("approve", sup.approve(sid)),
        ("revise", sup.revise(sid, "one more check")),
        ("confirm", sup.confirm(sid)),
    ):
        with pytest.raises(CorralError) as info:
            await call
        assert str(info.value) == f"{name} was already delivered — nothing left to {action}"

    cancelled = await sup.cancel(sid)
    assert cancelled.state is S.MERGED
    assert cancelled.already_terminal is True
    assert cancelled.message == f"{name} was already delivered — nothing left to cancel"
    assert sup.get(sid).session.state is S.MERGED
