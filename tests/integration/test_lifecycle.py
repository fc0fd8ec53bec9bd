"""The operator's own lifecycle through the facade: name a session, archive a
finished one (hidden, kept, brought back), and retry a failed or rejected one
with what went wrong told to the agent."""

from __future__ import annotations

from pathlib import Path

import pytest

from corral.supervisor.errors import CorralError
from corral.supervisor.states import CoderState
from tests.conftest import SupervisorFactory, proposed, run_to_gate
from tests.fakes.scripted import ScriptedEngine, Write

S = CoderState


async def test_a_name_is_stored_and_survives_a_restart(
    make_supervisor: SupervisorFactory, repo: Path, state_dir: Path
) -> None:
    sup = await make_supervisor()
    sid = await proposed(sup, repo)
    row = sup.rename(sid, "  hello   file ")
    assert row.name == "hello file"
    assert next(r for r in sup.list() if r.session_id == sid).name == "hello file"
    with pytest.raises(CorralError, match="at most 40 characters"):
        sup.rename(sid, "x" * 41)
    assert sup.get(sid).session.name == "hello file"  # a refusal changed nothing
    await sup.close()
    again = await make_supervisor()
    assert again.get(sid).session.name == "hello file"
    again.rename(sid, "")
    assert again.get(sid).session.name is None


async def test_only_a_finished_session_is_archived_and_it_comes_back(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    sup = await make_supervisor()
    sid = await proposed(sup, repo)
    with pytest.raises(CorralError, match="only a finished session can be archived"):
        sup.archive(sid)
    await sup.cancel(sid)
    before = sup.get(sid).session.updated_at
    assert sup.archive(sid).archived
    assert sup.get(sid).session.updated_at == before  # archiving does not reorder
    assert sup.registry.store is not None
    stored = sup.registry.store.load_session(sid)
    assert stored is not None and stored.archived_at is not None
    assert not sup.archive(sid, archived=False).archived


async def test_retry_after_red_checks_tells_the_agent_what_failed(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    # the first attempt writes the wrong thing; the retry's agent gets the failing output
    wrong = ScriptedEngine([[Write("hello.txt", "bye\n")]])
    sup = await make_supervisor(engine=wrong, repair_invokes=0)
    sid = await proposed(sup, repo)
    assert (await run_to_gate(sup, sid)).state is S.FAILED

    retry = await sup.retry(sid, wait=True)
    assert retry.session_id != sid
    assert retry.state is S.CONTRACT_PROPOSED
    new = sup.get(retry.session_id).session
    assert new.retry_of == sid and new.intent == "say hi"
    assert new.contract == sup.get(sid).session.contract
    assert new.worktree != sup.get(sid).session.worktree  # a fresh worktree
    await sup.confirm(retry.session_id)
    await sup.wait_for(retry.session_id, needs=True, timeout=10)
    prompt = wrong.contexts[-1].intent
    assert "tried before" in prompt and "Check hello failed (exit 1)" in prompt


async def test_retry_after_a_rejection_carries_the_comment_and_the_name(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    sup = await make_supervisor()
    sid = await proposed(sup, repo)
    sup.rename(sid, "greeting")
    assert (await run_to_gate(sup, sid)).state is S.NEEDS_APPROVAL
    await sup.approve(sid, approve=False, comment="say it in French")
    retry = await sup.retry(sid, wait=True)
    new = sup.get(retry.session_id).session
    assert new.name == "greeting"
    assert "The operator rejected the result: say it in French" in new.execution_intent()


async def test_a_running_or_delivered_session_is_not_retried(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    sup = await make_supervisor()
    sid = await proposed(sup, repo)
    with pytest.raises(CorralError, match="only a failed, rejected or cancelled session"):
        await sup.retry(sid)
    await run_to_gate(sup, sid)
    await sup.approve(sid)
    with pytest.raises(CorralError, match="merged"):
        await sup.retry(sid)
