"""The whole session flow through the `Supervisor` facade, on real git repos:
start → contract → confirm → run → verify → approve, plus every gate, cancel,
question, steering and revision path (seed tests groups A, C, D, H)."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from pathlib import Path

import pytest

from corral.supervisor.api import DRAFTING_CANCELLED, NOT_EXPRESSIBLE, Supervisor
from corral.supervisor.contracts.drafting import DraftingError
from corral.supervisor.errors import CorralError
from corral.supervisor.models import CoderEvent, EventKind, SessionSummary
from corral.supervisor.scripted import (
    Ask,
    Nominate,
    Run,
    Say,
    ScriptedDrafter,
    ScriptedEngine,
    Wait,
    Write,
    contract,
)
from corral.supervisor.session.events import read_journal
from corral.supervisor.session.questions import (
    GUIDANCE_SIZE,
    MAX_GUIDANCE_BYTES,
    NO_PENDING_REQUEST,
)
from corral.supervisor.session.summaries import live_summary
from corral.supervisor.states import CoderState, FailureKind, NeedsYou, label
from tests.conftest import (
    HELLO_CHECK,
    SupervisorFactory,
    eventually,
    git,
    hello_contract,
    kinds_of,
)

S = CoderState


def row_of(sup: Supervisor, sid: str) -> SessionSummary:
    return next(r for r in sup.list() if r.session_id == sid)


async def proposed(sup: Supervisor, repo: Path, intent: str = "say hi") -> str:
    result = await sup.start(intent, repo)
    assert result.state is S.CONTRACT_PROPOSED
    return result.session_id


async def run_to_gate(sup: Supervisor, sid: str) -> SessionSummary:
    assert await sup.confirm(sid) == {"state": "running"}
    return await sup.wait_for(sid, needs=True, timeout=10)


def processes_matching(marker: str) -> list[int]:
    """Live (non-zombie) processes whose command line contains `marker`."""
    found: list[int] = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                cmdline = fh.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{pid}/stat") as fh:
                status = fh.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmdline and status != "Z":
            found.append(int(pid))
    return found


# --- start and drafting -----------------------------------------------------------------


async def test_start_proposes_a_contract_with_a_red_and_green_baseline(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    drafter = ScriptedDrafter([contract(HELLO_CHECK, ("readme_free", "test ! -e README"))])
    sup = await make_supervisor(drafter=drafter)
    result = await sup.start("  say hi  ", repo)

    assert result.state is S.CONTRACT_PROPOSED
    assert [(r.name, r.passed) for r in result.baseline] == [
        ("hello", False),
        ("readme_free", True),
    ]
    assert result.baseline_gates_nothing is False
    assert len(drafter.calls) == 1  # a red check: no reassessment
    assert drafter.calls[0].intent == "say hi"
    assert result.requested_engine == "auto" and result.engine == "scripted"
    assert result.engine_ran is None
    assert result.worktree and Path(result.worktree).is_dir()
    head = git(repo, "rev-parse", "HEAD").strip()
    assert git(result.worktree, "rev-parse", "HEAD").strip() == head
    assert result.base is None  # the checkout's current state

    row = row_of(sup, result.session_id)
    assert row.state is S.CONTRACT_PROPOSED
    assert row.needs_you is NeedsYou.CONTRACT
    assert row.needs_you_label == "contract awaiting confirmation"
    assert row.live is True and isinstance(row.next_seq, int)
    assert row.question_prompt is None and row.auth_message is None
    assert row.failure_kind is None
    assert row.worktree == result.worktree

    kinds = kinds_of(sup, result.session_id)
    assert kinds.index(EventKind.ENGINE_SELECTED) < kinds.index(EventKind.CONTRACT_PROPOSED)
    assert kinds.index(EventKind.CONTRACT_PROPOSED) < kinds.index(EventKind.CONTRACT_BASELINE)
    stored = sup.store.load_session(result.session_id)
    assert stored is not None and stored.state is S.CONTRACT_PROPOSED
    assert stored.contract == result.contract
    # the baseline ran in a disposable copy: the task's worktree is untouched
    assert git(result.worktree, "status", "--porcelain").strip() == ""
    assert not any((sup.state_dir / "scratch").glob("*"))


async def test_start_with_a_base_provisions_the_worktree_at_that_commit(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    first = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "commit", "-q", "--allow-empty", "-m", "second")
    sup = await make_supervisor()
    result = await sup.start("say hi", repo, base="HEAD~1")
    assert result.base == first
    assert git(result.worktree, "rev-parse", "HEAD").strip() == first
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD").strip() == "main"


async def test_an_all_green_baseline_gets_exactly_one_reassessment(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    weak = contract(("ok", "true"))
    drafter = ScriptedDrafter([weak], revisions=[contract(("ok", "true"))])
    sup = await make_supervisor(drafter=drafter)
    result = await sup.start("say hi", repo)

    assert len(drafter.calls) == 2  # the draft plus one reassessment
    assert result.baseline_gates_nothing is True
    assert [r.passed for r in result.baseline] == [True]
    assert result.state is S.CONTRACT_PROPOSED
    texts = [e.data.get("text", "") for e in sup.registry.live(result.session_id).log.buffered()]
    assert any("already pass before any edits" in t for t in texts)
    assert any("proves nothing yet" in t for t in texts)
    stored = sup.store.load_session(result.session_id)
    assert stored is not None and stored.baseline_gates_nothing is True
    assert git(repo, "status", "--porcelain").strip() == ""  # the user's tree is untouched


async def test_an_improved_reassessment_replaces_the_weak_contract(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    drafter = ScriptedDrafter([contract(("ok", "true"))], revisions=[hello_contract()])
    sup = await make_supervisor(drafter=drafter)
    result = await sup.start("say hi", repo)
    assert len(drafter.calls) == 2
    assert result.baseline_gates_nothing is False
    assert result.contract is not None
    assert [c.command for c in result.contract.checks] == [HELLO_CHECK[1]]
    assert [r.passed for r in result.baseline] == [False]
    texts = [e.data.get("text", "") for e in sup.registry.live(result.session_id).log.buffered()]
    assert any("now include a failing baseline" in t for t in texts)


async def test_a_drafting_session_is_listable_at_created_and_cancellable(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    gate = asyncio.Event()  # the model never answers
    drafter = ScriptedDrafter([hello_contract()], gate=gate)
    sup = await make_supervisor(drafter=drafter)
    starting = asyncio.create_task(sup.start("say hi", repo))

    rows = await eventually(sup.list)
    [row] = rows
    sid = row.session_id
    assert row.state is S.CREATED
    assert row.live is True
    assert row.needs_you is None
    assert row.worktree and Path(row.worktree).is_dir()

    t0 = time.monotonic()
    cancelled = await sup.cancel(sid)
    assert time.monotonic() - t0 < 5
    assert cancelled.state is S.ABANDONED
    assert cancelled.already_terminal is False
    assert cancelled.recoverable is True
    assert cancelled.worktree == row.worktree
    with pytest.raises(CorralError, match=DRAFTING_CANCELLED):
        await asyncio.wait_for(starting, 5)

    detail = sup.get(sid)
    assert detail.session.state is S.ABANDONED
    assert detail.session.contract is None
    assert Path(row.worktree).is_dir()  # the worktree is retained
    stored = sup.store.load_session(sid)
    assert stored is not None and stored.state is S.ABANDONED
    assert stored.execution_stopped and stored.keep_workspace_on_cancel
    assert EventKind.CONTRACT_PROPOSED not in kinds_of(sup, sid)
    # a later gate action is refused
    with pytest.raises(CorralError, match="cancelled while drafting"):
        await sup.confirm(sid)
    gate.set()
    await asyncio.sleep(0.05)
    assert sup.get(sid).session.state is S.ABANDONED


async def test_start_without_waiting_returns_at_created(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    gate = asyncio.Event()
    sup = await make_supervisor(drafter=ScriptedDrafter([hello_contract()], gate=gate))
    result = await sup.start("say hi", repo, wait=False)
    assert result.state is S.CREATED
    gate.set()
    row = await sup.wait_for(result.session_id, needs=True, timeout=10)
    assert row.state is S.CONTRACT_PROPOSED


async def test_drafting_auth_failure_fails_with_auth_required(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    drafter = ScriptedDrafter([DraftingError("the token expired", auth=True)])
    sup = await make_supervisor(drafter=drafter)
    with pytest.raises(DraftingError, match="token expired"):
        await sup.start("say hi", repo)
    [row] = sup.list()
    assert row.state is S.FAILED
    assert row.failure_kind is FailureKind.AUTH_REQUIRED
    assert row.needs_you is None
    assert row.error is not None and "sign-in" in row.error
    auth_events = [
        e
        for e in sup.registry.live(row.session_id).log.buffered()
        if e.kind is EventKind.AUTH_REQUIRED
    ]
    assert len(auth_events) == 1 and auth_events[0].data["wait_secs"] == 0
    await asyncio.sleep(0)  # journal flush
    rows = read_journal(sup.journal_path(row.session_id), "auth_required")
    assert len(rows) == 1
    stored = sup.store.load_session(row.session_id)
    assert stored is not None and stored.failure_kind is FailureKind.AUTH_REQUIRED


@pytest.mark.parametrize(
    "failure", [DraftingError("503 service unavailable"), RuntimeError("503 service unavailable")]
)
async def test_other_drafting_failures_are_infrastructure(
    make_supervisor: SupervisorFactory, repo: Path, failure: Exception
) -> None:
    sup = await make_supervisor(drafter=ScriptedDrafter([failure]))
    with pytest.raises(CorralError, match="503"):
        await sup.start("say hi", repo)
    [row] = sup.list()
    assert row.state is S.FAILED
    assert row.failure_kind is FailureKind.INFRASTRUCTURE
    assert row.error is not None and "contract derivation failed" in row.error
    assert EventKind.AUTH_REQUIRED not in kinds_of(sup, row.session_id)


async def test_an_invalid_drafted_contract_fails_drafting(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    drafter = ScriptedDrafter([contract(("bad name", "true"))])
    sup = await make_supervisor(drafter=drafter)
    with pytest.raises(DraftingError, match="letters, numbers, or underscores"):
        await sup.start("say hi", repo)
    assert sup.list()[0].failure_kind is FailureKind.INFRASTRUCTURE


@pytest.mark.parametrize(
    "base,message",
    [
        ("-b", "invalid base revision"),
        ("--orphan=x", "invalid base revision"),
        ("no-such", "does not name a commit"),
    ],
)
async def test_a_bad_base_fails_before_provisioning(
    make_supervisor: SupervisorFactory, repo: Path, base: str, message: str
) -> None:
    sup = await make_supervisor()
    with pytest.raises(CorralError, match=message):
        await sup.start("say hi", repo, base=base)
    assert not (sup.state_dir / "worktrees").exists()
    assert sup.list() == []


async def test_a_directory_that_is_not_a_git_repository_is_refused(
    make_supervisor: SupervisorFactory, tmp_path: Path
) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    sup = await make_supervisor()
    with pytest.raises(CorralError, match="is not a git repository"):
        await sup.start("say hi", plain)
    with pytest.raises(CorralError, match="is not a directory"):
        await sup.start("say hi", tmp_path / "missing")
    with pytest.raises(CorralError, match="intent is empty"):
        await sup.start("   ", plain)
    assert sup.list() == []
    assert not (sup.state_dir / "worktrees").exists()


async def test_a_subdirectory_works_on_the_whole_repository(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    (repo / "sub").mkdir()
    sup = await make_supervisor()
    result = await sup.start("say hi", repo / "sub")
    assert sup.get(result.session_id).session.repo == str(repo.resolve())


# --- confirm, run, approve ------------------------------------------------------------


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
    states = [e for e in sup.registry.live(sid).log.buffered() if e.kind is EventKind.STATE_CHANGED]
    assert [e.data["to"] for e in states][-1] == "needs_approval"
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
    stored = sup.store.load_session(sid)
    assert stored is not None and stored.state is S.MERGED
    assert (stored.result_branch, stored.result_commit) == (result.branch, result.commit)
    final = row_of(sup, sid)
    assert final.needs_you is None and final.result_branch == result.branch


async def test_an_edited_worktree_after_review_is_not_delivered(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    sup = await make_supervisor()
    sid = await proposed(sup, repo)
    await run_to_gate(sup, sid)
    worktree = Path(sup.get(sid).session.worktree or "")
    (worktree / "hello.txt").write_text("hi there\n")
    with pytest.raises(CorralError, match="changed after verification"):
        await sup.approve(sid)
    assert sup.get(sid).session.state is S.NEEDS_APPROVAL
    assert git(repo, "branch", "--list", "corral/*").strip() == ""
    (worktree / "hello.txt").write_text("hi\n")
    assert (await sup.approve(sid)).state is S.MERGED


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
    texts = [e.data.get("text", "") for e in sup.registry.live(sid).log.buffered()]
    assert any("handing them back to the engine (repair 1 of 2)" in t for t in texts)
    evaluated = [
        e.data["passed"]
        for e in sup.registry.live(sid).log.buffered()
        if e.kind is EventKind.CONTRACT_EVALUATED
    ]
    assert evaluated == [False, True]


async def test_a_nomination_parks_as_a_finding_and_needs_accept_finding(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    engine = ScriptedEngine([[Say("looking"), Nominate("the greeting already exists", "see x")]])
    sup = await make_supervisor(engine=engine)
    sid = await proposed(sup, repo)
    row = await run_to_gate(sup, sid)

    assert row.state is S.NEEDS_APPROVAL
    assert row.needs_you is NeedsYou.FINDING
    assert row.needs_you_label == "finding ready for review"
    finding = sup.get(sid).session.no_change_finding
    assert finding is not None
    assert finding.summary == "the greeting already exists"
    assert finding.verification is None
    assert [r.name for r in finding.baseline_checks] == ["hello"]
    assert sup.get(sid).session.authored_by == ["scripted"]

    with pytest.raises(CorralError, match="accept_finding"):
        await sup.approve(sid)
    assert sup.get(sid).session.state is S.NEEDS_APPROVAL

    result = await sup.approve(sid, accept_finding=True, comment="fine")
    assert result.state is S.REPORTED
    assert result.branch is None
    finding = sup.get(sid).session.no_change_finding
    assert finding is not None
    assert finding.verification == "human_approved"
    assert finding.resolved_at is not None and finding.resolver_comment == "fine"
    resolved = [
        e for e in sup.registry.live(sid).log.buffered() if e.kind is EventKind.FINDING_RESOLVED
    ]
    assert [e.data["accepted"] for e in resolved] == [True]
    assert git(repo, "branch", "--list", "corral/*").strip() == ""


async def test_a_nomination_after_an_edit_fails(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    engine = ScriptedEngine([[Write("hello.txt", "hi\n"), Nominate("nothing to do")]])
    sup = await make_supervisor(engine=engine)
    sid = await proposed(sup, repo)
    row = await run_to_gate(sup, sid)
    assert row.state is S.FAILED
    assert row.failure_kind is FailureKind.ERROR
    assert row.error is not None and "already made a successful edit" in row.error
    assert sup.get(sid).session.no_change_finding is None
    assert EventKind.FINDING_PROPOSED not in kinds_of(sup, sid)


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


# --- acting past a gate ---------------------------------------------------------------


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
        assert str(info.value) == f"{name} was already merged — nothing left to {action}"

    cancelled = await sup.cancel(sid)
    assert cancelled.state is S.MERGED
    assert cancelled.already_terminal is True
    assert cancelled.message == f"{name} was already merged — nothing left to cancel"
    assert sup.get(sid).session.state is S.MERGED


async def test_unknown_session_ids_are_named(make_supervisor: SupervisorFactory) -> None:
    sup = await make_supervisor()
    for call in (
        sup.confirm("nope"),
        sup.approve("nope"),
        sup.cancel("nope"),
        sup.revise("nope", "x"),
        sup.respond("nope", "x"),
    ):
        with pytest.raises(CorralError, match="'nope'"):
            await call
    with pytest.raises(CorralError, match="'nope'"):
        sup.get("nope")
    with pytest.raises(CorralError, match="'nope'"):
        sup.subscribe("nope")


# --- cancel -------------------------------------------------------------------------


async def test_cancel_mid_run_stops_a_long_shell_step(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    marker = f"20.{uuid.uuid4().int % 10**8:08d}"  # a unique duration to find the process
    engine = ScriptedEngine([[Say("sleeping"), Run(f"sleep {marker}"), Write("hello.txt", "hi")]])
    sup = await make_supervisor(engine=engine)
    sid = await proposed(sup, repo)
    await sup.confirm(sid)
    await eventually(lambda: processes_matching(f"sleep {marker}"))

    t0 = time.monotonic()
    result = await sup.cancel(sid)
    elapsed = time.monotonic() - t0
    assert elapsed < 5
    assert result.state is S.ABANDONED
    assert result.already_terminal is False
    assert result.recoverable is True
    assert result.worktree is not None and Path(result.worktree).is_dir()
    assert processes_matching(f"sleep {marker}") == []
    session = sup.get(sid).session
    assert session.state is S.ABANDONED
    assert session.keep_workspace_on_cancel and session.execution_stopped
    assert not sup.registry.live(sid).task_running
    assert not (Path(result.worktree) / "hello.txt").exists()
    assert row_of(sup, sid).steering_available is False


class TaskRecordingEngine(ScriptedEngine):
    """A scripted engine that remembers the task each round ran on."""

    def __init__(self, rounds) -> None:
        super().__init__(rounds)
        self.tasks: list[asyncio.Task] = []

    async def run(self, ctx):
        task = asyncio.current_task()
        assert task is not None
        self.tasks.append(task)
        return await super().run(ctx)


async def test_cancel_unblocks_a_parked_question(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    engine = TaskRecordingEngine([[Ask("Which greeting?")]])
    sup = await make_supervisor(engine=engine)
    sid = await proposed(sup, repo)
    row = await run_to_gate(sup, sid)
    assert row.needs_you is NeedsYou.QUESTION

    t0 = time.monotonic()
    result = await sup.cancel(sid)
    assert time.monotonic() - t0 < 5
    assert result.state is S.ABANDONED
    row = row_of(sup, sid)
    assert row.needs_you is None and row.question_prompt is None
    with pytest.raises(CorralError, match=NO_PENDING_REQUEST):
        await sup.respond(sid, "too late")
    # the engine ends cancelled, not with an error nobody retrieves (which asyncio
    # would log as "Task exception was never retrieved")
    [task] = engine.tasks
    await asyncio.wait_for(asyncio.wait([task]), 1)
    assert task.cancelled()


async def test_cancel_at_the_contract_gate_abandons(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    sup = await make_supervisor()
    sid = await proposed(sup, repo)
    result = await sup.cancel(sid)
    assert (result.state, result.already_terminal, result.recoverable) == (
        S.ABANDONED,
        False,
        True,
    )
    with pytest.raises(CorralError, match="cancelled while drafting"):
        await sup.confirm(sid)


# --- questions ------------------------------------------------------------------------


async def test_an_ask_user_round_trip_through_respond(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    engine = ScriptedEngine([[Ask("What greeting?", ["hi", "hello"], write_answer_to="hello.txt")]])
    sup = await make_supervisor(engine=engine)
    sid = await proposed(sup, repo)
    row = await run_to_gate(sup, sid)

    assert row.state is S.RUNNING
    assert row.needs_you is NeedsYou.QUESTION
    assert row.needs_you_label == "question waiting for your answer"
    assert row.question_prompt == "What greeting?"
    assert row.steering_available is False
    assert sup.question_options(sid) == ["hi", "hello"]
    requested = [
        e for e in sup.registry.live(sid).log.buffered() if e.kind is EventKind.USER_INPUT_REQUESTED
    ]
    assert [e.data["prompt"] for e in requested] == ["What greeting?"]
    with pytest.raises(CorralError, match="Answer the task's pending question first"):
        await sup.respond(sid, "keep it short", steer=True)

    assert await sup.respond(sid, "hi") == {"ok": True}
    row = await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=10)
    assert row.state is S.NEEDS_APPROVAL
    assert row.question_prompt is None
    worktree = Path(sup.get(sid).session.worktree or "")
    assert (worktree / "hello.txt").read_text() == "hi"  # the answer reached the engine
    texts = [e.data.get("text") for e in sup.registry.live(sid).log.buffered()]
    assert "Operator answered: hi" in texts


async def test_respond_without_a_question_errors(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    sup = await make_supervisor()
    sid = await proposed(sup, repo)
    with pytest.raises(CorralError) as info:
        await sup.respond(sid, "hello?")
    assert NO_PENDING_REQUEST in str(info.value)


async def test_an_expired_question_clears_the_gate_before_the_expired_event(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    sup = await make_supervisor(
        engine=ScriptedEngine([[Ask("Anyone there?")]]), ask_user_timeout_secs=0.2
    )
    sid = await proposed(sup, repo)
    _, watcher = sup.watch()
    pushed: list[SessionSummary] = []

    async def collect() -> None:
        while True:
            pushed.extend(r for r in await watcher.get() if r.session_id == sid)

    collector = asyncio.create_task(collect())
    # what a board would build at the instant each event is appended
    entry = sup.registry.live(sid)
    at_event: list[tuple[CoderEvent, SessionSummary]] = []
    observe = entry.log.observer
    assert observe is not None

    def spy(event: CoderEvent) -> None:
        observe(event)
        at_event.append((event, live_summary(entry)))

    entry.log.observer = spy
    try:
        await sup.confirm(sid)
        row = await sup.wait_for(sid, {S.FAILED, S.NEEDS_APPROVAL, S.ABANDONED}, timeout=10)
        await asyncio.sleep(0.05)
    finally:
        collector.cancel()

    assert row.state is S.FAILED
    assert row.error is not None and "no user response within" in row.error
    [(expired, summary)] = [(e, s) for e, s in at_event if e.kind is EventKind.USER_INPUT_EXPIRED]
    assert expired.data["prompt"] == "Anyone there?"
    assert summary.state is S.RUNNING
    assert summary.needs_you is None and summary.question_prompt is None
    asked = [s for e, s in at_event if e.kind is EventKind.USER_INPUT_REQUESTED]
    assert asked[0].needs_you is NeedsYou.QUESTION  # armed before the request event

    questions = [i for i, r in enumerate(pushed) if r.needs_you is NeedsYou.QUESTION]
    assert questions, "the question was pushed to the board"
    after = pushed[questions[-1] + 1 :]
    assert after and all(r.needs_you is None and r.question_prompt is None for r in after)


# --- steering -------------------------------------------------------------------------


async def test_steering_is_queued_while_running_and_refused_otherwise(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    release = asyncio.Event()
    engine = ScriptedEngine([[Wait(release), Write("hello.txt", "hi\n")]])
    sup = await make_supervisor(engine=engine)
    sid = await proposed(sup, repo)
    name = label(sid)

    with pytest.raises(CorralError) as info:
        await sup.respond(sid, "Keep the public API", steer=True)
    assert str(info.value) == f"{name} is not accepting steering right now"

    await sup.confirm(sid)
    await eventually(lambda: row_of(sup, sid).steering_available)
    reply = await sup.respond(sid, "  Keep the public API  ", steer=True)
    assert reply == {"ok": True, "queued": True}
    assert sup.get(sid).session.steering_messages == ["Keep the public API"]
    stored = sup.store.load_session(sid)
    assert stored is not None and stored.steering_messages == ["Keep the public API"]
    guidance = [
        e for e in sup.registry.live(sid).log.buffered() if e.kind is EventKind.OPERATOR_GUIDANCE
    ]
    assert [(e.data["text"], e.data["status"]) for e in guidance] == [
        ("Keep the public API", "queued")
    ]

    release.set()
    row = await sup.wait_for(sid, needs=True, timeout=10)
    assert row.state is S.NEEDS_APPROVAL
    texts = [e.data.get("text") for e in sup.registry.live(sid).log.buffered()]
    assert "Taking guidance: Keep the public API" in texts
    assert "Operator guidance:\n- Keep the public API" in sup.get(sid).session.execution_intent()

    with pytest.raises(CorralError, match="not accepting steering"):
        await sup.respond(sid, "one more thing", steer=True)


async def test_guidance_size_is_bounded(make_supervisor: SupervisorFactory, repo: Path) -> None:
    release = asyncio.Event()
    sup = await make_supervisor(engine=ScriptedEngine([[Wait(release)]]))
    sid = await proposed(sup, repo)
    await sup.confirm(sid)
    await eventually(lambda: row_of(sup, sid).steering_available)
    for bad in ("x" * (MAX_GUIDANCE_BYTES + 1), "é" * (MAX_GUIDANCE_BYTES // 2 + 1), "   "):
        with pytest.raises(CorralError) as info:
            await sup.respond(sid, bad, steer=True)
        assert str(info.value) == GUIDANCE_SIZE
    assert sup.get(sid).session.steering_messages == []
    ok = "x" * MAX_GUIDANCE_BYTES
    assert (await sup.respond(sid, ok, steer=True))["queued"] is True
    release.set()


# --- revision -------------------------------------------------------------------------


async def test_a_check_edit_is_applied_verbatim_without_the_drafter(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    drafter = ScriptedDrafter([hello_contract()])
    sup = await make_supervisor(drafter=drafter)
    sid = await proposed(sup, repo)
    calls = len(drafter.calls)
    seq_before = sup.registry.live(sid).log.next_seq

    command = "test \"$(cat hello.txt)\" =  'hi'"
    result = await sup.revise(sid, f"/check hello {command}")
    assert result.revised is True and result.message is None
    assert result.state is S.CONTRACT_PROPOSED
    assert result.contract is not None
    assert [(c.name, c.command) for c in result.contract.checks] == [("hello", command)]
    assert [r.passed for r in result.baseline] == [False]
    assert len(drafter.calls) == calls  # the model was never asked

    # a new name is appended
    result = await sup.revise(sid, "/check readme test ! -e README")
    assert result.contract is not None
    assert [c.name for c in result.contract.checks] == ["hello", "readme"]
    assert [r.passed for r in result.baseline] == [False, True]
    session = sup.get(sid).session
    assert session.contract == result.contract
    assert any("Verification request accepted" in m for m in session.steering_messages)
    new = [e for e in sup.registry.live(sid).log.buffered() if e.seq >= seq_before]
    proposals = [e for e in new if e.kind is EventKind.CONTRACT_PROPOSED]
    assert [e.data["revised"] for e in proposals] == [True, True]
    stored = sup.store.load_session(sid)
    assert stored is not None and stored.contract == result.contract

    with pytest.raises(CorralError, match="letters, numbers, or underscores"):
        await sup.revise(sid, "/check bad-name x")
    with pytest.raises(CorralError, match="/check name command"):
        await sup.revise(sid, "/check")
    assert sup.get(sid).session.contract == result.contract

    # the revised contract is what runs
    row = await run_to_gate(sup, sid)
    assert row.state is S.NEEDS_APPROVAL


async def test_an_equivalent_redraft_is_a_soft_rejection(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    drafter = ScriptedDrafter([hello_contract()], revisions=[hello_contract()])
    sup = await make_supervisor(drafter=drafter)
    sid = await proposed(sup, repo)
    before = sup.get(sid).session.model_copy(deep=True)

    result = await sup.revise(sid, "make it more robust somehow")
    assert result.revised is False
    assert result.message == NOT_EXPRESSIBLE
    assert result.state is S.CONTRACT_PROPOSED
    assert result.contract == before.contract
    assert result.baseline == before.baseline
    after = sup.get(sid).session
    assert after.contract == before.contract and after.baseline == before.baseline
    assert after.steering_messages == before.steering_messages
    rejected = [
        e
        for e in sup.registry.live(sid).log.buffered()
        if e.kind is EventKind.CONTRACT_REVISION_REJECTED
    ]
    assert [e.data["request"] for e in rejected] == ["make it more robust somehow"]
    assert row_of(sup, sid).needs_you is NeedsYou.CONTRACT


async def test_a_model_redraft_is_applied(make_supervisor: SupervisorFactory, repo: Path) -> None:
    stricter = contract(HELLO_CHECK, ("exact", "printf 'hi\\n' | cmp - hello.txt"))
    drafter = ScriptedDrafter([hello_contract()], revisions=[stricter])
    sup = await make_supervisor(drafter=drafter)
    sid = await proposed(sup, repo)
    result = await sup.revise(sid, "compare the bytes exactly")
    assert result.revised is True
    assert result.contract is not None and [c.name for c in result.contract.checks] == [
        "hello",
        "exact",
    ]
    assert drafter.calls[-1].request == "compare the bytes exactly"  # type: ignore[attr-defined]
    assert (await run_to_gate(sup, sid)).state is S.NEEDS_APPROVAL


async def test_a_redraft_auth_failure_is_rejected_before_asking_for_sign_in(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    drafter = ScriptedDrafter(
        [hello_contract()], revisions=[DraftingError("token expired", auth=True)]
    )
    sup = await make_supervisor(drafter=drafter)
    sid = await proposed(sup, repo)
    result = await sup.revise(sid, "stricter please")
    assert result.revised is False and result.message and "sign-in" in result.message
    kinds = kinds_of(sup, sid)
    assert kinds[-2:] == [EventKind.CONTRACT_REVISION_REJECTED, EventKind.AUTH_REQUIRED]
    row = row_of(sup, sid)
    assert row.needs_you is NeedsYou.AUTH
    assert row.state is S.CONTRACT_PROPOSED


async def test_confirm_with_an_edited_contract_reruns_the_baseline(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    sup = await make_supervisor()
    sid = await proposed(sup, repo)
    edited = contract(("hello", "test -s hello.txt"))
    assert await sup.confirm(sid, edited) == {"state": "running"}
    row = await sup.wait_for(sid, needs=True, timeout=10)
    assert row.state is S.NEEDS_APPROVAL
    session = sup.get(sid).session
    assert session.contract == edited
    assert [r.passed for r in session.baseline] == [False]
    with pytest.raises(CorralError, match="edited contract is invalid"):
        await sup.confirm(sid, contract(("x", "  ")))


# --- subscribe ---------------------------------------------------------------------------


async def test_subscribe_replays_the_history_then_streams_live(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    release = asyncio.Event()
    sup = await make_supervisor(engine=ScriptedEngine([[Wait(release), Write("hello.txt", "hi")]]))
    sid = await proposed(sup, repo)
    result, sub = sup.subscribe(sid, 0)
    assert sub is not None
    assert (result.state, result.live, result.replay_available) == (S.CONTRACT_PROPOSED, True, True)
    assert result.events_skipped == 0
    assert result.events_replayed == sup.get(sid).next_seq
    history = sub.get_nowait()
    assert [e.seq for e in history] == list(range(result.events_replayed))
    assert history[0].kind is EventKind.ENGINE_SELECTED

    await sup.confirm(sid)
    release.set()
    seen: list[CoderEvent] = []
    async with asyncio.timeout(10):
        async for event in sub:
            seen.append(event)
            if event.kind is EventKind.STATE_CHANGED and event.data["to"] == "needs_approval":
                break
    assert [e.seq for e in seen] == list(range(history[-1].seq + 1, seen[-1].seq + 1))
    assert EventKind.DIFF_READY in [e.kind for e in seen]
    sup.unsubscribe(sub)
    assert sup.registry.live(sid).log.subscriber_count == 0

    # a cursor from the middle resumes exactly there
    result, again = sup.subscribe(sid, 3)
    assert again is not None and again.get_nowait()[0].seq == 3
    assert result.events_replayed == sup.get(sid).next_seq - 3
