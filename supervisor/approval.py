"""Gate 2: approve (deliver) or reject a verified diff or a finding, and
cancel at any point."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from .contracts.checks import captures_from, run_contract
from .core import S, SupervisorCore, log
from .entry import SessionEntry
from .errors import CorralError
from .git.delivery import (
    apply_to_checkout,
    changed_paths,
    commit_patch,
    create_branch,
    review_identity,
    task_patch,
    touched_paths,
)
from .git.patches import FilePatch, Selection, build_patch, parse_patch, validate_selection
from .git.repo import head_commit
from .git.run import git
from .models import (
    ApproveResult,
    CancelResult,
    CheckResult,
    CoderSession,
    EventKind,
)
from .states import (
    ApprovalKind,
    already_happened,
    label,
    short_id,
)

CHANGED_AFTER = (
    "the worktree of {name} changed after verification, so nothing was delivered: what you "
    "would approve is not what was verified. Re-verify it (v), or reject"
)
NOT_FROM_CHECKOUT = (
    "this task does not start from your checkout's current revision (it names its own base, "
    "or the checkout was dirty in a way corral could not capture), so its changes cannot be "
    "applied there. Publish a branch instead"
)


class Approval(SupervisorCore):
    async def approve(
        self,
        session_id: str,
        *,
        approve: bool = True,
        accept_finding: bool = False,
        delivery: str | None = None,
        comment: str | None = None,
        selection: Selection | None = None,
        override_red: bool = False,
        discard_rest: bool = False,
    ) -> ApproveResult:
        """Deliver the verified diff (to a new branch `corral/<id>` or to the
        checkout's working files), accept a finding, or reject.

        `selection` approves part of the diff (path → hunk indices, None for a
        whole file); the contract is re-run on that part first and it is
        delivered only when green, unless `override_red` (recorded in the
        commit). The unapproved rest stays in the worktree unless
        `discard_rest`."""
        if delivery not in (None, "branch", "checkout"):
            raise CorralError(f'unknown delivery destination "{delivery}"; use checkout or branch')
        entry = self._live.get(session_id)
        if entry is None:
            raise CorralError(self._not_live_approve(session_id))
        s = entry.session
        if s.state is not S.NEEDS_APPROVAL:
            raise CorralError(already_happened(s.id, s.state, S.NEEDS_APPROVAL, "approve"))
        finding = (
            s.no_change_finding if entry.attention.approval_kind is ApprovalKind.FINDING else None
        )
        if not approve:
            if finding is not None:
                finding.resolved_at = self.clock()
                finding.resolver_comment = comment or "rejected at the approval gate"
                self._emit(
                    entry, EventKind.FINDING_RESOLVED, {"accepted": False, "comment": comment}
                )
            elif comment:
                self._emit(entry, EventKind.PLAN_TEXT, {"text": f"Rejected: {comment}"})
            s.keep_workspace_on_cancel = True
            self._transition(entry, S.ABANDONED)
            assert self.workspaces is not None
            self.workspaces.retain(s.worktree, rejected=True, note="rejected at the approval gate")
            return ApproveResult(state=s.state)
        if finding is not None:
            if not accept_finding:
                raise CorralError(
                    f"{label(s.id)} is waiting on a no-change finding, not a diff: pass "
                    "`accept_finding: true` to accept it (nothing is published) or "
                    "`approve: false` to abandon"
                )
            finding.verification = "human_approved"
            finding.resolved_at = self.clock()
            finding.resolver_comment = comment
            self._emit(entry, EventKind.FINDING_RESOLVED, {"accepted": True, "comment": comment})
            self._transition(entry, S.REPORTED)
            assert self.workspaces is not None
            await asyncio.to_thread(self.workspaces.remove, s.worktree, force=True)
            return ApproveResult(state=s.state)
        if accept_finding:
            raise CorralError(
                f"{label(s.id)} has a diff waiting, not a no-change finding; `accept_finding` "
                "only accepts a finding"
            )
        return await self._deliver(
            entry,
            delivery=delivery or "branch",
            selection=selection,
            override_red=override_red,
            discard_rest=discard_rest,
        )

    def _not_live_approve(self, session_id: str) -> str:
        stored = self._snapshots.get(session_id)
        if stored is None:
            return f"no corral session '{session_id}'"
        if stored.state.is_terminal:
            return already_happened(session_id, stored.state, S.NEEDS_APPROVAL, "approve")
        name = label(session_id)
        if stored.worktree and Path(stored.worktree).is_dir():
            return (
                f"{name} did not survive a restart as a live session (state: "
                f"{stored.state.value}) — it cannot be approved here, but its worktree is "
                f"intact at {stored.worktree}; review and merge it by hand"
            )
        return f"{name} is not running in this corral (state: {stored.state.value}) — nothing to approve"

    async def _check_review(self, entry: SessionEntry) -> None:
        s = entry.session
        assert s.worktree is not None
        now = await asyncio.to_thread(review_identity, Path(s.worktree))
        if now != s.review_tree:
            raise CorralError(CHANGED_AFTER.format(name=label(s.id)))

    async def _deliver(
        self,
        entry: SessionEntry,
        *,
        delivery: str,
        selection: Selection | None,
        override_red: bool,
        discard_rest: bool,
    ) -> ApproveResult:
        s = entry.session
        assert s.worktree and s.start_commit and s.contract is not None
        repo, worktree, start = Path(s.repo), Path(s.worktree), s.start_commit
        if delivery == "checkout" and s.checkout_identity is None:
            raise CorralError(NOT_FROM_CHECKOUT)
        await self._check_review(entry)
        full = await asyncio.to_thread(task_patch, worktree, start)
        files = parse_patch(full)
        patch, chosen = full, files
        if selection is not None:
            problems = validate_selection(files, selection)
            if problems:
                raise CorralError("cannot approve that selection: " + "; ".join(problems))
            patch = build_patch(files, selection)
            if not patch.strip():
                raise CorralError(
                    "nothing is selected: select at least one file or hunk, or reject"
                )
            chosen = parse_patch(patch)
        partial = patch != full
        verification = list(s.last_check_results)
        override: str | None = None
        if partial:
            verification = await self._verify_subset(entry, patch)
            failing = [r.name for r in verification if not r.passed]
            if failing and not override_red:
                raise CorralError(
                    f"the approved part fails the contract ({', '.join(failing)}); nothing was "
                    "delivered. Approve more of the change, change the selection, or override "
                    "(the override is recorded in the commit)"
                )
            if failing:
                override = "delivered with failing checks: " + ", ".join(failing)
        message = commit_message(
            s, verification, partial=partial, files=len(chosen), of=len(files), override=override
        )
        result = await asyncio.to_thread(commit_patch, repo, start, patch, message)
        await asyncio.to_thread(git, repo, "update-ref", f"refs/corral/results/{s.id}", result)
        reply = ApproveResult(
            state=s.state, delivery=delivery, partial=partial, verification=verification
        )
        if delivery == "checkout":
            already = await asyncio.to_thread(apply_to_checkout, repo, start, result, chosen)
            s.result_branch, s.result_commit, s.result_delivery = None, result, "checkout"
            reply.repo, reply.commit, reply.already_applied = str(repo), result, already
            self._emit(
                entry,
                EventKind.PLAN_TEXT,
                {
                    "text": (
                        f"Changes applied to {repo}. HEAD and the staged index are unchanged."
                        if not already
                        else f"The change was already applied in {repo}."
                    )
                },
            )
        else:
            branch = f"corral/{short_id(s.id)}"
            commit = await asyncio.to_thread(self._branch_commit, s, chosen, patch, message, result)
            await asyncio.to_thread(create_branch, repo, branch, commit)
            s.result_branch, s.result_commit, s.result_delivery = branch, commit, "branch"
            reply.branch, reply.commit = branch, commit
            self._emit(entry, EventKind.MERGE_COMPLETED, {"branch": branch, "commit": commit})
        s.result_scope = "partial" if partial else "full"
        s.delivery_override = override
        self._transition(entry, S.MERGED)
        reply.state = s.state
        assert self.workspaces is not None
        if partial and not discard_rest:
            self.workspaces.retain(s.worktree, note="holds the part of the change not approved")
        else:
            await asyncio.to_thread(self.workspaces.remove, s.worktree, force=True)
        return reply

    def _branch_commit(
        self, s: CoderSession, chosen: list[FilePatch], patch: str, message: str, result: str
    ) -> str:
        """The branch commit, on the checkout's current HEAD (blocking)."""
        repo = Path(s.repo)
        head = head_commit(repo)
        assert head is not None and s.start_commit is not None
        if s.inputs_snapshot and s.checkout_identity is not None:
            dirty = changed_paths(repo, s.checkout_identity.head, s.inputs_snapshot)
            clash = sorted(dirty & touched_paths(chosen))
            if clash:
                raise CorralError(
                    f"the task changed {', '.join(clash)}, which had your uncommitted changes "
                    "when it started, so a branch built on your HEAD would lose them; deliver "
                    "to the checkout instead, or commit those changes and start again"
                )
        if head == s.start_commit:
            return result
        return commit_patch(repo, head, patch, message)

    async def _verify_subset(self, entry: SessionEntry, patch: str) -> list[CheckResult]:
        """Re-run the contract on the start commit plus only the approved part."""
        s = entry.session
        assert s.contract is not None and s.start_commit is not None
        self._emit(
            entry,
            EventKind.PLAN_TEXT,
            {"text": "Re-running the contract on the approved part only."},
        )
        contract, captures = s.contract, captures_from(s.contract, s.baseline)

        def prepare(path: Path) -> None:
            git(path, "apply", "--binary", "--whitespace=nowarn", "-", input_text=patch)

        results = await self.run_in_scratch(
            Path(s.repo),
            s.start_commit,
            s.id,
            lambda path: run_contract(
                contract,
                path,
                captures=captures,
                timeout_ceiling=self.config.max_check_timeout_secs,
            ),
            prepare=prepare,
        )
        self._emit(
            entry,
            EventKind.CONTRACT_EVALUATED,
            {
                "by": "runtime",
                "scope": "approved subset",
                "passed": all(r.passed for r in results),
                "results": [r.model_dump(mode="json") for r in results],
            },
        )
        return results

    async def reverify(self, session_id: str) -> list[CheckResult]:
        """Re-run the contract on the worktree as it is now; when green, the
        current tree becomes the reviewed one (a new diff is announced)."""
        entry = self._live.get(session_id)
        if entry is None:
            raise CorralError(self._not_live_approve(session_id))
        s = entry.session
        if s.state is not S.NEEDS_APPROVAL or s.no_change_finding is not None:
            raise CorralError(already_happened(s.id, s.state, S.NEEDS_APPROVAL, "re-verify"))
        results = await self._verify(entry, captures_from(s.contract, s.baseline), None)  # type: ignore[arg-type]
        if not all(r.passed for r in results):
            failing = ", ".join(r.name for r in results if not r.passed)
            raise CorralError(
                f"re-verification failed ({failing}); nothing was delivered. Fix the worktree "
                "and re-verify, or reject"
            )
        await self._announce_diff(entry)
        return results

    async def cancel(self, session_id: str) -> CancelResult:
        entry = self._live.get(session_id)
        if entry is None:
            stored = self._snapshots.get(session_id)
            if stored is None:
                raise CorralError(f"no corral session '{session_id}'")
            if stored.state.is_terminal:
                msg = already_happened(session_id, stored.state, S.RUNNING, "cancel")
            else:
                msg = (
                    f"{label(session_id)} is not running in this corral (state: "
                    f"{stored.state.value}) — nothing to cancel"
                )
            return CancelResult(
                state=stored.state, already_terminal=stored.state.is_terminal, message=msg
            )
        s = entry.session
        if not s.state.is_terminal:
            s.keep_workspace_on_cancel = True
            try:
                self._persist(entry)
            except Exception as exc:  # retention is best effort; the cancel still stops
                log.warning("could not persist retention for %s: %s", s.id, exc)
        entry.cancel_requested = True
        entry.gate.clear()
        pending = [t for t in [*entry.ops, entry.task] if t is not None and not t.done()]
        joined = entry.task is not None
        for t in pending:
            t.cancel()
        if pending:
            await asyncio.wait(pending, timeout=5)
        already_terminal = s.state.is_terminal
        if (joined or s.state in (S.CREATED, S.CONTRACT_PROPOSED)) and (
            not already_terminal or s.state in (S.FAILED, S.ABANDONED)
        ):
            s.execution_stopped = True
        if not already_terminal:
            if s.no_change_finding is not None and s.no_change_finding.resolved_at is None:
                s.no_change_finding.resolved_at = self.clock()
            with contextlib.suppress(Exception):
                self._transition(entry, S.ABANDONED)
        else:
            with contextlib.suppress(Exception):
                self._persist(entry)
        if s.state is S.ABANDONED and self.workspaces is not None:
            self.workspaces.retain(s.worktree, note="cancelled")
        worktree = s.worktree if s.worktree and Path(s.worktree).is_dir() else None
        return CancelResult(
            state=s.state,
            already_terminal=already_terminal,
            worktree=worktree,
            recoverable=s.execution_stopped and worktree is not None,
            message=already_happened(s.id, s.state, S.RUNNING, "cancel")
            if already_terminal
            else None,
        )


def commit_message(
    session: CoderSession,
    verification: list[CheckResult] | None = None,
    *,
    partial: bool = False,
    files: int = 0,
    of: int = 0,
    override: str | None = None,
) -> str:
    """The delivered commit says what was asked, what proved it, and how."""
    results = session.last_check_results if verification is None else verification
    intent = session.intent.strip()
    first = intent.splitlines()[0] if intent else "corral task"
    subject = first if len(first) <= 72 else first[:71] + "…"
    checks = {c.name: c for c in (session.contract.checks if session.contract else [])}
    lines = [subject, "", intent, ""]
    if session.contract and session.contract.description.strip():
        lines += ["Contract: " + session.contract.description.strip().splitlines()[0], ""]
    scope = "the approved part of the change" if partial else "the change"
    lines.append(f"Verified by corral: the runtime re-ran every check on {scope}:")
    for r in results:
        cmd = f": {checks[r.name].command.strip()}" if r.name in checks else ""
        lines.append(f"  {'PASS' if r.passed else 'FAIL'} {r.name}{cmd}")
    lines += [
        "",
        f"Corral-Session: {session.id}",
        f"Corral-Engine: {session.engine_ran or session.engine}",
    ]
    lines += [f"Corral-Check: {r.name} {'pass' if r.passed else 'fail'}" for r in results]
    if partial:
        lines.append(f"Corral-Scope: partial ({files} of {of} files approved)")
    if override:
        lines.append(f"Corral-Override: {override}")
    return "\n".join(lines) + "\n"
