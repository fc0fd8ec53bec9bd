"""Gate 1: start a session, draft its contract, baseline it red/green on the
untouched tree, revise it (with compare-and-swap), and confirm it."""

from __future__ import annotations

import asyncio
from pathlib import Path

from .contracts.checks import run_contract
from .contracts.drafting import (
    MAX_REVISION_BYTES,
    DraftingError,
    DraftRequest,
    ReviseRequest,
    apply_check_edit,
    apply_remove,
)
from .core import S, SupervisorCore
from .entry import SessionEntry
from .errors import CorralError
from .git.repo import repo_root, resolve_base
from .models import (
    CheckResult,
    CoderSession,
    EventKind,
    OutcomeContract,
    ReviseResult,
    StartResult,
    contracts_equivalent,
)
from .paths import ensure_private_dir
from .states import (
    FailureKind,
    already_happened,
    label,
)

DRAFTING_CANCELLED = "cancelled while drafting the outcome contract"


REASSESS_FEEDBACK = (
    "Every proposed check already passes before any edit, so none of them proves the work. "
    "Strengthen the weak checks so at least one fails on the untouched tree and passes only "
    "once the intent is done. Use exact byte comparison for exact text and newlines. Do not "
    "add artificial failures."
)


NOT_EXPRESSIBLE = (
    "that request could not be expressed as contract checks, so the contract is unchanged. "
    "Say which command should prove it, or use /check name command"
)


LOST_REVISION_RACE = (
    "another revision of this contract landed while yours was being drafted, so yours was "
    "NOT applied — nothing was overwritten. Re-read the contract and revise again if needed"
)


class ContractGate(SupervisorCore):
    async def start(
        self,
        intent: str,
        repo: Path | str,
        *,
        engine: str = "auto",
        base: str | None = None,
        max_iterations: int | None = None,
        constraints: list[str] | None = None,
        discussion_id: str | None = None,
        wait: bool = True,
        contract: OutcomeContract | None = None,
    ) -> StartResult:
        """Register a session and draft its contract.

        With `wait`, returns once the contract is proposed (or raises if
        drafting failed or was cancelled); otherwise returns at `created`.
        Drafting runs on a supervisor task either way.
        """
        intent = intent.strip()
        if not intent:
            raise CorralError("say what the task should achieve (the intent is empty)")
        root = await asyncio.to_thread(repo_root, repo)
        base_sha = await asyncio.to_thread(resolve_base, root, base)
        resolved, reason = self.engines.resolve(engine)
        ensure_private_dir(self.state_dir)
        self._prune_finished()

        sid = self.id_factory()
        now = self.clock()
        session = CoderSession(
            id=sid,
            repo=str(root),
            intent=intent,
            engine=resolved,
            requested_engine=engine,
            max_iterations=max_iterations or self.config.default_max_iterations,
            created_at=now,
            updated_at=now,
            discussion_id=discussion_id,
            discussion_constraints=list(constraints or []),
            keep_workspace_on_failure=self.config.keep_workspace_on_failure,
        )
        assert self.workspaces is not None
        made = await asyncio.to_thread(self.workspaces.provision, root, sid, base_sha)
        session.worktree = str(made.workspace.path)
        session.base = base_sha
        session.start_commit = made.start_commit
        session.checkout_identity = made.identity
        session.inputs_snapshot = made.identity.snapshot if made.identity else None
        entry = self._register(session)
        entry.workspace = made.workspace
        self._persist(entry)
        self.board.notify(sid)
        self._emit(entry, EventKind.ENGINE_SELECTED, {"engine": resolved, "reason": reason})
        if session.inputs_snapshot:
            self._emit(
                entry,
                EventKind.PLAN_TEXT,
                {
                    "text": (
                        "Starting from a private snapshot of your current files, including uncommitted "
                        "edits. Your checkout and staged index are unchanged; review will show only the "
                        "task's changes."
                    )
                },
            )
        task = self._spawn(entry, self._draft(entry, contract))
        if wait:
            try:
                await asyncio.shield(task)
            except asyncio.CancelledError:
                if not task.cancelled():
                    raise  # our caller was cancelled; drafting goes on
                raise CorralError(DRAFTING_CANCELLED) from None
        return self._start_result(entry)

    def _start_result(self, entry: SessionEntry) -> StartResult:
        s = entry.session
        return StartResult(
            session_id=s.id,
            state=s.state,
            engine=s.engine,
            requested_engine=s.requested_engine,
            engine_ran=s.engine_ran,
            worktree=s.worktree,
            base=s.base,
            contract=s.contract,
            baseline=s.baseline,
            baseline_gates_nothing=s.baseline_gates_nothing,
            journal_path=str(self.journal_path(s.id)),
        )

    def _request(self, entry: SessionEntry) -> DraftRequest:
        s = entry.session
        return DraftRequest(
            session_id=s.id,
            intent=s.intent,
            repo=Path(s.repo),
            worktree=Path(s.worktree) if s.worktree else None,
            constraints=[*s.discussion_constraints, *s.steering_messages],
        )

    async def _draft(self, entry: SessionEntry, given: OutcomeContract | None = None) -> None:
        """Draft the contract, or take the operator's own (`given`, e.g. a
        contract file): it is validated and baselined all the same."""
        s = entry.session
        try:
            contract = given or await self.drafter.draft(self._request(entry))
            problems = contract.validate_contract(
                max_timeout_secs=self.config.max_check_timeout_secs
            )
            if problems:
                raise DraftingError("the drafted contract is invalid: " + "; ".join(problems))
            baseline = await self._baseline(entry, contract)
            gates_nothing = bool(baseline) and all(r.passed for r in baseline)
            if gates_nothing:
                contract, baseline, gates_nothing = await self._reassess(entry, contract, baseline)
        except asyncio.CancelledError:
            raise CorralError(DRAFTING_CANCELLED) from None
        except DraftingError as exc:
            if entry.cancel_requested or s.state.is_terminal:
                raise CorralError(DRAFTING_CANCELLED) from None
            self._fail_drafting(entry, exc)
            raise
        except Exception as exc:  # git, checks, or a drafter bug: nothing was attempted
            if entry.cancel_requested or s.state.is_terminal:
                raise CorralError(DRAFTING_CANCELLED) from None
            self._fail_drafting(entry, DraftingError(str(exc) or type(exc).__name__))
            raise CorralError(f"contract derivation failed: {exc}") from exc
        if entry.cancel_requested or s.state.is_terminal:
            raise CorralError(DRAFTING_CANCELLED)
        s.contract, s.baseline, s.baseline_gates_nothing = contract, baseline, gates_nothing
        self._transition(entry, S.CONTRACT_PROPOSED)
        self._announce_contract(entry)

    def _fail_drafting(self, entry: SessionEntry, exc: DraftingError) -> None:
        s = entry.session
        if exc.auth:
            s.error = (
                "contract drafting needs a sign-in — set the model's credentials (see "
                f"`corral doctor`) and start again: {exc}"
            )
            s.failure_kind = FailureKind.AUTH_REQUIRED
            self._emit(entry, EventKind.AUTH_REQUIRED, {"message": s.error, "wait_secs": 0})
        else:
            s.error = f"contract derivation failed: {exc}"
            s.failure_kind = FailureKind.INFRASTRUCTURE
        s.keep_workspace_on_failure = True
        self._transition(entry, S.FAILED)

    def _announce_contract(self, entry: SessionEntry, *, revised: bool = False) -> None:
        s = entry.session
        assert s.contract is not None
        self._emit(
            entry,
            EventKind.CONTRACT_PROPOSED,
            {"contract": s.contract.model_dump(mode="json"), "revised": revised},
        )
        if s.baseline:
            self._emit(
                entry,
                EventKind.CONTRACT_BASELINE,
                {
                    "results": [r.model_dump(mode="json") for r in s.baseline],
                    "gates_nothing": s.baseline_gates_nothing,
                },
            )

    async def _baseline(self, entry: SessionEntry, contract: OutcomeContract) -> list[CheckResult]:
        """Run every check once on the untouched tree, in a disposable worktree
        so the task's own worktree is never changed by a check."""
        s = entry.session
        assert s.start_commit is not None
        return await self.run_in_scratch(
            Path(s.repo),
            s.start_commit,
            s.id,
            lambda path: run_contract(
                contract, path, timeout_ceiling=self.config.max_check_timeout_secs
            ),
        )

    async def _reassess(
        self, entry: SessionEntry, contract: OutcomeContract, baseline: list[CheckResult]
    ) -> tuple[OutcomeContract, list[CheckResult], bool]:
        """One attempt to strengthen an all-green contract (seed §5.1 step 15)."""
        self._emit(
            entry,
            EventKind.PLAN_TEXT,
            {"text": "The proposed checks already pass before any edits. Checking once…"},
        )
        request = ReviseRequest(
            **vars(self._request(entry)), prior=contract, request=REASSESS_FEEDBACK
        )
        try:
            better = await asyncio.wait_for(self.drafter.revise(request), 180)
        except TimeoutError:
            self._emit(
                entry,
                EventKind.PLAN_TEXT,
                {"text": "Automatic check reassessment timed out; review the checks."},
            )
            return contract, baseline, True
        except DraftingError as exc:
            self._emit(
                entry,
                EventKind.PLAN_TEXT,
                {"text": f"Could not improve the proposed checks automatically: {exc}"},
            )
            return contract, baseline, True
        if better.validate_contract() or contracts_equivalent(better, contract):
            self._emit(
                entry,
                EventKind.PLAN_TEXT,
                {
                    "text": (
                        "Every check still passes before editing: this contract proves nothing yet. "
                        "Add a check that fails now and passes only when the work is done."
                    )
                },
            )
            return contract, baseline, True
        new_baseline = await self._baseline(entry, better)
        gates_nothing = all(r.passed for r in new_baseline)
        text = (
            "The revised checks now include a failing baseline."
            if not gates_nothing
            else "Every check still passes before editing, even after one reassessment."
        )
        self._emit(entry, EventKind.PLAN_TEXT, {"text": text})
        return better, new_baseline, gates_nothing

    async def revise(self, session_id: str, request: str) -> ReviseResult:
        entry = self._entry(session_id)
        text = request.lstrip() if request.lstrip().startswith("/check") else request.strip()
        if not text:
            raise CorralError("say what you want changed about the contract")
        if len(text.encode("utf-8")) > MAX_REVISION_BYTES:
            raise CorralError("A check revision must contain at most 16384 bytes of text.")
        if entry.cancel_requested:
            raise CorralError(DRAFTING_CANCELLED)
        s = entry.session
        if s.state is not S.CONTRACT_PROPOSED:
            raise CorralError(already_happened(s.id, s.state, S.CONTRACT_PROPOSED, "revise"))
        if s.contract is None:
            raise CorralError(f"{label(s.id)} has no proposed contract")
        prior = s.contract
        task = self._spawn(entry, self._revise(entry, prior, text))
        return await asyncio.shield(task)

    def _revision_result(self, entry: SessionEntry, revised: bool, message: str | None):
        s = entry.session
        return ReviseResult(
            state=s.state,
            revised=revised,
            contract=s.contract,
            baseline=s.baseline,
            baseline_gates_nothing=s.baseline_gates_nothing,
            message=message,
        )

    def _reject_revision(self, entry: SessionEntry, text: str, reason: str) -> ReviseResult:
        self._emit(entry, EventKind.CONTRACT_REVISION_REJECTED, {"request": text, "reason": reason})
        return self._revision_result(entry, False, reason)

    async def _revise(self, entry: SessionEntry, prior: OutcomeContract, text: str):
        s = entry.session
        try:
            if text.startswith("/check"):
                redraft = apply_check_edit(prior, text)
            elif text.startswith("/remove"):
                redraft = apply_remove(prior, text)
            else:
                req = ReviseRequest(**vars(self._request(entry)), prior=prior, request=text)
                redraft = await self.drafter.revise(req)
        except DraftingError as exc:
            if exc.auth:
                reason = f"the redraft needs a sign-in — set the model's credentials, then revise again: {exc}"
                result = self._reject_revision(entry, text, reason)
                self._emit(entry, EventKind.AUTH_REQUIRED, {"message": reason, "wait_secs": 0})
                return result
            return self._reject_revision(entry, text, f"the redraft failed: {exc}")
        problems = redraft.validate_contract(max_timeout_secs=self.config.max_check_timeout_secs)
        if problems:
            return self._reject_revision(
                entry, text, "the redrafted contract is invalid: " + "; ".join(problems)
            )
        if contracts_equivalent(redraft, prior) and redraft.description == prior.description:
            return self._reject_revision(entry, text, NOT_EXPRESSIBLE)
        baseline = await self._baseline(entry, redraft)
        if s.state is not S.CONTRACT_PROPOSED or entry.cancel_requested:
            reason = already_happened(s.id, s.state, S.CONTRACT_PROPOSED, "revise")
            self._reject_revision(entry, text, reason)
            raise CorralError(reason)
        if s.contract is not prior:
            return self._reject_revision(entry, text, LOST_REVISION_RACE)
        if len(s.steering_messages) >= 64:
            raise CorralError(check_guidance_limit_message())
        old = (s.contract, s.baseline, s.baseline_gates_nothing, list(s.steering_messages))
        self._transition(entry, S.CONTRACT_PROPOSED)
        s.contract = redraft
        s.baseline = baseline
        s.baseline_gates_nothing = bool(baseline) and all(r.passed for r in baseline)
        s.steering_messages.append(f"Verification request accepted before coding: {text}")
        try:
            self._persist(entry)
        except Exception as exc:
            s.contract, s.baseline, s.baseline_gates_nothing, s.steering_messages = old
            raise CorralError(
                f"Could not save the revised checks and user guidance: {exc}"
            ) from exc
        self._announce_contract(entry, revised=True)
        return self._revision_result(entry, True, None)

    async def confirm(
        self, session_id: str, contract: OutcomeContract | None = None
    ) -> dict[str, str]:
        entry = self._entry(session_id)
        s = entry.session
        if entry.cancel_requested:
            raise CorralError(DRAFTING_CANCELLED)
        if contract is not None:
            problems = contract.validate_contract(
                max_timeout_secs=self.config.max_check_timeout_secs
            )
            if problems:
                raise CorralError("edited contract is invalid: " + "; ".join(problems))
        if s.state is not S.CONTRACT_PROPOSED:
            raise CorralError(already_happened(s.id, s.state, S.CONTRACT_PROPOSED, "confirm"))
        if s.contract is None:
            raise CorralError(f"{label(s.id)} has no proposed contract")
        if contract is not None and not (
            contracts_equivalent(contract, s.contract)
            and contract.description == s.contract.description
        ):
            prior = s.contract
            task = self._spawn(entry, self._baseline(entry, contract))
            try:
                baseline = await asyncio.shield(task)
            except asyncio.CancelledError:
                raise CorralError(DRAFTING_CANCELLED) from None
            if entry.cancel_requested or s.state.is_terminal:
                raise CorralError(DRAFTING_CANCELLED)
            if s.state is not S.CONTRACT_PROPOSED:
                raise CorralError(already_happened(s.id, s.state, S.CONTRACT_PROPOSED, "confirm"))
            if s.contract is not prior:
                raise CorralError(
                    "the proposed contract changed during confirmation; re-read it before "
                    "confirming"
                )
            s.contract = contract
            s.baseline = baseline
            s.baseline_gates_nothing = bool(baseline) and all(r.passed for r in baseline)
            self._persist(entry)
            self._announce_contract(entry, revised=True)
        self._transition(entry, S.CONTRACT_CONFIRMED)
        self._transition(entry, S.RUNNING)
        entry.task = asyncio.get_running_loop().create_task(self._run(entry))
        return {"state": S.RUNNING.value}


def check_guidance_limit_message() -> str:
    from .gates import GUIDANCE_LIMIT

    return GUIDANCE_LIMIT
