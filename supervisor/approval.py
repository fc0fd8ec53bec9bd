"""Gate 2: approve (deliver) or reject a verified diff or a finding, and
cancel at any point."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from .core import S, SupervisorCore, log
from .entry import SessionEntry
from .errors import CorralError
from .models import (
    ApproveResult,
    CancelResult,
    CoderSession,
    EventKind,
)
from .states import (
    ApprovalKind,
    already_happened,
    label,
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
    ) -> ApproveResult:
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
            await self._release_workspace(entry)
            return ApproveResult(state=s.state)
        if accept_finding:
            raise CorralError(
                f"{label(s.id)} has a diff waiting, not a no-change finding; `accept_finding` "
                "only accepts a finding"
            )
        if delivery == "checkout":
            raise CorralError(
                "this task does not start from your checkout's current revision, so its "
                "changes cannot be applied there. Publish a branch instead"
            )
        return await self._deliver_branch(entry)

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

    async def _deliver_branch(self, entry: SessionEntry) -> ApproveResult:
        s = entry.session
        ws = entry.workspace
        assert ws is not None and s.start_commit is not None and s.diff is not None
        current = await asyncio.to_thread(ws.diff, s.start_commit)
        if current.patch != s.diff.patch or current.patch_full_bytes != s.diff.patch_full_bytes:
            raise CorralError(
                f"the worktree of {label(s.id)} changed after verification; nothing was "
                "delivered. Restore it, or cancel and start a follow-up"
            )
        branch = f"corral/{label(s.id).removeprefix('corral-')}"
        commit = await asyncio.to_thread(ws.commit, commit_message(s))
        await asyncio.to_thread(ws.publish_branch, branch, commit)
        s.result_branch = branch
        s.result_commit = commit
        s.result_delivery = "branch"
        self._emit(entry, EventKind.MERGE_COMPLETED, {"branch": branch, "commit": commit})
        self._transition(entry, S.MERGED)
        await self._release_workspace(entry)
        return ApproveResult(state=s.state, branch=branch, commit=commit, delivery="branch")

    async def _release_workspace(self, entry: SessionEntry) -> None:
        if entry.workspace is not None:
            await asyncio.to_thread(entry.workspace.remove)

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


def commit_message(session: CoderSession) -> str:
    """The delivered commit says what was asked and what proved it."""
    first = session.intent.strip().splitlines()[0] if session.intent.strip() else "corral task"
    subject = first if len(first) <= 72 else first[:71] + "…"
    lines = [
        subject,
        "",
        session.intent.strip(),
        "",
        "Verified by corral (the runtime re-ran every check after the agent stopped):",
    ]
    for r in session.last_check_results:
        check = next(
            (c for c in (session.contract.checks if session.contract else []) if c.name == r.name),
            None,
        )
        cmd = f": {check.command.strip()}" if check else ""
        lines.append(f"  {'PASS' if r.passed else 'FAIL'} {r.name}{cmd}")
    lines += [
        "",
        f"Corral-Session: {session.id}",
        f"Corral-Engine: {session.engine_ran or session.engine}",
    ]
    return "\n".join(lines) + "\n"
