"""The operator's own lifecycle through the facade: name a session, archive a
finished one (hidden, kept, brought back), and retry a failed or rejected one
with what went wrong told to the agent."""

from __future__ import annotations

from pathlib import Path

import pytest

from corral.supervisor.errors import CorralError
from corral.supervisor.git.run import git
from corral.supervisor.states import CoderState
from tests.conftest import SupervisorFactory, proposed, run_to_gate, stored_session
from tests.fakes.scripted import Run, ScriptedEngine, Write

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
    stored = stored_session(sup.state_dir, sid)
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
    with pytest.raises(CorralError, match="delivered"):
        await sup.retry(sid)


async def test_retry_with_its_edits_starts_from_the_old_worktrees_files(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    """`retry --keep-edits`: the new worktree starts on the old start commit
    holding the old worktree's files (new, changed, deleted) as uncommitted
    changes, its agent is told so, and review shows every change from the
    start commit; the old worktree is left as it was."""
    (repo / "notes.txt").write_text("old notes\n")
    git(repo, "add", "notes.txt")
    git(repo, "commit", "-qm", "notes")
    steps = [Write("hello.txt", "hi\n"), Write("draft.txt", "half done\n"), Run("rm -f notes.txt")]
    sup = await make_supervisor(engine=ScriptedEngine([steps]))
    sid = await proposed(sup, repo)
    assert (await run_to_gate(sup, sid)).state is S.NEEDS_APPROVAL
    await sup.approve(sid, approve=False, comment="keep going")
    old = sup.get(sid).session
    assert old.worktree is not None and old.start_commit is not None

    retry = await sup.retry(sid, wait=True, keep_edits=True)
    new = sup.get(retry.session_id).session
    assert new.worktree is not None and new.worktree != old.worktree
    tree = Path(new.worktree)
    assert (tree / "hello.txt").read_text() == "hi\n"
    assert (tree / "draft.txt").read_text() == "half done\n"
    assert not (tree / "notes.txt").exists()
    assert git(tree, "rev-parse", "HEAD").strip() == old.start_commit == new.start_commit
    status = sorted(git(tree, "status", "--porcelain").splitlines())
    assert status == [" D notes.txt", "?? draft.txt", "?? hello.txt"]
    assert "starts with the previous attempt's edits" in new.execution_intent()
    assert (Path(old.worktree) / "draft.txt").exists()  # the old one is untouched

    assert (await run_to_gate(sup, retry.session_id)).state is S.NEEDS_APPROVAL
    diff = sup.get(retry.session_id).session.diff
    assert diff is not None
    assert sorted(f.path for f in diff.files) == ["draft.txt", "hello.txt", "notes.txt"]


async def test_retry_with_its_edits_needs_the_old_worktree(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    wrong = ScriptedEngine([[Write("hello.txt", "bye\n")]])
    sup = await make_supervisor(engine=wrong, repair_invokes=0)
    sid = await proposed(sup, repo)
    assert (await run_to_gate(sup, sid)).state is S.FAILED
    old = Path(sup.get(sid).session.worktree or "/nonexistent")
    assert old.is_dir()  # a failed session keeps it; the operator removed it since
    git(repo, "worktree", "remove", "--force", str(old))
    with pytest.raises(CorralError, match="worktree is gone, so there are no edits to keep"):
        await sup.retry(sid, keep_edits=True)
    assert (await sup.retry(sid, wait=True)).state is S.CONTRACT_PROPOSED  # afresh still works
