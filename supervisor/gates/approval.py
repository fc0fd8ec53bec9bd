"""Gate 2: the operator decides on a verified result. A diff is approved
(delivered whole or in part, to a new branch or to the checkout's working
files) or rejected; a no-change finding is accepted or rejected. Cancel, at
any point of a session's life, also ends here.

Delivery uses exactly the tree that was verified (the session's
`review_tree`), never the live worktree: the diff shown, the files and hunks
offered for partial approval, the part re-verified on its own and both
deliveries are all read from that tree object.

Approve after the worktree changed since verification: the verified tree —
what the operator reviewed — is delivered, and the reply says so, naming the
paths that changed; those later changes are not delivered and the worktree is
kept with them. Refusing would only make the operator re-verify to deliver
what they already saw; to deliver the later content, re-verify (`v`) first.

A verified change that changed how it is judged (`judge_changes`: a judge
file edited, deleted or added, or added code reaching into the test harness)
is never delivered by an approve that did not say it saw that
(`accept_judge_changes`): `--yes`, `--on-question approve` and the board's
quick approve cannot deliver it; the diff screen and `corral approve
--accept-judge-changes` can, after showing it.

A verified change whose checks passed only on an immediate re-run (a test
failed, then passed: `CheckResult.flaky`) is held the same way, here, so
every path is held alike (the board, `corral approve`, the control socket,
`corral run`): only an approve that says a person saw it (`accept_flaky`)
delivers it, since work rigged to fail once and pass on its re-run cannot be
told apart from a timing flake. The refusal is a `FlakyPassHeld` naming the
tests; a delivery tree checked again at approve (a moved HEAD, the
checkout, a part) that passes only on its re-run is held alike. Who
accepted it is said in the session's events.

A refused approve, of either kind, leaves the session needing a person
whoever asked: its board row's needs-you reason becomes the hold
(`approval_held`: what is held, the command that accepts it), so an approve
decided ahead (`corral run --deliver`) that the gate refuses is heard by the
notifier as a need of its own; a new verification clears it.

Delivery is idempotent: a branch that already holds this session's result
(written before a crash could record it) completes the session as delivered
without writing again; a checkout that already holds it says
`already_applied`.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..contracts.hidden import HiddenStore, hidden_tally
from ..contracts.judge import judge_sentence
from ..errors import CorralError, FlakyPassHeld, JudgeChangeHeld
from ..events import (
    DiffReadyData,
    ErrorData,
    FindingProposedData,
    FindingResolvedData,
    MergeCompletedData,
    PlanTextData,
)
from ..faults import fault_point
from ..git.delivery import (
    DeliveryRefused,
    apply_to_checkout,
    changed_paths,
    create_branch,
    delivered_commit,
    patch_tree,
    plan_checkout,
)
from ..git.patches import FilePatch, Selection, build_patch, parse_patch, validate_selection
from ..git.pins import check_worktree
from ..git.repo import head_commit, work_outside_tree
from ..git.result_tree import Change, changes_between, compose, shown
from ..git.run import MAX_OUTPUT_BYTES, GitError, WorktreeMetadataChanged, git
from ..git.trees import commit_tree, snapshot_tree, tree_patch
from ..git.type_changes import refuse_symlinks_in_the_way
from ..models import (
    ApproveResult,
    CancelResult,
    CheckResult,
    CoderSession,
    NoChangeFinding,
)
from ..session.identity import is_dormant
from ..session.live import LiveSession
from ..session.registry import SessionRegistry
from ..states import (
    ApprovalKind,
    CoderState,
    LoopFailure,
    already_happened,
    failure_kind_for,
    label,
    short_id,
)
from ..workspaces import Workspaces
from .attestation import (
    AttestationError,
    approver,
    attest,
    git_config,
    publishes_hidden_checks,
    signing_key,
    statement_for,
)
from .verifier import Verification, Verifier, name_paths

S = CoderState
log = logging.getLogger("corral.supervisor")

# A cancel answers within this long even when a task does not end on being
# cancelled; the abandoned session's agent is stopped all the same.
CANCEL_WAIT_SECS = 4.0

DELIVERED_VERIFIED = (
    "the worktree of {name} changed after verification ({paths}); what was delivered is the "
    "verified tree you reviewed, without those changes. They were not delivered and are kept "
    "in {worktree}"
)
NOT_CARRIED = (
    "the worktree of {name} holds files inside submodule directory {paths}, which corral "
    "neither shows nor delivers; they are not in any delivery, so the worktree is kept in "
    "{worktree} — move that work into the submodule's own repository by hand"
)
NO_VERIFIED_TREE = (
    "{name} has no verified tree to deliver (it was verified by an older corral or its tree "
    "is gone); re-verify it (v), then approve"
)
JUDGE_CHANGED = (
    "{name} is not delivered: {what}. A person must look at that first: open its diff in the "
    "console (it is listed there) and approve with `a`, or run `corral approve {sid} "
    "--accept-judge-changes` after reading `corral get {sid}`"
)
FLAKY_HELD = (
    "{name} is not delivered, it waits at approval for a person: {what}. Read it (`corral "
    "get {sid}`), then `corral approve {sid} --accept-flaky`, or review its diff in the "
    "console and approve there, or reject it"
)
# the row's needs-you sentence while the gate holds a diff (one sentence: what
# is held, the command that accepts it); a notice carries it too
JUDGE_HOLD = (
    "held: the work changed how it is judged; `corral approve {sid} --accept-judge-changes` "
    "delivers it once you have read it"
)
FLAKY_HOLD = (
    "held: {what} passed only on a re-run; `corral approve {sid} --accept-flaky` delivers it "
    "once you have read it"
)
NOT_FROM_CHECKOUT = (
    "this task does not start from your checkout's current revision (it names its own base, "
    "or the checkout was dirty in a way corral could not capture), so its changes cannot be "
    "applied there. Publish a branch instead"
)


class ApprovalGate:
    def __init__(
        self, registry: SessionRegistry, verifier: Verifier, workspaces: Workspaces
    ) -> None:
        self._registry = registry
        self._verifier = verifier
        self._workspaces = workspaces

    # -- a verified result arrives from the run loop --------------------------------------

    async def present_diff(self, live: LiveSession) -> None:
        """Announce the verified change and wait for the operator, watching the
        worktree for later changes. Raises `CorralError` (and changes nothing)
        when the diff cannot be produced."""
        await self._announce_diff(live)
        self._registry.transition(live, S.NEEDS_APPROVAL)
        self._verifier.watch(live)

    def present_finding(self, live: LiveSession, finding: NoChangeFinding) -> None:
        """Announce a no-change finding and wait for the operator."""
        live.session.no_change_finding = finding
        self._registry.emit(live, FindingProposedData(finding=finding.model_copy(deep=True)))
        self._registry.transition(live, S.NEEDS_APPROVAL)

    async def _announce_diff(self, live: LiveSession) -> None:
        """Describe the verified tree's change: exactly what the operator will
        approve (the review identity is that tree)."""
        s = live.session
        ws = live.workspace
        assert ws is not None and s.start_commit is not None and s.review_tree is not None
        diff = await asyncio.to_thread(ws.diff, s.start_commit, s.review_tree)
        s.diff = diff
        self._registry.persist(live)
        self._registry.emit(
            live,
            DiffReadyData(
                stat=diff.stat,
                patch=diff.patch,
                patch_truncated=diff.patch_truncated,
                patch_full_bytes=diff.patch_full_bytes,
                changed_paths=len(diff.files),
                files=list(diff.files),
            ),
        )

    # -- the operator looks, re-verifies, decides ------------------------------------------

    async def review_files(self, session_id: str) -> list[FilePatch]:
        """The verified change as files and hunks, for partial approval (read
        from the verified tree, not from the size-capped event)."""
        live = self._waiting(session_id)
        s = live.session
        if s.state is not S.NEEDS_APPROVAL or not s.start_commit:
            raise CorralError(f"{session_id[-8:]} has no diff waiting for approval")
        if s.review_tree is None:
            raise CorralError(NO_VERIFIED_TREE.format(name=label(s.id)))
        patch = await asyncio.to_thread(tree_patch, Path(s.repo), s.start_commit, s.review_tree)
        _selectable(patch)
        return parse_patch(patch)

    async def checkout_clashes(self, session_id: str) -> list[str]:
        """The files the verified change writes that the operator's checkout
        holds otherwise than the task's start (their uncommitted lines, or a
        change since): named in the question before a checkout delivery, which
        refuses them. Read only: nothing is written to the checkout."""
        live = self._waiting(session_id)
        s = live.session
        if s.state is not S.NEEDS_APPROVAL or not s.start_commit or s.review_tree is None:
            return []
        repo, start, tree = Path(s.repo), s.start_commit, s.review_tree
        changes = await asyncio.to_thread(changes_between, repo, start, tree)
        paths = [c.path for c in changes]
        plan = await asyncio.to_thread(plan_checkout, repo, start, tree, paths)
        return plan.conflicts

    async def reverify(self, session_id: str) -> list[CheckResult]:
        """Re-run the contract on the worktree as it is now; when green and
        stable, the current tree becomes the verified one (a new diff is
        announced). Otherwise the earlier verified tree and its results stay
        what approve delivers."""
        live = self._waiting(session_id)
        s = live.session
        if s.state is not S.NEEDS_APPROVAL or s.no_change_finding is not None:
            raise CorralError(already_happened(s.id, s.state, S.NEEDS_APPROVAL, "re-verify"))
        verified = list(s.last_check_results)
        verification = await self._verifier.verify(live)
        if not verification.passed:
            s.last_check_results = verified  # they belong to the verified tree
            self._registry.persist(live)
            raise CorralError(self._reverify_refused(live, verification))
        await self._verifier.accept(live, verification)
        await self._announce_diff(live)
        self._registry.notify(s.id)
        return verification.results

    def _reverify_refused(self, live: LiveSession, verification: Verification) -> str:
        s = live.session
        kept = (
            "approve still delivers the tree verified earlier"
            if s.review_tree is not None
            else "nothing can be delivered until it passes"
        )
        if not verification.stable:
            return (
                f"the worktree of {label(s.id)} kept changing while the checks ran "
                f"({name_paths(verification.moved)}), so nothing was re-verified and {kept}. "
                "Stop what is writing there (the agent, a process it left running, or typing "
                "in its pane), then re-verify"
            )
        failing = ", ".join(r.name for r in verification.results if not r.passed)
        return (
            f"re-verification failed ({failing}); nothing was delivered and {kept}. Fix the "
            "worktree and re-verify, or reject"
        )

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
        accept_judge_changes: bool = False,
        accept_flaky: bool = False,
    ) -> ApproveResult:
        """Deliver the verified diff (to a new branch `corral/<id>` or to the
        checkout's working files), accept a finding, or reject.

        `selection` approves part of the diff (path → hunk indices, None for a
        whole file); the contract is re-run on that part first and it is
        delivered only when green, unless `override_red` (recorded in the
        commit). The unapproved rest stays in the worktree unless
        `discard_rest`. A change that changed how it is judged is delivered
        only with `accept_judge_changes` (a person saw it), and one whose
        checks passed only on their immediate re-run only with
        `accept_flaky` (a person saw that)."""
        if delivery not in (None, "branch", "checkout"):
            raise CorralError(f'unknown delivery destination "{delivery}"; use checkout or branch')
        live = self._waiting(session_id)
        s = live.session
        if s.state is not S.NEEDS_APPROVAL:
            action = "approve" if approve else "reject"
            raise CorralError(already_happened(s.id, s.state, S.NEEDS_APPROVAL, action))
        finding = (
            s.no_change_finding if live.attention.approval_kind is ApprovalKind.FINDING else None
        )
        if not approve:
            return self._reject(live, finding, comment)
        self._refuse_changed_git_metadata(live)
        if finding is not None:
            if not accept_finding:
                raise CorralError(
                    f"{label(s.id)} is waiting on a no-change finding, not a diff: pass "
                    "`accept_finding: true` to accept it (nothing is published) or "
                    "`approve: false` to abandon"
                )
            return await self._accept_finding(live, finding, comment)
        if accept_finding:
            raise CorralError(
                f"{label(s.id)} has a diff waiting, not a no-change finding; `accept_finding` "
                "only accepts a finding"
            )
        blocking = [c for c in s.judge_changes if c.blocks]
        if blocking and not accept_judge_changes:
            self._hold(live, JUDGE_HOLD.format(sid=short_id(s.id)))
            raise JudgeChangeHeld(
                JUDGE_CHANGED.format(
                    name=label(s.id), what=judge_sentence(blocking), sid=short_id(s.id)
                )
            )
        if blocking:
            self._registry.emit(
                live,
                PlanTextData(
                    text=f"Approved by a person who was shown: {judge_sentence(blocking)}"
                ),
            )
        flaky = s.flaky_passes()
        if flaky and not accept_flaky:
            self._hold(live, FLAKY_HOLD.format(what=_checks(flaky), sid=short_id(s.id)))
            raise FlakyPassHeld(
                FLAKY_HELD.format(name=label(s.id), what=flaky_sentence(flaky), sid=short_id(s.id))
            )
        return await self._deliver(
            live,
            delivery=delivery or "branch",
            selection=selection,
            override_red=override_red,
            discard_rest=discard_rest,
            accept_flaky=accept_flaky,
        )

    def _hold(self, live: LiveSession, sentence: str) -> None:
        """The gate refused an approve: the session needs a person now,
        whoever asked (`corral run --deliver` decided the approve, not this),
        so its row says the hold as its needs-you reason and the notifier
        hears it as an edge of its own."""
        if live.attention.held != sentence:
            live.attention.held = sentence
            self._registry.board.notify(live.id)

    def _refuse_changed_git_metadata(self, live: LiveSession) -> None:
        """A worktree whose git pointers were changed is never worked on
        again: the session fails with that sentence, nothing is delivered."""
        s = live.session
        if not s.worktree or not Path(s.worktree).is_dir():
            return
        try:
            check_worktree(s.worktree)
        except WorktreeMetadataChanged as exc:
            s.error, s.failure_kind = str(exc), failure_kind_for(LoopFailure.EXECUTION)
            self._registry.emit(live, ErrorData(message=str(exc)))
            self._registry.transition(live, S.FAILED)
            self._workspaces.retain(s.worktree, note=f"failed: {exc}"[:300])
            raise CorralError(f"{label(s.id)} failed and nothing was delivered: {exc}") from exc

    def _reject(
        self, live: LiveSession, finding: NoChangeFinding | None, comment: str | None
    ) -> ApproveResult:
        """Abandon the session; its worktree is kept for a day."""
        s = live.session
        if finding is not None:
            finding.resolved_at = self._registry.clock()
            finding.resolver_comment = comment or "rejected at the approval gate"
            self._registry.emit(live, FindingResolvedData(accepted=False, comment=comment))
        elif comment:
            self._registry.emit(live, PlanTextData(text=f"Rejected: {comment}"))
        s.keep_workspace_on_cancel = True
        s.reject_comment = comment
        self._registry.transition(live, S.ABANDONED)
        self._workspaces.retain(s.worktree, rejected=True, note="rejected at the approval gate")
        return ApproveResult(state=s.state)

    async def _accept_finding(
        self, live: LiveSession, finding: NoChangeFinding, comment: str | None
    ) -> ApproveResult:
        """The operator agrees nothing needed changing: reported, nothing published."""
        s = live.session
        finding.verification = "human_approved"
        finding.resolved_at = self._registry.clock()
        finding.resolver_comment = comment
        self._registry.emit(live, FindingResolvedData(accepted=True, comment=comment))
        self._registry.transition(live, S.REPORTED)
        reply = ApproveResult(state=s.state)
        outside = (
            await asyncio.to_thread(work_outside_tree, Path(s.worktree), s.start_commit)
            if s.worktree and s.start_commit and Path(s.worktree).is_dir()
            else []
        )
        if outside:
            reply.note = NOT_CARRIED.format(
                name=label(s.id), paths=name_paths(outside), worktree=s.worktree
            )
            self._registry.emit(live, PlanTextData(text=reply.note))
            self._workspaces.retain(
                s.worktree, note="holds files inside a submodule directory, not delivered"
            )
        else:
            await asyncio.to_thread(self._workspaces.remove, s.worktree, force=True)
        return reply

    # -- delivery ------------------------------------------------------------------------

    async def _deliver(
        self,
        live: LiveSession,
        *,
        delivery: str,
        selection: Selection | None,
        override_red: bool,
        discard_rest: bool,
        accept_flaky: bool = False,
    ) -> ApproveResult:
        """Deliver (part of) the verified tree; what changed in the worktree
        since verification stays there and is named in the reply. The tree
        the delivery writes is verified on its own first when it is not the
        tree the checks already ran on (another base, the operator's files)."""
        s = live.session
        assert s.worktree and s.start_commit and s.contract is not None
        repo, start, tree = Path(s.repo), s.start_commit, s.review_tree
        if delivery == "checkout" and s.checkout_identity is None:
            raise CorralError(NOT_FROM_CHECKOUT)
        if tree is None:
            raise CorralError(NO_VERIFIED_TREE.format(name=label(s.id)))
        later = await self._verifier.changes_since_verification(s)
        self._verifier.note_changes(live, later)
        chosen_tree, partial, patch = tree, False, ""
        files_counted = (0, 0)
        if selection is not None:
            full = await asyncio.to_thread(tree_patch, repo, start, tree)
            _selectable(full)
            files = parse_patch(full)
            problems = validate_selection(files, selection)
            if problems:
                raise CorralError("cannot approve that selection: " + "; ".join(problems))
            patch = build_patch(files, selection)
            if not patch.strip():
                raise CorralError(
                    "nothing is selected: select at least one file or hunk, or reject"
                )
            partial = patch != full
            if partial:
                chosen_tree = await asyncio.to_thread(patch_tree, repo, start, patch)
                files_counted = (len(parse_patch(patch)), len(files))
        changes = await asyncio.to_thread(changes_between, repo, start, chosen_tree)
        target = await asyncio.to_thread(_target, s, delivery, changes)
        verification = list(s.last_check_results)
        override: str | None = None
        if target.tree != tree or partial:
            verification = await self._verify_target(live, target, partial=partial, patch=patch)
            failing = [r.name for r in verification if not r.passed]
            if failing and not override_red:
                raise CorralError(
                    await asyncio.to_thread(_target_fails, s, target, failing, partial=partial)
                )
            if failing:
                override = "delivered with failing checks: " + ", ".join(failing)
            flaky = [r for r in verification if r.flaky and r.passed]
            if flaky and not accept_flaky:
                what = f"on {target.scope}, {_checks(flaky)}"
                self._hold(live, FLAKY_HOLD.format(what=what, sid=short_id(s.id)))
                raise FlakyPassHeld(
                    FLAKY_HELD.format(
                        name=label(s.id),
                        what=f"on {target.scope}, {flaky_sentence(flaky)}",
                        sid=short_id(s.id),
                    )
                )
        message = commit_message(
            s,
            verification,
            partial=partial,
            files=files_counted[0],
            of=files_counted[1],
            override=override,
        )
        config = await asyncio.to_thread(git_config, repo)
        sign = signing_key(config) is not None
        result = await self._commit(repo, chosen_tree, start, message, sign=sign)
        if partial:
            fault_point("delivery:partial-commit")
        await asyncio.to_thread(git, repo, "update-ref", f"refs/corral/results/{s.id}", result)
        fault_point("delivery:result-ref")
        reply = ApproveResult(
            state=s.state, delivery=delivery, partial=partial, verification=verification
        )
        if delivery == "checkout":
            paths = [c.path for c in changes]
            already = await asyncio.to_thread(
                apply_to_checkout, repo, target.base, target.tree, paths
            )
            fault_point("delivery:checkout")
            s.result_branch, s.result_commit, s.result_delivery = None, result, "checkout"
            reply.repo, reply.commit, reply.already_applied = str(repo), result, already
            self._registry.emit(
                live,
                PlanTextData(
                    text=(
                        f"Changes applied to {repo}. HEAD and the staged index are unchanged."
                        if not already
                        else f"The change was already applied in {repo}."
                    )
                ),
            )
        else:
            branch = f"corral/{short_id(s.id)}"
            commit = await asyncio.to_thread(delivered_commit, repo, branch, s.id, start, changes)
            if commit is None:
                commit = (
                    result
                    if target.base == start and target.tree == chosen_tree
                    else await self._commit(repo, target.tree, target.base, message, sign=sign)
                )
                await asyncio.to_thread(create_branch, repo, branch, commit)
                fault_point("delivery:branch")
            else:
                reply.already_applied = True
                self._registry.emit(
                    live,
                    PlanTextData(
                        text=(
                            f"Branch {branch} already holds this session's result (delivered "
                            "before corral could record it); nothing was written again."
                        )
                    ),
                )
            s.result_branch, s.result_commit, s.result_delivery = branch, commit, "branch"
            reply.branch, reply.commit = branch, commit
            self._registry.emit(live, MergeCompletedData(branch=branch, commit=commit))
        self._registry.emit(live, PlanTextData(text=target.checked_on(verification)))
        accepted = [r for r in verification if r.flaky and r.passed]
        if accepted:  # said once it landed: who let a pass that needed a re-run through
            who = approver(config)["user"]
            self._registry.emit(live, PlanTextData(text=flaky_accepted(accepted, who)))
        await self._attest(
            live,
            config,
            commit=reply.commit or result,
            tree=target.tree,
            results=verification,
            delivery=delivery,
            branch=reply.branch,
            override=override,
            partial=partial,
        )
        s.result_scope = "partial" if partial else "full"
        s.delivery_override = override
        self._registry.transition(live, S.MERGED)
        reply.state = s.state
        outside = await asyncio.to_thread(work_outside_tree, Path(s.worktree), tree)
        notes: list[str] = []
        if later:
            notes.append(
                DELIVERED_VERIFIED.format(
                    name=label(s.id), paths=name_paths(later), worktree=s.worktree
                )
            )
        if outside:
            notes.append(
                NOT_CARRIED.format(name=label(s.id), paths=name_paths(outside), worktree=s.worktree)
            )
        if notes:
            reply.note = ". ".join(notes)
            for text in notes:
                self._registry.emit(live, PlanTextData(text=text))
            self._workspaces.retain(
                s.worktree,
                note=(
                    "holds changes made after verification, not delivered"
                    if later
                    else "holds files inside a submodule directory, not delivered"
                ),
            )
        elif partial and not discard_rest:
            self._workspaces.retain(s.worktree, note="holds the part of the change not approved")
        else:
            await asyncio.to_thread(self._workspaces.remove, s.worktree, force=True)
        return reply

    async def _commit(self, repo: Path, tree: str, parent: str, message: str, *, sign: bool) -> str:
        """A delivery commit, signed when the operator's git signs commits."""
        try:
            return await asyncio.to_thread(commit_tree, repo, tree, parent, message, sign=sign)
        except GitError as exc:
            if not sign:
                raise
            raise CorralError(
                f"signing the delivery commit failed ({exc}); nothing was delivered. Fix "
                "git's signing setup (user.signingkey, gpg.format, your ssh-agent or "
                "gpg-agent), or run `git config corral.sign false` to deliver unsigned, then "
                "approve again"
            ) from exc

    async def _attest(
        self, live: LiveSession, config: dict[str, str], *, commit: str, **facts: Any
    ) -> None:
        """Write the delivery's attestation (docs/attestation.md) beside its
        commit. The delivery has landed by now: a note that cannot be written
        is said, and the delivery stands without one."""
        s = live.session
        publish = s.contract is not None and s.contract.hidden_checks
        hidden_files = (
            HiddenStore(self._registry.state_dir).get
            if publish and publishes_hidden_checks(config)
            else None
        )

        def write() -> str:
            statement = statement_for(
                s, commit=commit, approved_by=approver(config), hidden_files=hidden_files, **facts
            )
            return attest(Path(s.repo), commit, statement, config)

        try:
            said = await asyncio.to_thread(write)
        except (AttestationError, GitError, CorralError) as exc:
            s.attestation = None
            text = f"No attestation was written for {commit[:12]} ({exc}); the delivery stands."
            self._registry.emit(live, PlanTextData(text=text))
            return
        s.attestation = said
        self._registry.emit(live, PlanTextData(text=said[:1].upper() + said[1:] + "."))

    async def _verify_target(
        self, live: LiveSession, target: DeliveryTarget, *, partial: bool, patch: str
    ) -> list[CheckResult]:
        """The checks on the tree the delivery writes. A session on another
        host re-runs only an approved part, there (its tree was verified there)."""
        s = live.session
        if s.host:
            if not partial:
                return list(s.last_check_results)
            assert s.start_commit is not None
            selected = await asyncio.to_thread(patch_tree, Path(s.repo), s.start_commit, patch)
            return await self._verifier.verify_selection(live, selected)
        scope = "approved subset" if partial else target.scope
        return await self._verifier.verify_tree(live, target.tree, target.parent, scope=scope)

    # -- cancel, from any state ------------------------------------------------------------

    async def cancel(self, session_id: str) -> CancelResult:
        """Stop everything the session runs (within 5 s) and abandon it; the
        worktree is kept. A dormant session is abandoned too (never revived).
        A finished session answers that it already ended."""
        registry = self._registry
        live = registry.get_live(session_id)
        dormant = registry.stored(session_id)
        if live is None and dormant is not None and is_dormant(dormant):
            live = registry.register(dormant)  # a dormant session is abandoned like a live one
        if live is None:
            stored = registry.stored(session_id)
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
        s = live.session
        if not s.state.is_terminal:
            s.keep_workspace_on_cancel = True
            try:
                registry.persist(live)
            except Exception as exc:  # retention is best effort; the cancel still stops
                log.warning("could not persist retention for %s: %s", s.id, exc)
        live.cancel_requested = True
        live.question.clear()
        pending = [t for t in [*live.ops, live.task] if t is not None and not t.done()]
        joined = live.task is not None
        for t in pending:
            t.cancel()
        if pending:
            _done, stuck = await asyncio.wait(pending, timeout=CANCEL_WAIT_SECS)
            if stuck:  # the abandonment below still stops the agent's processes
                log.warning(
                    "%d task(s) of %s did not end within %.0f s of the cancel",
                    len(stuck),
                    s.id,
                    CANCEL_WAIT_SECS,
                )
        already_terminal = s.state.is_terminal
        if (joined or s.state in (S.CREATED, S.CONTRACT_PROPOSED)) and (
            not already_terminal or s.state in (S.FAILED, S.ABANDONED)
        ):
            s.execution_stopped = True
        if not already_terminal:
            if s.no_change_finding is not None and s.no_change_finding.resolved_at is None:
                s.no_change_finding.resolved_at = registry.clock()
            try:
                registry.transition(live, S.ABANDONED)
            except Exception as exc:  # the work is stopped; its new state is not stored
                log.warning("could not store the cancellation of %s: %s", s.id, exc)
                raise CorralError(
                    f"{label(s.id)} was stopped, but its cancellation could not be saved "
                    f"({exc}); free the state dir's disk or fix it, then cancel it again"
                ) from exc
        else:
            try:
                registry.persist(live)
            except Exception as exc:
                log.warning("could not store %s after a cancel: %s", s.id, exc)
        if s.state is S.ABANDONED:
            self._workspaces.retain(s.worktree, note="cancelled")
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

    def _waiting(self, session_id: str) -> LiveSession:
        """The live session, or why a session that is not live cannot be approved."""
        registry = self._registry
        live = registry.get_live(session_id)
        if live is not None:
            return live
        stored = registry.stored(session_id)
        if stored is None:
            raise CorralError(f"no corral session '{session_id}'")
        if stored.state.is_terminal:
            raise CorralError(
                already_happened(session_id, stored.state, S.NEEDS_APPROVAL, "approve")
            )
        name = label(session_id)
        if stored.worktree and Path(stored.worktree).is_dir():
            raise CorralError(
                f"{name} did not survive a restart as a live session (state: "
                f"{stored.state.value}) — it cannot be approved here, but its worktree is "
                f"intact at {stored.worktree}; review and merge it by hand"
            )
        raise CorralError(
            f"{name} is not running in this corral (state: {stored.state.value}) — nothing "
            "to approve"
        )


@dataclass(frozen=True)
class DeliveryTarget:
    """Where a delivery writes and the exact tree it produces there."""

    kind: str  # "branch" or "checkout"
    base: str  # the branch's parent commit, or the tree of the checkout's files
    tree: str  # the base with the change in place: what is written, and checked
    parent: str  # the commit a verification tree of `tree` is made on

    @property
    def scope(self) -> str:
        if self.kind == "branch":
            return f"the branch's tree (HEAD {self.base[:12]} plus the change)"
        return "your checkout's files plus the change"

    def checked_on(self, results: list[CheckResult]) -> str:
        passed = sum(r.passed for r in results)
        where = (
            f"the delivered branch's tree ({self.tree[:12]}: HEAD {self.base[:12]} plus the change)"
            if self.kind == "branch"
            else f"what your checkout now holds ({self.tree[:12]}: your checkout's files plus "
            "the change)"
        )
        return f"The checks ({passed} of {len(results)} passing) ran on exactly {where}."


def _target(s: CoderSession, delivery: str, changes: list[Change]) -> DeliveryTarget:
    """The tree a delivery would write (blocking): for a branch, the
    checkout's current HEAD with the change in place; for the checkout, its
    current files (tracked and untracked, ignored ones excepted) with the
    change in place. Refused, with nothing written, where the base holds
    something else than the task started from on a path the change writes."""
    repo = Path(s.repo)
    assert s.start_commit is not None
    start = s.start_commit
    if delivery == "checkout":
        # a path written through the operator's symlink would replace it: refused first
        refuse_symlinks_in_the_way(repo, [c.path for c in changes])
        files = snapshot_tree(repo)
        composed = compose(repo, files, start, changes)
        if composed.conflicts:
            raise DeliveryRefused(
                "you changed " + ", ".join(shown(p) for p in composed.conflicts) + " since the "
                "task started, so its change was not applied to your checkout (nothing was "
                "modified); deliver to a branch instead, or revert those files and approve again"
            )
        return DeliveryTarget("checkout", files, composed.tree, start)
    head = head_commit(repo)
    assert head is not None
    composed = compose(repo, head, start, changes)
    if composed.conflicts:
        dirty: set[str] = set()
        if s.inputs_snapshot and s.checkout_identity is not None:
            dirty = changed_paths(repo, s.checkout_identity.head, s.inputs_snapshot)
        clash = sorted(set(composed.conflicts) & dirty)
        if clash:
            raise CorralError(
                f"the task changed {', '.join(shown(p) for p in clash)}, which had your "
                "uncommitted changes when it started, so a branch built on your HEAD would "
                "lose them; deliver to the checkout instead, or commit those changes and start "
                "again"
            )
        raise DeliveryRefused(
            f"the change does not apply on your HEAD {head[:12]}: it and the task both changed "
            + ", ".join(shown(p) for p in composed.conflicts)
            + "; nothing was delivered"
        )
    return DeliveryTarget("branch", head, composed.tree, head)


def flaky_sentence(results: list[CheckResult]) -> str:
    """What a person accepts: the checks that passed only on their immediate
    re-run and the tests that failed first (a hidden check's tests are not
    named: they are counted, as everywhere the agent could read)."""
    shown = [t for r in results if not r.hidden for t in r.flaky]
    hidden = sum(len(r.flaky) for r in results if r.hidden)
    named = ", ".join(shown[:5]) + (f" and {len(shown) - 5} more" if len(shown) > 5 else "")
    if hidden:
        named += (", and " if named else "") + f"{hidden} test(s) of hidden checks"
    checks = ", ".join("a hidden check" if r.hidden else r.name for r in results)
    word = "check" if len(results) == 1 else "checks"
    return (
        f"{word} {checks} passed only on an immediate re-run ({named} failed, then passed: "
        "flaky, or work rigged to fail once)"
    )


def _checks(results: list[CheckResult]) -> str:
    """`check tests`, `checks a, b`: the checks a hold names (a hidden one unnamed)."""
    names = ", ".join("a hidden check" if r.hidden else r.name for r in results)
    return f"{'check' if len(results) == 1 else 'checks'} {names}"


def flaky_accepted(results: list[CheckResult], who: str) -> str:
    """The journal's word for who delivered a flaky pass: the operator (approve
    is a person's call, refused to agents), acknowledging exactly this."""
    return (
        f"Delivered on the acknowledgement of the operator ({who}), who was shown that "
        f"{flaky_sentence(results)}"
    )


def _selectable(patch: str) -> None:
    """A change whose patch text is larger than corral reads from git cannot
    be split into files and hunks; it can still be approved whole."""
    if len(patch) >= MAX_OUTPUT_BYTES:
        raise CorralError(
            f"the change's patch is over {MAX_OUTPUT_BYTES // (1024 * 1024)} MiB, more than "
            "corral splits into files and hunks; approve it whole (delivery does not go "
            "through the patch) or reject it"
        )


def _target_fails(
    s: CoderSession, target: DeliveryTarget, failing: list[str], *, partial: bool
) -> str:
    """Why a delivery's own tree is refused (blocking: it may read git)."""
    names = ", ".join(failing)
    if partial:
        return (
            f"the approved part fails the contract ({names}); nothing was "
            "delivered. Approve more of the change, change the selection, or override "
            "(the override is recorded in the commit)"
        )
    said = (
        f"the checks fail on {target.scope} ({names}), the tree this delivery would write "
        f"({target.tree[:12]}); nothing was delivered."
    )
    if target.kind == "branch" and s.inputs_snapshot and s.checkout_identity is not None:
        repo = Path(s.repo)
        missing = changes_between(repo, s.checkout_identity.head, s.inputs_snapshot)
        if missing:
            described = [
                f"{shown(c.path)} ({'untracked' if c.old is None else 'uncommitted'} in your "
                "checkout)"
                for c in missing[:5]
            ]
            more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
            said += (
                " The branch lacks your uncommitted files the task started with, which the "
                f"verified tree has: {', '.join(described)}{more}. Deliver to the checkout "
                "(its tree holds them), or commit them and start again"
            )
            return said
    if target.kind == "checkout":
        return said + " Your checkout changed since the task started; deliver to a branch instead"
    return said + " Your HEAD moved since the task started; rebase by hand or start again"


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
    lines = [subject, ""]
    # the body holds the intent only where the subject does not say it all
    rest = intent if subject != first else "\n".join(intent.splitlines()[1:]).strip()
    if rest:
        lines += [rest, ""]
    description = session.contract.description.strip() if session.contract else ""
    if description:
        lines += [f"Contract: {description}", ""]  # whole: a cut one can end in ':'

    scope = "the approved part of the change" if partial else "the change"
    lines.append(f"Verified by corral: the runtime re-ran every check on {scope}:")
    shown = [r for r in results if not r.hidden]  # a hidden check's name is never written
    for r in shown:
        cmd = f": {checks[r.name].command.strip()}" if r.name in checks else ""
        lines.append(f"  {'PASS' if r.passed else 'FAIL'} {r.name}{cmd}")
    held_back = sum(1 for r in results if r.hidden)
    tally = hidden_tally(results)
    if tally is not None:
        lines.append(f"  and {held_back} hidden check(s) held back from the agent: {tally}")
    lines += [
        "",
        f"Corral-Session: {session.id}",
        f"Corral-Engine: {session.engine_ran or session.engine}",
    ]
    if session.model:
        pinned = " (pinned)" if session.model_pinned else ""
        lines.append(f"Corral-Model: {session.model}{pinned}")
    if session.authored_by:
        lines.append(f"Corral-Authored-By: {', '.join(session.authored_by)}")
    lines += [f"Corral-Model-Use: {line}" for line in session.model_use_lines()]
    lines += [f"Corral-Check: {r.name} {'pass' if r.passed else 'fail'}" for r in shown]
    lines += [  # delivered only on a person's acknowledgement (ApprovalGate.approve)
        f"Corral-Flaky: {r.name} passed on its re-run after {', '.join(r.flaky)} failed"
        for r in shown
        if r.flaky and r.passed
    ]
    if tally is not None:
        lines.append(f"Corral-Hidden-Checks: {held_back} ran, {tally}")
    lines += [f"Corral-Placement: {line}" for line in session.foreman_placements]
    if partial:
        lines.append(f"Corral-Scope: partial ({files} of {of} files approved)")
    if override:
        lines.append(f"Corral-Override: {override}")
    return "\n".join(lines) + "\n"
