"""Gate 1 through the `Supervisor` facade, on real git repos: start, drafting
(and its failures), the baseline on the untouched tree and its one
reassessment, revision with compare-and-swap, confirmation, and cancel while
the contract waits."""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path
from typing import Any

import pytest

from corral.supervisor.api import DRAFTING_CANCELLED, NOT_EXPRESSIBLE
from corral.supervisor.contracts.drafting import DraftingError, DraftRequest
from corral.supervisor.errors import CorralError
from corral.supervisor.gates.contract import LOST_REVISION_RACE
from corral.supervisor.git.repo import repo_root
from corral.supervisor.models import EventKind, OutcomeContract
from corral.supervisor.session.journal import read_journal
from corral.supervisor.states import CoderState, FailureKind, NeedsYou
from tests.conftest import (
    HELLO_CHECK,
    SupervisorFactory,
    eventually,
    git,
    hello_contract,
    init_repo,
    kinds_of,
    plan_texts,
    proposed,
    row_of,
    run_to_gate,
    stored_session,
)
from tests.fakes.scripted import (
    ScriptedDrafter,
    contract,
)

S = CoderState


# --- start and drafting --------------------------------------------------------------------


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
    stored = stored_session(sup.state_dir, result.session_id)
    assert stored is not None and stored.state is S.CONTRACT_PROPOSED
    assert stored.contract == result.contract
    # the baseline ran in a disposable copy: the task's worktree is untouched
    assert git(result.worktree, "status", "--porcelain").strip() == ""
    # the copy is kept ready for the next checks, holding nothing but the start tree
    ready = list((sup.state_dir / "scratch").glob("[!.]*"))
    assert len(ready) == 1
    assert git(ready[0], "status", "--porcelain", "--ignored").strip() == ""
    assert git(ready[0], "rev-parse", "HEAD").strip() == head


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
    texts = plan_texts(sup, result.session_id)
    assert any("already pass before any edits" in t for t in texts)
    assert any("proves nothing yet" in t for t in texts)
    stored = stored_session(sup.state_dir, result.session_id)
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
    texts = plan_texts(sup, result.session_id)
    assert any("now include a failing baseline" in t for t in texts)


async def test_a_drafting_session_is_listable_at_created_and_cancellable(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    gate = asyncio.Event()  # the model never answers
    drafter = _EndingDrafter([hello_contract()], gate=gate)
    sup = await make_supervisor(drafter=drafter)
    starting = asyncio.create_task(sup.start("say hi", repo))

    rows = await eventually(sup.list)
    [row] = rows
    sid = row.session_id
    assert row.state is S.CREATED
    assert row.live is True
    assert row.needs_you is None
    assert row.worktree and Path(row.worktree).is_dir()
    # the row is listed before the model is asked: cancel once it has been
    await eventually(lambda: drafter.calls, timeout=10)

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
    stored = stored_session(sup.state_dir, sid)
    assert stored is not None and stored.state is S.ABANDONED
    assert stored.execution_stopped and stored.keep_workspace_on_cancel
    assert EventKind.CONTRACT_PROPOSED not in kinds_of(sup, sid)
    # a later gate action is refused
    with pytest.raises(CorralError, match="cancelled while drafting"):
        await sup.confirm(sid)
    # the model call was cancelled with the session: a late answer reaches nothing
    assert drafter.ended == ["cancelled"]
    gate.set()
    assert sup.get(sid).session.state is S.ABANDONED


class _EndingDrafter(ScriptedDrafter):
    """A scripted drafter that records how each draft call ended."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.ended: list[str] = []

    async def draft(self, request: DraftRequest) -> OutcomeContract:
        try:
            drafted = await super().draft(request)
        except asyncio.CancelledError:
            self.ended.append("cancelled")
            raise
        self.ended.append("answered")
        return drafted


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
    auth_events = [e for e in sup.replay(row.session_id) if e.kind is EventKind.AUTH_REQUIRED]
    assert len(auth_events) == 1 and auth_events[0].data.wait_secs == 0
    await asyncio.sleep(0)  # journal flush
    journaled = read_journal(sup.journal_path(row.session_id), EventKind.AUTH_REQUIRED)
    assert journaled == auth_events
    stored = stored_session(sup.state_dir, row.session_id)
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
        ("no-such", "'no-such' does not name a single commit"),
        ("HEAD..HEAD", "'HEAD..HEAD' does not name a single commit"),
        ("HEAD...HEAD", "'HEAD...HEAD' does not name a single commit"),
        ("HEAD^{tree}", "does not name a single commit"),
        ("HEAD^@", "does not name a single commit"),
        ("", "the base revision '' is empty"),
        ("  ", "is empty"),
    ],
)
async def test_a_bad_base_fails_before_provisioning(
    make_supervisor: SupervisorFactory, repo: Path, base: str, message: str
) -> None:
    sup = await make_supervisor()
    with pytest.raises(CorralError, match=re.escape(message)) as refused:
        await sup.start("say hi", repo, base=base)
    assert "a base must be one branch, tag or commit" in str(refused.value)
    assert "\n" not in str(refused.value) and "git " not in str(refused.value)
    assert not (sup.state_dir / "worktrees").exists()
    assert sup.list() == []


async def test_a_folder_in_a_home_that_is_a_git_repository_is_refused_as_a_project(
    make_supervisor: SupervisorFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dotfiles repository at $HOME must not make the whole home the
    project of a start from a plain folder under it (nor the home itself)."""
    home = init_repo(tmp_path / "home")
    (home / ".bashrc").write_text("export SECRET=1\n")
    scratch = home / "scratch"
    scratch.mkdir()
    monkeypatch.setenv("HOME", str(home))
    sup = await make_supervisor()
    for where in (scratch, home):
        with pytest.raises(CorralError, match="your home directory") as refused:
            await sup.start("tidy the scripts", where)
        said = str(refused.value)
        assert "\n" not in said and "git init" in said and "--repo" in said
    assert sup.list() == []
    assert not (sup.state_dir / "worktrees").exists()
    # a project repository of its own under the same home is a project
    project = init_repo(home / "project")
    assert repo_root(project / ".") == project.resolve()


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


# --- revision ------------------------------------------------------------------------------


async def test_a_check_edit_is_applied_verbatim_without_the_drafter(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    drafter = ScriptedDrafter([hello_contract()])
    sup = await make_supervisor(drafter=drafter)
    sid = await proposed(sup, repo)
    calls = len(drafter.calls)
    seq_before = sup.replay(sid)[-1].seq + 1  # the next event's

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
    # a revision is the contract, not guidance: it never reaches the agent as such
    assert session.steering_messages == []
    assert "Operator guidance" not in session.execution_intent()
    assert "/check" not in session.execution_intent()
    new = [e for e in sup.replay(sid) if e.seq >= seq_before]
    proposals = [e for e in new if e.kind is EventKind.CONTRACT_PROPOSED]
    assert [e.data.revised for e in proposals if e.kind is EventKind.CONTRACT_PROPOSED] == [
        True,
        True,
    ]
    stored = stored_session(sup.state_dir, sid)
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
    rejected = [e for e in sup.replay(sid) if e.kind is EventKind.CONTRACT_REVISION_REJECTED]
    assert [e.data.request for e in rejected if e.kind is EventKind.CONTRACT_REVISION_REJECTED] == [
        "make it more robust somehow"
    ]
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


async def test_a_revision_that_lost_the_race_to_another_is_rejected_not_applied(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    """Two revisions at once (a slow redraft, a `/check` edit landing
    meanwhile): the slower one must not overwrite the contract the operator
    already changed; it is rejected with the reason, the winner stays."""
    stricter = contract(HELLO_CHECK, ("exact", "printf 'hi\\n' | cmp - hello.txt"))
    parked = asyncio.Event()
    release = asyncio.Event()

    async def slow_redraft(_request: object) -> OutcomeContract:
        parked.set()
        await release.wait()
        return stricter.model_copy(deep=True)

    drafter = ScriptedDrafter([hello_contract()], revisions=[slow_redraft])
    sup = await make_supervisor(drafter=drafter)
    sid = await proposed(sup, repo)
    slow = asyncio.create_task(sup.revise(sid, "compare the bytes exactly"))
    await asyncio.wait_for(parked.wait(), 10)
    won = await sup.revise(sid, "/check readme test ! -e README")
    assert won.revised is True
    release.set()
    lost = await asyncio.wait_for(slow, 30)
    assert lost.revised is False and lost.message == LOST_REVISION_RACE
    names = [c.name for c in sup.get(sid).session.contract.checks]  # type: ignore[union-attr]
    assert names == ["hello", "readme"]
    assert kinds_of(sup, sid)[-1] is EventKind.CONTRACT_REVISION_REJECTED


@pytest.mark.slow
async def test_a_confirm_whose_contract_changed_underneath_is_refused(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    """An edited-contract confirm re-runs the baseline; a revision landing in
    that time means the operator confirmed a contract that is no longer the
    proposed one: refused with a sentence, nothing starts."""
    sup = await make_supervisor()
    sid = await proposed(sup, repo)
    # its baseline takes 2 s, the revision's a moment: the revision lands first
    edited = contract(HELLO_CHECK, ("slow", "sleep 2; test ! -e README"))
    confirming = asyncio.create_task(sup.confirm(sid, edited))
    await asyncio.sleep(0)  # the confirm is re-running its baseline
    await sup.revise(sid, "/check other test -n x")
    with pytest.raises(CorralError, match="proposed contract changed during confirmation"):
        await asyncio.wait_for(confirming, 30)
    assert sup.get(sid).session.state is S.CONTRACT_PROPOSED


async def test_a_revision_over_16_kib_is_refused_before_anything(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    drafter = ScriptedDrafter([hello_contract()])
    sup = await make_supervisor(drafter=drafter)
    sid = await proposed(sup, repo)
    calls = len(drafter.calls)
    with pytest.raises(CorralError, match="at most 16384 bytes"):
        await sup.revise(sid, "x" * 16385)
    assert len(drafter.calls) == calls
    assert (await sup.revise(sid, "/check big test -n " + "y" * 16000)).revised is True


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


# --- confirm and cancel --------------------------------------------------------------------


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
