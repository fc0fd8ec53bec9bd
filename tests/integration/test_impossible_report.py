"""The agent's honest way out: a task whose tests contradict its intent is
reported (the built-in engine's tool, an agent's own control connection,
MCP), and the session waits for the operator with the reason instead of
being verified or pushed through repair rounds. The operator revises the
contract (gate 1 again), tells the agent to go on, or cancels.

The hook path (`corral hook impossible` from a real pane) is in
`test_hidden_from_the_agent.py`."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from corral.supervisor.control.callers import Agent, Operator
from corral.supervisor.control.handles import NOT_AN_AGENT, HandleTable
from corral.supervisor.engines.external import repair_prompt
from corral.supervisor.engines.native import repair_message
from corral.supervisor.errors import CorralError
from corral.supervisor.events import ContractEvaluatedData
from corral.supervisor.models import CheckResult
from corral.supervisor.states import CoderState
from tests.conftest import (
    SupervisorFactory,
    eventually,
    git,
    hello_contract,
    plan_texts,
    stored_session,
)
from tests.fakes.scripted import Impossible, ScriptedEngine, Wait, Write

S = CoderState
REASON = "test_hello expects 'hi' but the intent says the file must say 'hello'"


def evaluations(sup: object, sid: str) -> int:
    return sum(1 for e in sup.replay(sid) if isinstance(e.data, ContractEvaluatedData))  # type: ignore[attr-defined]


async def reported(sup: object, sid: str) -> str:
    """Waits until the session asks the operator about the report; its prompt."""
    row = await sup.wait_for(sid, needs=True, timeout=30)  # type: ignore[attr-defined]
    assert row.needs_you == "question", row
    assert row.question_prompt is not None
    return str(row.question_prompt)


async def test_a_reported_impossible_task_waits_for_the_operator_unverified(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    engine = ScriptedEngine([[Impossible(REASON)], [Write("hello.txt", "hi\n")]])
    sup = await make_supervisor(engine=engine, repair_invokes=3)
    sid = (await sup.start("say hi", repo)).session_id
    await sup.confirm(sid)
    prompt = await reported(sup, sid)
    assert prompt.startswith(f"the agent says the tests contradict the intent: {REASON}")
    assert sup.question_options(sid) == ["revise the contract", "go on", "cancel"]
    assert evaluations(sup, sid) == 0  # nothing was verified
    assert len(engine.contexts) == 1  # and nothing sent back for repair

    # go on, with a message: the agent gets it as its next round's prompt
    await sup.respond(sid, "go on: the intent wins; write hi")
    row = await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=30)
    assert row.state is S.NEEDS_APPROVAL, row.error
    told = engine.contexts[1].failing_checks
    assert "the intent wins; write hi" in repair_prompt(told, 2, 1)
    assert "the intent wins; write hi" in repair_message(told, 2)
    assert "The operator tells the agent to go on: the intent wins; write hi" in plan_texts(
        sup, sid
    )


async def test_the_operator_revises_the_contract_and_the_run_starts_again(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    engine = ScriptedEngine([[Impossible(REASON)], [Write("hello.txt", "hi\n")]])
    sup = await make_supervisor(engine=engine)
    sid = (await sup.start("say hi", repo)).session_id
    await sup.confirm(sid)
    await reported(sup, sid)
    await sup.respond(sid, "revise the contract")
    row = await sup.wait_for(sid, {S.CONTRACT_PROPOSED}, timeout=30)
    assert row.state is S.CONTRACT_PROPOSED and row.needs_you == "contract"
    assert evaluations(sup, sid) == 0
    revised = await sup.revise(sid, "/check hello test -f hello.txt")
    assert revised.revised
    engine.rounds = [[Write("hello.txt", "hi\n")]]  # the agent, on the revised contract
    assert await sup.confirm(sid) == {"state": "running"}
    row = await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=30)
    assert row.state is S.NEEDS_APPROVAL, row.error
    assert engine.contexts[-1].round == 1  # a fresh run on the revised contract
    assert [c.command for c in engine.contexts[-1].contract.checks] == ["test -f hello.txt"]


async def test_the_operator_cancels_and_nothing_is_delivered(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    engine = ScriptedEngine([[Write("hello.txt", "half\n"), Impossible(REASON)]])
    sup = await make_supervisor(engine=engine)
    sid = (await sup.start("say hi", repo)).session_id
    await sup.confirm(sid)
    await reported(sup, sid)
    await sup.respond(sid, "cancel")
    row = await sup.wait_for(sid, {S.ABANDONED, S.FAILED}, timeout=30)
    assert row.state is S.ABANDONED
    assert evaluations(sup, sid) == 0
    assert git(repo, "branch", "--list", "corral/*").strip() == ""
    worktree = Path(sup.get(sid).session.worktree or "")
    assert (worktree / "hello.txt").read_text() == "half\n"  # kept for a look


async def test_an_agents_own_connection_and_mcp_report_for_its_own_session_only(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    gate = asyncio.Event()
    engine = ScriptedEngine([[Wait(gate), Write("hello.txt", "hi\n")]])
    sup = await make_supervisor(engine=engine)
    sid = (await sup.start("say hi", repo)).session_id
    other = (await sup.start("say hi again", repo)).session_id
    await sup.confirm(sid)
    tools = HandleTable(sup)
    with pytest.raises(CorralError, match="for an agent corral runs"):
        await tools.report_impossible(REASON, Operator(1))
    assert NOT_AN_AGENT
    with pytest.raises(CorralError, match="not running"):
        await tools.report_impossible(REASON, Agent(other, 1))  # at gate 1: nothing to report
    answer = await tools.report_impossible(REASON, Agent(sid, 1))
    assert answer.startswith("recorded")
    gate.set()
    prompt = await reported(sup, sid)
    assert REASON in prompt
    assert evaluations(sup, sid) == 0


@pytest.mark.parametrize("ending", ["pass", "fail"])
def test_repair_prompts_say_changing_the_exam_is_shown_and_name_the_way_out(
    ending: str,
) -> None:
    failing = [CheckResult(name="tests", passed=False, exit_code=1, output_tail="E assert")]
    for text in (repair_prompt(failing, 2, 1), repair_message(failing, 2)):
        assert "shows every such change to the operator" in text
        assert "never passes by itself" in text
        assert "report_impossible" in text
    assert "$CORRAL_HOOK_CMD impossible" in repair_prompt(failing, 2, 1)


async def test_the_impossible_hook_line_reaches_the_session(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    gate = asyncio.Event()
    engine = ScriptedEngine([[Wait(gate), Write("hello.txt", "hi\n")]])
    sup = await make_supervisor(engine=engine)
    sid = (await sup.start("say hi", repo)).session_id
    await sup.confirm(sid)
    registry = sup._registry  # what the pane manager's hook watcher calls
    registry.note_agent_hook(sid, {"hook_event_name": "impossible", "raw": f"\x1b[2J{REASON}\n"})
    gate.set()
    prompt = await reported(sup, sid)
    assert REASON in prompt and "\x1b" not in prompt
    await eventually(lambda: evaluations(sup, sid) == 0)
    assert hello_contract().checks  # the contract was never run


async def test_an_unanswered_report_is_stored_and_asked_first_when_the_run_starts_again(
    make_supervisor: SupervisorFactory, repo: Path, state_dir: Path
) -> None:
    gate = asyncio.Event()
    engine = ScriptedEngine([[Wait(gate)]])
    sup = await make_supervisor(engine=engine)
    sid = (await sup.start("say hi", repo)).session_id
    await sup.confirm(sid)
    sup.report_impossible(sid, REASON)
    stored = stored_session(state_dir, sid)
    assert stored is not None and stored.impossible_report == REASON  # a restart finds it

    # what a re-adopted run does with it: asks before the agent's next round
    other = (await sup.start("say hi", repo)).session_id
    sup._registry.live(other).session.impossible_report = REASON
    engine.rounds = [[Wait(gate)], [Write("hello.txt", "hi\n")]]
    await sup.confirm(other)
    prompt = await reported(sup, other)
    assert REASON in prompt
    assert all(c.session_id != other for c in engine.contexts)  # asked before any round
    await sup.respond(other, "go on: write hi")
    row = await sup.wait_for(other, {S.NEEDS_APPROVAL, S.FAILED}, timeout=30)
    assert row.state is S.NEEDS_APPROVAL, row.error
    [ran] = [c for c in engine.contexts if c.session_id == other]
    assert ran.round == 2  # the answer rides the agent's next round
    assert "write hi" in repair_prompt(ran.failing_checks, 2, 1)
    stored = stored_session(state_dir, other)
    assert stored is not None and stored.impossible_report is None  # answered
    gate.set()
