"""The run loop through the `Supervisor` facade: an engine's no-change
nomination, questions (answered, unanswered, withdrawn), operator steering,
and cancel while the engine works."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from pathlib import Path

import pytest

from corral.supervisor.errors import CorralError
from corral.supervisor.models import EventKind, SessionSummary
from corral.supervisor.session.questions import (
    GUIDANCE_LIMIT,
    GUIDANCE_SIZE,
    MAX_GUIDANCE_BYTES,
    MAX_GUIDANCE_MESSAGES,
    NO_PENDING_REQUEST,
)
from corral.supervisor.states import CoderState, FailureKind, NeedsYou, label
from tests.conftest import (
    SupervisorFactory,
    events_of,
    eventually,
    git,
    kinds_of,
    plan_texts,
    proposed,
    row_of,
    run_to_gate,
    stored_session,
)
from tests.fakes.scripted import (
    Ask,
    Nominate,
    Run,
    Say,
    ScriptedEngine,
    Wait,
    Write,
)
from tests.integration.conftest import OwnerFactory

S = CoderState


# --- nominations ---------------------------------------------------------------------------


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
    resolved = [e.data.accepted for e in sup.replay(sid) if e.kind is EventKind.FINDING_RESOLVED]
    assert resolved == [True]
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


# --- questions -----------------------------------------------------------------------------


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
    requested = [e.data.prompt for e in sup.replay(sid) if e.kind is EventKind.USER_INPUT_REQUESTED]
    assert requested == ["What greeting?"]
    with pytest.raises(CorralError, match="Answer the task's pending question first"):
        await sup.respond(sid, "keep it short", steer=True)

    assert await sup.respond(sid, "hi") == {"ok": True}
    row = await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=10)
    assert row.state is S.NEEDS_APPROVAL
    assert row.question_prompt is None
    worktree = Path(sup.get(sid).session.worktree or "")
    assert (worktree / "hello.txt").read_text() == "hi"  # the answer reached the engine
    assert "Operator answered: hi" in plan_texts(sup, sid)


async def test_respond_without_a_question_errors(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    sup = await make_supervisor()
    sid = await proposed(sup, repo)
    with pytest.raises(CorralError) as info:
        await sup.respond(sid, "hello?")
    assert NO_PENDING_REQUEST in str(info.value)


async def test_an_unanswered_question_stays_needs_you_and_is_said_again(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    """A question unanswered is still a question: past `ask_user_timeout_secs`
    the row keeps needs-you (board, status, Tab all read it), the wait is
    recorded as a reminder, and a late answer still reaches the agent."""
    sup = await make_supervisor(
        engine=ScriptedEngine([[Ask("Anyone there?", write_answer_to="hello.txt")]]),
        ask_user_timeout_secs=0.2,
    )
    sid = await proposed(sup, repo)
    _, watcher = sup.watch()
    pushed: list[SessionSummary] = []

    async def collect() -> None:
        while True:
            pushed.extend(r for r in await watcher.get() if r.session_id == sid)

    collector = asyncio.create_task(collect())
    try:
        await sup.confirm(sid)
        # three windows pass with nobody answering
        await eventually(lambda: row_of(sup, sid).question_reminders >= 3, timeout=10)
        row = row_of(sup, sid)
        assert row.state is S.RUNNING
        assert row.needs_you is NeedsYou.QUESTION
        assert row.question_prompt == "Anyone there?"
        reminders = [e.data for e in events_of(sup, sid) if e.kind is EventKind.USER_INPUT_EXPIRED]
        assert reminders and all(r.still_waiting for r in reminders)
        asked = [i for i, r in enumerate(pushed) if r.needs_you is NeedsYou.QUESTION]
        assert asked, "the question was pushed to the board"
        assert all(r.needs_you is NeedsYou.QUESTION for r in pushed[asked[0] :])
        assert {r.question_reminders for r in pushed} >= {1, 2}  # each reminder is a new row

        assert await sup.respond(sid, "hi") == {"ok": True}
        row = await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=10)
    finally:
        collector.cancel()
    assert row.state is S.NEEDS_APPROVAL
    assert row.needs_you is NeedsYou.MERGE and row.question_reminders == 0
    worktree = Path(sup.get(sid).session.worktree or "")
    assert (worktree / "hello.txt").read_text() == "hi"  # a late answer still lands


# --- steering ------------------------------------------------------------------------------


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
    stored = stored_session(sup.state_dir, sid)
    assert stored is not None and stored.steering_messages == ["Keep the public API"]
    guidance = [e.data for e in sup.replay(sid) if e.kind is EventKind.OPERATOR_GUIDANCE]
    assert [(g.text, g.status) for g in guidance] == [("Keep the public API", "queued")]

    release.set()
    row = await sup.wait_for(sid, needs=True, timeout=10)
    assert row.state is S.NEEDS_APPROVAL
    assert "Taking guidance: Keep the public API" in plan_texts(sup, sid)
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


async def test_guidance_is_stored_before_it_is_queued_and_capped_at_64_messages(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    """Each message is on disk before it is queued (a restart keeps what the
    operator said), and the 65th of a session is refused with the sentence."""
    release = asyncio.Event()
    sup = await make_supervisor(engine=ScriptedEngine([[Wait(release)]]))
    sid = await proposed(sup, repo)
    await sup.confirm(sid)
    await eventually(lambda: row_of(sup, sid).steering_available)
    for n in range(MAX_GUIDANCE_MESSAGES):
        assert (await sup.respond(sid, f"note {n}", steer=True))["queued"] is True
        stored = stored_session(sup.state_dir, sid)
        assert stored is not None and stored.steering_messages[-1] == f"note {n}"
    with pytest.raises(CorralError) as info:
        await sup.respond(sid, "one more", steer=True)
    assert str(info.value) == GUIDANCE_LIMIT
    stored = stored_session(sup.state_dir, sid)
    assert stored is not None and len(stored.steering_messages) == MAX_GUIDANCE_MESSAGES
    release.set()


# --- cancel mid-run ------------------------------------------------------------------------


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


async def test_cancel_mid_run_stops_a_long_shell_step(make_owner: OwnerFactory, repo: Path) -> None:
    marker = f"20.{uuid.uuid4().int % 10**8:08d}"  # a unique duration to find the process
    engine = ScriptedEngine([[Say("sleeping"), Run(f"sleep {marker}"), Write("hello.txt", "hi")]])
    sup, registry = await make_owner(engine=engine)
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
    assert not registry.live(sid).task_running
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


async def test_a_cancel_stores_that_the_worktree_is_kept_before_it_stops_the_work(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    """If corral dies while the work is being stopped, the record already
    says the worktree is kept: the retention is stored before the abort."""
    seen: list[bool | None] = []
    started = asyncio.Event()

    class Stuck:
        label = "stuck"

        async def run(self, ctx: object) -> object:
            started.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                stored = stored_session(sup.state_dir, sid)
                seen.append(stored.keep_workspace_on_cancel if stored else None)
                raise
            raise AssertionError("never ends by itself")

    sup = await make_supervisor(engine=Stuck())
    sid = await proposed(sup, repo)
    await sup.confirm(sid)
    await asyncio.wait_for(started.wait(), 10)
    result = await sup.cancel(sid)
    assert result.state is CoderState.ABANDONED
    assert seen == [True]
