"""Worktrees, runtime verification and delivery through the Supervisor, on
real git: dirty checkouts, both delivery modes, partial approval, tampering,
timeouts that leave children, checks that commit, big diffs, odd file names."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from corral.supervisor.errors import CorralError
from corral.supervisor.git.leases import LeaseState
from corral.supervisor.models import ContractCheck, EventKind, OutcomeContract
from corral.supervisor.states import CoderState as S
from tests.conftest import SupervisorFactory, git, kinds_of, lease_of, plan_texts
from tests.fakes.scripted import Run, ScriptedDrafter, ScriptedEngine, Write, contract


def commit_file(repo: Path, name: str, text: str) -> None:
    (repo / name).write_text(text)
    git(repo, "add", name)
    git(repo, "commit", "-q", "-m", f"add {name}")


async def to_gate(sup, repo: Path, intent: str = "task"):  # type: ignore[no-untyped-def]
    sid = (await sup.start(intent, repo)).session_id
    await sup.confirm(sid)
    row = await sup.wait_for(sid, needs=True, timeout=20)
    return sid, row


def lease_state(sup, path: str | None) -> LeaseState | None:  # type: ignore[no-untyped-def]
    lease = lease_of(sup.state_dir, path)
    return None if lease is None else lease.state


async def test_a_dirty_checkout_is_the_starting_point_and_never_ships_on_a_branch(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    commit_file(repo, "app.txt", "v1\n")
    (repo / "app.txt").write_text("v1\nmy wip\n")  # unstaged
    (repo / "staged.txt").write_text("staged\n")
    git(repo, "add", "staged.txt")
    (repo / "secret.env").write_text("TOKEN=x\n")  # untracked
    status = git(repo, "status", "--porcelain")
    engine = ScriptedEngine([[Write("feature.txt", "done\n")]])
    sup = await make_supervisor(
        drafter=ScriptedDrafter(
            [
                contract(
                    ("feature", "grep -q done feature.txt"),
                    ("sees_wip", "grep -q 'my wip' app.txt"),
                )
            ]
        ),
        engine=engine,
    )
    sid, row = await to_gate(sup, repo)
    assert row.needs_you == "merge"
    session = sup.get(sid).session
    assert session.inputs_snapshot is not None  # the task saw the WIP (check sees_wip passed)
    assert "private snapshot" in " ".join(plan_texts(sup, sid))
    # the branch is verified as it is (HEAD plus the change, without the WIP):
    # sees_wip fails there, and the refusal names the files the branch lacks
    with pytest.raises(CorralError, match=r"sees_wip.*app\.txt \(uncommitted in your checkout\)"):
        await sup.approve(sid)
    assert git(repo, "branch", "--list", "corral/*").strip() == ""
    result = await sup.approve(sid, override_red=True)
    assert "Corral-Override: delivered with failing checks: sees_wip" in git(
        repo, "log", "-1", "--format=%B", result.branch or ""
    )
    assert git(repo, "status", "--porcelain") == status  # checkout untouched
    files = git(repo, "ls-tree", "-r", "--name-only", result.branch or "").split()
    assert "feature.txt" in files
    assert "staged.txt" not in files and "secret.env" not in files
    assert git(repo, "show", f"{result.branch}:app.txt") == "v1\n"  # WIP not shipped
    assert (
        git(repo, "rev-parse", f"{result.branch}~1").strip()
        == git(repo, "rev-parse", "HEAD").strip()
    )


async def test_a_task_that_edits_a_dirty_file_cannot_go_to_a_branch_but_can_to_the_checkout(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    commit_file(repo, "app.txt", "v1\n")
    (repo / "app.txt").write_text("v1\nmy wip\n")
    engine = ScriptedEngine([[Write("app.txt", "v1\nmy wip\ntask line\n")]])
    sup = await make_supervisor(
        drafter=ScriptedDrafter([contract(("task", "grep -q 'task line' app.txt"))]),
        engine=engine,
    )
    sid, _ = await to_gate(sup, repo)
    with pytest.raises(CorralError, match=r"app\.txt, which had your uncommitted changes"):
        await sup.approve(sid, delivery="branch")
    assert sup.get(sid).session.state is S.NEEDS_APPROVAL
    result = await sup.approve(sid, delivery="checkout")
    assert result.state is S.MERGED and result.branch is None
    assert (repo / "app.txt").read_text() == "v1\nmy wip\ntask line\n"
    assert git(repo, "diff", "--cached", "--name-only") == ""  # index untouched
    assert git(repo, "rev-parse", f"refs/corral/results/{sid}").strip() == result.commit
    assert git(repo, "branch", "--list", "corral/*").strip() == ""


async def test_checkout_delivery_refuses_a_file_changed_since_and_reports_a_repeat(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    commit_file(repo, "a.txt", "one\n")
    sup = await make_supervisor(
        drafter=ScriptedDrafter([contract(("a", "grep -q two a.txt"))]),
        engine=ScriptedEngine([[Write("a.txt", "one\ntwo\n")]]),
    )
    sid, _ = await to_gate(sup, repo)
    (repo / "a.txt").write_text("operator\n")
    with pytest.raises(CorralError, match=r"you changed a\.txt since the task started"):
        await sup.approve(sid, delivery="checkout")
    assert (repo / "a.txt").read_text() == "operator\n"
    (repo / "a.txt").write_text("one\ntwo\n")  # the operator applied it by hand
    result = await sup.approve(sid, delivery="checkout")
    assert result.already_applied is True


async def test_partial_approval_delivers_exactly_one_hunk_of_three(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    commit_file(repo, "long.txt", "".join(f"{i}\n" for i in range(1, 31)))
    lines = [str(i) for i in range(1, 31)]
    lines[1], lines[14], lines[28] = "two", "fifteen", "twentynine"
    engine = ScriptedEngine(
        [[Write("long.txt", "\n".join(lines) + "\n"), Write("extra.txt", "x\n")]]
    )
    sup = await make_supervisor(
        drafter=ScriptedDrafter([contract(("fifteen", "grep -q fifteen long.txt"))]),
        engine=engine,
    )
    sid, _ = await to_gate(sup, repo)
    result = await sup.approve(sid, selection={"long.txt": {1}})
    assert result.partial is True and all(r.passed for r in result.verification)
    delivered = git(repo, "show", f"{result.branch}:long.txt").splitlines()
    assert delivered[1] == "2" and delivered[14] == "fifteen" and delivered[28] == "29"
    assert "extra.txt" not in git(repo, "ls-tree", "--name-only", result.branch or "")
    message = git(repo, "log", "-1", "--format=%B", result.branch or "")
    assert "Corral-Scope: partial (1 of 2 files approved)" in message
    assert "Corral-Check: fifteen pass" in message
    session = sup.get(sid).session
    # the unapproved rest is kept in the worktree
    assert (Path(session.worktree or "") / "extra.txt").exists()
    assert lease_state(sup, session.worktree) is LeaseState.RETAINED
    evaluated = [e.data for e in sup.replay(sid) if e.kind is EventKind.CONTRACT_EVALUATED]
    assert evaluated[-1].scope == "approved subset"


async def test_a_red_subset_is_refused_unless_overridden_and_the_override_is_recorded(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    engine = ScriptedEngine([[Write("a.txt", "a\n"), Write("b.txt", "b\n")]])
    sup = await make_supervisor(
        drafter=ScriptedDrafter([contract(("a", "test -f a.txt"), ("b", "test -f b.txt"))]),
        engine=engine,
    )
    sid, _ = await to_gate(sup, repo)
    with pytest.raises(CorralError, match=r"the approved part fails the contract \(b\)"):
        await sup.approve(sid, selection={"a.txt": None})
    assert sup.get(sid).session.state is S.NEEDS_APPROVAL
    with pytest.raises(CorralError, match=r"a\.txt can only be approved as a whole file"):
        await sup.approve(sid, selection={"a.txt": {2}})
    with pytest.raises(CorralError, match="not part of the verified diff"):
        await sup.approve(sid, selection={"nope.txt": None})
    result = await sup.approve(sid, selection={"a.txt": None}, override_red=True, discard_rest=True)
    message = git(repo, "log", "-1", "--format=%B", result.branch or "")
    assert "Corral-Override: delivered with failing checks: b" in message
    assert not Path(sup.get(sid).session.worktree or "").exists()  # rest discarded


async def test_re_verifying_a_touched_worktree_makes_its_content_the_verified_tree(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    sup = await make_supervisor()
    sid, _ = await to_gate(sup, repo)
    before = sup.get(sid).session.review_tree
    worktree = Path(sup.get(sid).session.worktree or "")
    (worktree / "sneaky.txt").write_text("late\n")
    results = await sup.reverify(sid)
    assert all(r.passed for r in results)
    session = sup.get(sid).session
    assert session.review_tree != before and session.changed_since_verification == []
    assert session.diff is not None and "sneaky.txt" in session.diff.stat
    result = await sup.approve(sid)
    assert result.note is None
    assert "sneaky.txt" in git(repo, "ls-tree", "--name-only", result.branch or "")


async def test_a_check_that_times_out_kills_its_children(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    marker = f"corral-child-{os.getpid()}-{time.time_ns()}"
    slow = ContractCheck(name="slow", command=f"(sleep 30 # {marker}\n) & sleep 30", timeout_secs=1)
    sup = await make_supervisor(
        drafter=ScriptedDrafter([OutcomeContract(checks=[slow])]), repair_invokes=0
    )
    started = time.monotonic()
    result = await sup.start("slow", repo)
    assert time.monotonic() - started < 10
    assert result.baseline[0].timed_out and not result.baseline[0].passed
    assert "timed out" in result.baseline[0].output_tail
    ps = os.popen("ps -eo args").read()
    assert marker not in ps


async def test_a_check_that_commits_changes_only_its_own_fresh_checkout(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    # The check writes and commits where it runs: a fresh checkout of the
    # captured tree, never the agent's worktree, which keeps its start commit
    # and no c.txt; the agent changed nothing, so nothing is offered as a diff.
    committing = ContractCheck(
        name="commits",
        command="echo x > c.txt && git add c.txt && (git diff --cached --quiet || "
        "git -c user.name=a -c user.email=a@a commit -qm sneaky) && test -f c.txt",
        timeout_secs=30,
    )
    sup = await make_supervisor(
        drafter=ScriptedDrafter([OutcomeContract(checks=[committing])]),
        engine=ScriptedEngine([[]]),
    )
    sid, row = await to_gate(sup, repo)
    session = sup.get(sid).session
    assert row.needs_you == "finding"
    worktree = Path(session.worktree or "")
    assert not (worktree / "c.txt").exists()
    assert git(worktree, "rev-parse", "HEAD").strip() == session.start_commit
    assert session.start_commit == git(repo, "rev-parse", "HEAD").strip()
    assert [e for e in kinds_of(sup, sid) if e is EventKind.WORKTREE_CHANGED] == []


@pytest.mark.slow
async def test_a_big_diff_is_truncated_in_the_event_but_delivered_whole(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    big = "".join(f"line {i} {'x' * 60}\n" for i in range(300_000))  # ~20 MB
    sup = await make_supervisor(
        drafter=ScriptedDrafter([contract(("big", "test -s big.txt"))]),
        engine=ScriptedEngine([[Write("big.txt", big)]]),
    )
    sid, _ = await to_gate(sup, repo)
    diff = sup.get(sid).session.diff
    assert diff is not None and diff.patch_truncated
    assert diff.patch_full_bytes > len(diff.patch.encode())
    result = await sup.approve(sid)
    assert git(repo, "show", f"{result.branch}:big.txt") == big


async def test_renames_deletions_binaries_and_unusual_names_deliver_intact(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    commit_file(repo, "old name.txt", "keep me\n")
    commit_file(repo, "gone.txt", "bye\n")
    engine = ScriptedEngine(
        [
            [
                Run(
                    "git mv 'old name.txt' 'new näme ü.txt' && git rm -q gone.txt "
                    "&& printf '\\000\\001\\002' > blob.bin && ln -s /etc/passwd outside-link"
                ),
            ]
        ]
    )
    sup = await make_supervisor(
        drafter=ScriptedDrafter([contract(("moved", "test -f 'new näme ü.txt'"))]),
        engine=engine,
    )
    sid, row = await to_gate(sup, repo)
    assert row.needs_you == "merge"
    result = await sup.approve(sid, delivery="checkout")
    assert (repo / "new näme ü.txt").read_text() == "keep me\n"
    assert not (repo / "old name.txt").exists() and not (repo / "gone.txt").exists()
    assert (repo / "blob.bin").read_bytes() == b"\x00\x01\x02"
    link = repo / "outside-link"
    assert link.is_symlink() and os.readlink(link) == "/etc/passwd"  # a link, not a copy
    assert result.already_applied is False


async def test_leases_follow_the_session(make_supervisor: SupervisorFactory, repo: Path) -> None:
    sup = await make_supervisor()
    sid, _ = await to_gate(sup, repo)
    worktree = sup.get(sid).session.worktree
    assert lease_state(sup, worktree) is LeaseState.READY
    await sup.approve(sid)
    assert lease_state(sup, worktree) is LeaseState.REMOVED
    assert not Path(worktree or "").exists()
    # a rejected one is retained for a day, then the sweep may discard it
    sid2, _ = await to_gate(sup, repo)
    tree2 = sup.get(sid2).session.worktree
    await sup.approve(sid2, approve=False)
    lease = lease_of(sup.state_dir, tree2)
    assert lease is not None and lease.state is LeaseState.RETAINED and lease.discard_ok
    assert lease.retain_until and lease.retain_until > time.time() + 3600
    assert EventKind.MERGE_COMPLETED not in kinds_of(sup, sid2)
