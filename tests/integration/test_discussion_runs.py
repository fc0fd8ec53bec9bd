"""Runs started from a discussion: admission (a known discussion, its
repository, one unfinished run at a time) and where a follow-up starts (what
the last run delivered, never silently the old checkout)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from corral.supervisor.api import Supervisor
from corral.supervisor.discuss import Discussion, Discussions
from corral.supervisor.discuss.linked_runs import CODING_CONTEXT_HEADER, coding_context
from corral.supervisor.errors import CorralError
from corral.supervisor.llm.base import Turn
from corral.supervisor.models import EventKind
from corral.supervisor.states import CoderState, LoopFailure, label
from tests.conftest import (
    SupervisorFactory,
    events_of,
    eventually,
    git,
    init_repo,
    run_to_gate,
    stored_session,
)
from tests.fakes.scripted import Fail, ScriptedEngine, Write
from tests.fakes.scripted_llm import ScriptedProvider
from tests.integration.conftest import OwnerFactory

S = CoderState


async def discussion(state_dir: Path, repo: Path) -> Discussion:
    return await Discussions(state_dir, ScriptedProvider()).start(repo)


def plan_texts(sup: Supervisor, sid: str) -> list[str]:
    return [
        str(getattr(e.data, "text", ""))
        for e in events_of(sup, sid)
        if e.kind is EventKind.PLAN_TEXT
    ]


def worktrees(state_dir: Path) -> list[Path]:
    folder = state_dir / "worktrees"
    return sorted(folder.iterdir()) if folder.is_dir() else []


async def delivered(sup: Supervisor, repo: Path, disc: Discussion, delivery: str) -> str:
    """Start a run from the discussion, run it and deliver it; its commit."""
    first = await sup.start("say hi", repo, discussion_id=disc.id)
    assert (await run_to_gate(sup, first.session_id)).state is S.NEEDS_APPROVAL
    result = await sup.approve(first.session_id, delivery=delivery)
    assert result.state is S.MERGED and result.commit
    return result.commit


# --- where a follow-up starts -----------------------------------------------------------


async def test_a_followup_after_a_branch_delivery_starts_from_the_delivered_commit(
    make_supervisor: SupervisorFactory, repo: Path, state_dir: Path
) -> None:
    sup = await make_supervisor()
    disc = await discussion(state_dir, repo)
    head = git(repo, "rev-parse", "HEAD").strip()
    commit = await delivered(sup, repo, disc, "branch")

    # recorded on the discussion, and it survives a reopen
    [row] = disc.linked_sessions
    assert (row["state"], row["result_commit"], row["result_delivery"]) == (
        "merged",
        commit,
        "branch",
    )
    again = await Discussions(state_dir, ScriptedProvider()).resume(disc.id)
    assert again.linked_sessions[0]["result_commit"] == commit

    # a branch can move; the delivered commit is what the follow-up continues
    git(repo, "branch", "-f", str(row["result_branch"]), "main")
    second = await sup.start("say hi louder", repo, discussion_id=disc.id)
    assert second.base == commit
    worktree = Path(second.worktree or "")
    assert git(worktree, "rev-parse", "HEAD").strip() == commit
    assert (worktree / "hello.txt").read_text() == "hi\n"
    assert git(repo, "rev-parse", "HEAD").strip() == head  # the checkout is untouched
    assert any(
        f"starts from the commit {label(row['session_id'])} delivered ({commit[:12]}" in text
        for text in plan_texts(sup, second.session_id)
    )


async def test_each_turn_tells_the_model_what_became_of_the_runs_started_here(
    make_supervisor: SupervisorFactory, repo: Path, state_dir: Path
) -> None:
    """After a run from the discussion was delivered, the next question is
    answered knowing it (its state, where it went, the commit), read afresh
    for the turn and never written into the conversation's record."""
    sup = await make_supervisor()
    provider = ScriptedProvider([Turn("before"), Turn("after")])
    disc = await Discussions(state_dir, provider).start(repo)
    await disc.send("what should we build?")
    await asyncio.wait_for(disc.wait(), 10)
    before = provider.calls[-1].messages[-1].content
    assert before == "what should we build?"  # no runs yet: nothing added
    commit = await delivered(sup, repo, disc, "branch")
    await disc.send("did it land?")
    await asyncio.wait_for(disc.wait(), 10)
    asked = provider.calls[-1].messages[-1]
    assert asked.role == "user" and asked.content.endswith("did it land?")
    block = asked.content.removesuffix("did it land?")
    assert block.startswith(CODING_CONTEXT_HEADER)
    [row] = [json.loads(line) for line in block.splitlines() if line.startswith("{")]
    assert (row["state"], row["result_delivery"], row["result_commit"]) == (
        "merged",
        "branch",
        commit,
    )
    assert "do not mean the work is merged upstream or deployed" in block
    # the record keeps what the operator said, not the observation
    saved = json.loads((state_dir / "discussions" / f"{disc.id}.json").read_text())
    assert CODING_CONTEXT_HEADER not in json.dumps(saved)


def test_the_run_context_shows_the_newest_eight_and_leaves_out_a_resumed_run() -> None:
    rows = [{"session_id": f"s{i}", "state": "failed", "updated_at": i} for i in range(11)]
    rows.append({"session_id": "s11", "state": "running", "updated_at": 11, "resumed_from": "s10"})
    shown = [
        json.loads(line)["session_id"]
        for line in coding_context(rows).splitlines()
        if line.startswith("{")
    ]
    assert shown == ["s11", "s9", "s8", "s7", "s6", "s5", "s4", "s3"]
    assert "(3 older runs not shown)" in coding_context(rows)
    assert coding_context([]) == ""


async def test_the_delivered_commit_outlives_the_session_row(
    make_owner: OwnerFactory, repo: Path, state_dir: Path
) -> None:
    sup, registry = await make_owner()
    disc = await discussion(state_dir, repo)
    commit = await delivered(sup, repo, disc, "branch")
    first_id = disc.linked_sessions[0]["session_id"]
    registry.forget_stored([first_id])  # retention forgot the session
    assert registry.stored(first_id) is None
    second = await sup.start("again", repo, discussion_id=disc.id)
    assert second.base == commit


async def test_a_followup_after_a_checkout_delivery_starts_from_the_current_files(
    make_supervisor: SupervisorFactory, repo: Path, state_dir: Path
) -> None:
    sup = await make_supervisor()
    disc = await discussion(state_dir, repo)
    commit = await delivered(sup, repo, disc, "checkout")
    assert disc.linked_sessions[0]["result_delivery"] == "checkout"
    assert (repo / "hello.txt").read_text() == "hi\n"
    (repo / "later.txt").write_text("an edit after the delivery\n")
    second = await sup.start("again", repo, discussion_id=disc.id)
    assert second.base != commit
    worktree = Path(second.worktree or "")
    assert (worktree / "hello.txt").read_text() == "hi\n"
    assert (worktree / "later.txt").read_text() == "an edit after the delivery\n"
    assert any(
        "delivered its change to your checkout" in t for t in plan_texts(sup, second.session_id)
    )


async def test_a_delivery_without_a_recorded_commit_refuses_the_followup(
    make_supervisor: SupervisorFactory, repo: Path, state_dir: Path
) -> None:
    sup = await make_supervisor()
    disc = await discussion(state_dir, repo)
    ledger = state_dir / "discussions" / "runs" / f"{disc.id}.json"
    ledger.parent.mkdir(parents=True)
    ledger.write_text(
        json.dumps(
            {
                "discussion_id": disc.id,
                "runs": [{"session_id": "old", "state": "merged", "updated_at": 1.0}],
            }
        )
    )
    with pytest.raises(CorralError, match="predates saved result revisions"):
        await sup.start("again", repo, discussion_id=disc.id)
    assert sup.list() == [] and worktrees(state_dir) == []
    # an explicit base is the operator's answer
    head = git(repo, "rev-parse", "HEAD").strip()
    assert (await sup.start("again", repo, base="HEAD", discussion_id=disc.id)).base == head


async def test_a_followup_after_a_natural_failure_carries_on_from_its_work(
    make_supervisor: SupervisorFactory, repo: Path, state_dir: Path
) -> None:
    """A run that failed by itself (a budget cut here) is recorded stopped
    once its engine is; the discussion's next start carries on from its kept
    worktree (`resumed_from`, its edits uncommitted in the new worktree, the
    old one untouched) instead of refusing or starting over."""
    engine = ScriptedEngine(
        [[Write("hello.txt", "half\n"), Fail(LoopFailure.BUDGET_EXHAUSTED, "out of turns")]]
    )
    sup = await make_supervisor(engine=engine)
    disc = await discussion(state_dir, repo)
    first = await sup.start("say hi", repo, discussion_id=disc.id)
    assert (await run_to_gate(sup, first.session_id)).state is S.FAILED
    await eventually(lambda: sup.get(first.session_id).session.execution_stopped)
    stored = stored_session(state_dir, first.session_id)
    assert stored is not None and stored.execution_stopped  # not only cancel marks a stop

    again = await sup.start("again", repo, discussion_id=disc.id)
    new = sup.get(again.session_id).session
    assert new.resumed_from == first.session_id
    assert new.base == sup.get(first.session_id).session.start_commit
    tree = Path(new.worktree or "")
    assert (tree / "hello.txt").read_text() == "half\n"
    assert git(tree, "status", "--porcelain").strip() == "?? hello.txt"
    assert (Path(first.worktree or "") / "hello.txt").read_text() == "half\n"
    assert any("carries on from the unfinished work" in t for t in plan_texts(sup, new.id))
    assert "previous attempt's edits" in new.execution_intent()
    assert "out of turns" in new.execution_intent()


async def test_a_failed_run_not_confirmed_stopped_is_not_reopened(
    make_supervisor: SupervisorFactory, repo: Path, state_dir: Path
) -> None:
    engine = ScriptedEngine([[Write("hello.txt", "half\n"), Fail(LoopFailure.EXECUTION, "x")]])
    sup = await make_supervisor(engine=engine)
    disc = await discussion(state_dir, repo)
    first = await sup.start("say hi", repo, discussion_id=disc.id)
    assert (await run_to_gate(sup, first.session_id)).state is S.FAILED
    await eventually(lambda: sup.get(first.session_id).session.execution_stopped)
    sup.get(first.session_id)  # as if its agent's stop had never been seen
    live = sup._registry.live(first.session_id)
    live.session.execution_stopped = False
    sup._registry.persist(live)
    with pytest.raises(CorralError, match="has not been confirmed stopped"):
        await sup.start("again", repo, discussion_id=disc.id)
    assert len(sup.list()) == 1
    # an explicit base is the operator's choice to start over
    assert (await sup.start("again", repo, base="main", discussion_id=disc.id)).base


# --- admission ------------------------------------------------------------------------------


@pytest.mark.parametrize("discussion_id", ["disc-nope", "disc-" + "0" * 32, "../../etc/passwd"])
async def test_an_unknown_discussion_id_refuses_to_start(
    make_supervisor: SupervisorFactory, repo: Path, state_dir: Path, discussion_id: str
) -> None:
    sup = await make_supervisor()
    with pytest.raises(CorralError) as refused:
        await sup.start("say hi", repo, discussion_id=discussion_id)
    assert f"there is no discussion '{discussion_id}'" in str(refused.value)
    assert "nothing was started" in str(refused.value)
    assert sup.list() == [] and worktrees(state_dir) == []


async def test_a_discussion_starts_no_second_run_while_one_is_unfinished(
    make_supervisor: SupervisorFactory, repo: Path, state_dir: Path
) -> None:
    sup = await make_supervisor()
    disc = await discussion(state_dir, repo)
    first = await sup.start("say hi", repo, discussion_id=disc.id)
    assert first.state is S.CONTRACT_PROPOSED
    with pytest.raises(CorralError) as refused:
        await sup.start("say hi again", repo, discussion_id=disc.id)
    assert str(refused.value) == (
        f"Conversation already has unfinished work in {label(first.session_id)} "
        "(contract_proposed). Open it from the board to continue or cancel it before "
        "starting another task."
    )
    assert len(sup.list()) == 1
    # sessions without the discussion are not held back
    assert (await sup.start("unrelated", repo)).state is S.CONTRACT_PROPOSED
    # once the first is cancelled (its worktree holds no change), the next may start
    await sup.cancel(first.session_id)
    assert (await sup.start("say hi again", repo, discussion_id=disc.id)).session_id


async def test_concurrent_starts_from_one_discussion_admit_exactly_one(
    make_supervisor: SupervisorFactory, repo: Path, state_dir: Path
) -> None:
    sup = await make_supervisor()
    disc = await discussion(state_dir, repo)
    results = await asyncio.gather(
        *(sup.start(f"try {i}", repo, discussion_id=disc.id, wait=False) for i in range(3)),
        return_exceptions=True,
    )
    refused = [r for r in results if isinstance(r, CorralError)]
    assert len(refused) == 2 and all("unfinished work" in str(r) for r in refused)
    [row] = sup.list()
    await sup.wait_for(row.session_id, {S.CONTRACT_PROPOSED}, timeout=10)


async def test_a_run_must_use_the_discussions_repository(
    make_supervisor: SupervisorFactory, repo: Path, state_dir: Path, tmp_path: Path
) -> None:
    sup = await make_supervisor()
    disc = await discussion(state_dir, repo)
    other = init_repo(tmp_path / "other")
    with pytest.raises(CorralError, match="differs from this conversation's repository"):
        await sup.start("say hi", other, discussion_id=disc.id)
    assert sup.list() == []
