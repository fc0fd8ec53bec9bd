"""`Supervisor`: the one public facade over sessions.

start → (draft) → contract_proposed ⇄ revise → confirm → running → runtime
verification → needs_approval → approve | reject, with cancel at any point.

Long work (drafting, baselines, engines, git) runs on supervisor-owned asyncio
tasks, so a caller that goes away (a closed screen) never cancels it. Errors
are `CorralError` carrying the seed's sentences.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from . import retention
from .board import BoardFeed, Watcher
from .config import SupervisorConfig, load_config
from .contracts.checks import captures_from, run_contract
from .contracts.drafting import (
    MAX_REVISION_BYTES,
    ContractDrafter,
    DraftingError,
    DraftRequest,
    ReviseRequest,
    apply_check_edit,
)
from .engines.base import Engine, EngineOutcome, RunContext
from .entry import SessionEntry
from .errors import CorralError
from .events import EventLog, Journal, Subscription
from .gates import ANSWER_FIRST, QuestionCleared, check_guidance
from .git.repo import repo_root, resolve_base
from .git.workspace import GitWorkspace
from .models import (
    ApproveResult,
    CancelResult,
    CheckResult,
    CoderSession,
    EventKind,
    NoChangeFinding,
    OutcomeContract,
    ReviseResult,
    SessionDetail,
    SessionSummary,
    StartResult,
    SubscribeResult,
    contracts_equivalent,
)
from .paths import default_state_dir, ensure_private_dir
from .states import (
    ApprovalKind,
    CoderState,
    FailureKind,
    IllegalTransition,
    LoopFailure,
    already_happened,
    can_transition,
    failure_kind_for,
    label,
    needs_you,
    needs_you_label,
    not_live_message,
)
from .store import OwnerLock, Store
from .summaries import live_summary, stored_summary

log = logging.getLogger("corral.supervisor")

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
S = CoderState


class EngineRegistry(Protocol):
    def resolve(self, requested: str) -> tuple[str, str]: ...

    def create(self, label: str) -> Engine: ...


class UserInputExpired(CorralError):
    """No answer within the question window."""


def new_session_id() -> str:
    return f"{int(time.time()):x}{uuid.uuid4().hex[:16]}"


class Supervisor:
    def __init__(
        self,
        state_dir: Path | None = None,
        *,
        drafter: ContractDrafter,
        engines: EngineRegistry,
        config: SupervisorConfig | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.state_dir = Path(state_dir) if state_dir else default_state_dir()
        self.config = config or load_config()
        self.drafter = drafter
        self.engines = engines
        self.clock = clock
        self.store: Store | None = None
        self._lock = OwnerLock(self.state_dir)
        self._live: dict[str, SessionEntry] = {}
        self._snapshots: dict[str, CoderSession] = {}
        self.board = BoardFeed(self._summary_for, shed_secs=self.config.watcher_shed_secs)
        self.broken_rows: list[str] = []
        self._last_disk_gc: float | None = None
        self._janitor: asyncio.Task[None] | None = None

    # -- lifecycle ----------------------------------------------------------

    async def open(self) -> None:
        """Take ownership of the state dir, load stored sessions, and mark
        sessions that were mid-run when the last process died as failed."""
        ensure_private_dir(self.state_dir)
        self._lock.acquire()
        try:
            self.store = Store(self.state_dir)
            sessions, self.broken_rows = self.store.list_sessions()
        except Exception:
            self._lock.release()
            raise
        for session in sessions:
            self._snapshots[session.id] = session
            if session.state in (S.CREATED, S.CONTRACT_CONFIRMED, S.RUNNING):
                self._mark_orphan_failed(session)
        self._janitor = asyncio.get_running_loop().create_task(self._janitor_loop())

    def _mark_orphan_failed(self, session: CoderSession) -> None:
        kept = f"; its worktree is kept at {session.worktree}" if session.worktree else ""
        session.error = (
            f"corral stopped while this session was {session.state.value}, so it could not "
            f"continue{kept}"
        )
        session.failure_kind = FailureKind.INFRASTRUCTURE
        session.keep_workspace_on_failure = True
        session.state = S.FAILED
        session.updated_at = self.clock()
        assert self.store is not None
        self.store.save_session(session)

    async def close(self) -> None:
        """Stop in-process work and release the state dir. Sessions that were
        running are recorded as failed (their worktrees are kept)."""
        if self._janitor is not None:
            self._janitor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._janitor
        for entry in list(self._live.values()):
            tasks = [t for t in [entry.task, *entry.ops] if t is not None and not t.done()]
            for t in tasks:
                t.cancel()
            for t in tasks:
                with contextlib.suppress(BaseException):
                    await t
            if not entry.session.state.is_terminal and entry.session.state not in (
                S.CONTRACT_PROPOSED,
                S.NEEDS_APPROVAL,
            ):
                self._mark_orphan_failed(entry.session)
            entry.log.close()
        self._live.clear()
        if self.store is not None:
            self.store.close()
            self.store = None
        self._lock.release()

    async def __aenter__(self) -> Supervisor:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- registry helpers ---------------------------------------------------

    def _entry(self, session_id: str) -> SessionEntry:
        entry = self._live.get(session_id)
        if entry is not None:
            return entry
        stored = self._snapshots.get(session_id)
        if stored is None:
            raise CorralError(f"no corral session '{session_id}'")
        raise CorralError(not_live_message(session_id, stored.state))

    def _summary_for(self, session_id: str) -> SessionSummary | None:
        entry = self._live.get(session_id)
        if entry is not None:
            return live_summary(entry)
        stored = self._snapshots.get(session_id)
        return stored_summary(stored) if stored else None

    def _persist(self, entry: SessionEntry) -> None:
        assert self.store is not None
        entry.session.event_cursor = entry.log.next_seq
        self.store.save_session(entry.session)

    def _emit(self, entry: SessionEntry, kind: EventKind, data: dict[str, Any] | None = None):
        return entry.log.append(kind, data)

    def _observe(self, entry: SessionEntry, event: Any) -> None:
        if entry.attention.observe(event):
            self.board.notify(entry.id)

    def _transition(self, entry: SessionEntry, dst: CoderState) -> None:
        """Persist, then announce. A failed write leaves the state unchanged."""
        session = entry.session
        src = session.state
        if not can_transition(src, dst):
            raise IllegalTransition(src, dst)
        before = session.updated_at
        session.state = dst
        session.updated_at = max(self.clock(), before)
        try:
            self._persist(entry)
        except Exception:
            session.state = src
            session.updated_at = before
            raise
        self._emit(entry, EventKind.STATE_CHANGED, {"from": src.value, "to": dst.value})

    def _register(self, session: CoderSession) -> SessionEntry:
        journal = Journal(self.journal_path(session.id))
        entry_holder: list[SessionEntry] = []
        log_ = EventLog(
            session.id,
            cap=self.config.max_replay_events,
            journal=journal,
            start_seq=session.event_cursor,
            observer=lambda ev: self._observe(entry_holder[0], ev),
            backlog=self.config.subscriber_backlog,
            clock=self.clock,
        )
        entry = SessionEntry(session=session, log=log_)
        entry_holder.append(entry)
        self._live[session.id] = entry
        self._snapshots[session.id] = session
        return entry

    def journal_path(self, session_id: str) -> Path:
        return self.state_dir / "journals" / f"{session_id}.events.jsonl"

    def _spawn(self, entry: SessionEntry, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        entry.ops.add(task)
        task.add_done_callback(entry.ops.discard)
        task.add_done_callback(_retrieve)
        return task

    # -- start ----------------------------------------------------------------

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

        sid = new_session_id()
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
        path = self.state_dir / "worktrees" / f"{label(sid)}"
        workspace, start_commit = await asyncio.to_thread(
            GitWorkspace.provision, root, path, base_sha
        )
        session.worktree = str(path)
        session.base = base_sha
        session.start_commit = start_commit
        entry = self._register(session)
        entry.workspace = workspace
        self._persist(entry)
        self.board.notify(sid)
        self._emit(entry, EventKind.ENGINE_SELECTED, {"engine": resolved, "reason": reason})
        task = self._spawn(entry, self._draft(entry))
        if wait:
            await asyncio.shield(task)
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

    async def _draft(self, entry: SessionEntry) -> None:
        s = entry.session
        try:
            contract = await self.drafter.draft(self._request(entry))
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
        scratch = self.state_dir / "scratch" / f"{label(s.id)}-{uuid.uuid4().hex[:6]}"
        copy, _ = await asyncio.to_thread(
            GitWorkspace.provision, Path(s.repo), scratch, s.start_commit
        )
        try:
            return await run_contract(
                contract, scratch, timeout_ceiling=self.config.max_check_timeout_secs
            )
        finally:
            await asyncio.shield(asyncio.to_thread(copy.remove))

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

    # -- revise ---------------------------------------------------------------

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

    # -- confirm --------------------------------------------------------------

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

    # -- the run --------------------------------------------------------------

    def _context(
        self, entry: SessionEntry, round_: int, deadline: float | None, failing: list[CheckResult]
    ) -> RunContext:
        s = entry.session
        assert s.contract is not None and s.worktree is not None

        def iteration_started(n: int) -> None:
            self._emit(entry, EventKind.ITERATION_STARTED, {"n": n, "max": s.max_iterations})

        return RunContext(
            session_id=s.id,
            intent=s.execution_intent(),
            contract=s.contract,
            worktree=Path(s.worktree),
            max_iterations=s.max_iterations,
            deadline=deadline,
            round=round_,
            failing_checks=failing,
            emit=lambda kind, data: self._emit(entry, kind, data),
            ask_user=lambda prompt, options: self.ask_user(entry, prompt, options),
            take_guidance=entry.steering.take,
            iteration_started=iteration_started,
        )

    async def ask_user(self, entry: SessionEntry, prompt: str, options: list[str]) -> str:
        """Park the session on the question gate (armed before the event)."""
        answer = entry.gate.arm(prompt, options)
        self._emit(entry, EventKind.USER_INPUT_REQUESTED, {"prompt": prompt, "options": options})
        timeout = self.config.ask_user_timeout_secs
        try:
            return await asyncio.wait_for(asyncio.shield(answer), timeout)
        except QuestionCleared:
            if entry.cancel_requested:
                # Withdrawn by cancel: end cancelled, not with an error that the
                # cancelled run never retrieves (asyncio would log it).
                raise asyncio.CancelledError from None
            raise
        except TimeoutError:
            if answer.done() and not answer.cancelled() and answer.exception() is None:
                return answer.result()
            entry.gate.clear()
            with contextlib.suppress(QuestionCleared, asyncio.CancelledError):
                answer.exception()
            self._emit(
                entry, EventKind.USER_INPUT_EXPIRED, {"prompt": prompt, "waited_secs": int(timeout)}
            )
            raise UserInputExpired(
                f"no user response within {int(timeout)}s; proceeding without it"
            ) from None

    async def _run(self, entry: SessionEntry) -> None:
        s = entry.session
        assert s.contract is not None and s.worktree is not None
        wall = self.config.max_session_wall_secs
        deadline = time.monotonic() + wall if wall else None
        engine = self.engines.create(s.engine)
        captures = captures_from(s.contract, s.baseline)
        rounds = 1 + self.config.repair_invokes
        failing: list[CheckResult] = []
        iterations = 0
        entry.steering.open()
        try:
            for round_ in range(1, rounds + 1):
                outcome = await self._run_engine(entry, engine, round_, deadline, failing)
                iterations += max(outcome.iterations, 1)
                s.iterations = iterations
                s.engine_ran = s.engine
                s.authored_by = sorted(set(s.authored_by) | set(outcome.authored_by))
                if outcome.cost_usd is not None:
                    s.cost_usd = (s.cost_usd or 0) + outcome.cost_usd
                if outcome.nomination is not None:
                    await self._finalize_nomination(entry, outcome.nomination)
                    return
                if outcome.failure is not None:
                    self._fail(entry, outcome.failure, outcome.error or "the engine failed")
                    return
                results = await self._verify(entry, captures, deadline)
                if all(r.passed for r in results):
                    await self._finalize_green(entry)
                    return
                failing = [r for r in results if not r.passed]
                out_of_time = deadline is not None and time.monotonic() >= deadline
                if round_ < rounds and not out_of_time:
                    names = ", ".join(r.name for r in failing)
                    self._emit(
                        entry,
                        EventKind.PLAN_TEXT,
                        {
                            "text": (
                                f"Runtime verification: {len(failing)} check(s) still fail ({names}); "
                                f"handing them back to the engine (repair {round_} of "
                                f"{rounds - 1})."
                            )
                        },
                    )
                    continue
                names = ", ".join(r.name for r in failing)
                self._fail(
                    entry,
                    LoopFailure.BUDGET_EXHAUSTED if out_of_time else LoopFailure.VERIFICATION,
                    f"contract not satisfied after {iterations} iteration(s): failing {names}",
                )
                return
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # an unexpected bug must not leave a zombie "running"
            log.exception("run of %s crashed", s.id)
            if not s.state.is_terminal:
                self._fail(entry, LoopFailure.INFRASTRUCTURE, f"corral error: {exc}")
        finally:
            entry.steering.close()
            entry.gate.clear()

    async def _run_engine(
        self,
        entry: SessionEntry,
        engine: Engine,
        round_: int,
        deadline: float | None,
        failing: list[CheckResult],
    ) -> EngineOutcome:
        ctx = self._context(entry, round_, deadline, failing)
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            return await asyncio.wait_for(engine.run(ctx), left)
        except TimeoutError:
            wall = self.config.max_session_wall_secs
            return EngineOutcome(
                failure=LoopFailure.BUDGET_EXHAUSTED,
                error=f"the session's wall-clock budget of {wall}s ran out",
            )
        except UserInputExpired as exc:
            return EngineOutcome(failure=LoopFailure.EXECUTION, error=str(exc))
        except CorralError as exc:
            return EngineOutcome(failure=LoopFailure.EXECUTION, error=str(exc))

    async def _verify(
        self, entry: SessionEntry, captures: dict[str, str], deadline: float | None
    ) -> list[CheckResult]:
        s = entry.session
        assert s.contract is not None and s.worktree is not None
        self._emit(
            entry,
            EventKind.PLAN_TEXT,
            {"text": "Runtime verification: re-running every contract check."},
        )
        results = await run_contract(
            s.contract,
            Path(s.worktree),
            captures=captures,
            timeout_ceiling=self.config.max_check_timeout_secs,
            on_result=lambda r: self._emit(
                entry, EventKind.CHECK_COMPLETED, {"result": r.model_dump(mode="json")}
            ),
        )
        s.last_check_results = results
        self._emit(
            entry,
            EventKind.CONTRACT_EVALUATED,
            {
                "by": "runtime",
                "passed": all(r.passed for r in results),
                "results": [r.model_dump(mode="json") for r in results],
            },
        )
        self._persist(entry)
        return results

    async def _finalize_green(self, entry: SessionEntry) -> None:
        s = entry.session
        ws = entry.workspace
        assert ws is not None and s.start_commit is not None
        if s.state.is_terminal:
            return
        pristine = await asyncio.to_thread(ws.is_pristine, s.start_commit)
        if pristine:
            finding = NoChangeFinding(
                kind="premise_wrong",
                summary="every contract check passes and the session changed nothing",
                evidence=(
                    f"After {s.iterations} iteration(s) the worktree is unchanged and every "
                    "check passes; the engine made no report_no_change nomination."
                ),
                baseline_checks=list(s.baseline),
            )
            await self._park_finding(entry, finding)
            return
        try:
            diff = await asyncio.to_thread(ws.diff, s.start_commit)
        except CorralError as exc:
            self._emit(entry, EventKind.ERROR, {"message": f"diff generation failed: {exc}"})
            s.keep_workspace_on_failure = True
            self._fail(entry, LoopFailure.INFRASTRUCTURE, f"diff generation failed: {exc}")
            return
        s.diff = diff
        self._emit(
            entry,
            EventKind.DIFF_READY,
            {
                "stat": diff.stat,
                "patch": diff.patch,
                "patch_truncated": diff.patch_truncated,
                "patch_full_bytes": diff.patch_full_bytes,
                "changed_paths": len(diff.files),
                "files": [f.model_dump(mode="json") for f in diff.files],
            },
        )
        self._transition(entry, S.NEEDS_APPROVAL)

    async def _park_finding(self, entry: SessionEntry, finding: NoChangeFinding) -> None:
        entry.session.no_change_finding = finding
        self._emit(entry, EventKind.FINDING_PROPOSED, {"finding": finding.model_dump(mode="json")})
        self._transition(entry, S.NEEDS_APPROVAL)

    async def _finalize_nomination(self, entry: SessionEntry, finding: NoChangeFinding) -> None:
        s = entry.session
        ws = entry.workspace
        assert ws is not None and s.start_commit is not None
        if await asyncio.to_thread(ws.is_pristine, s.start_commit):
            finding.baseline_checks = list(s.baseline)
            await self._park_finding(entry, finding)
        else:
            self._fail(
                entry,
                LoopFailure.EXECUTION,
                (
                    "the engine reported that no change is needed but had already made a "
                    "successful edit; a finding must leave the tree untouched"
                ),
            )

    def _fail(self, entry: SessionEntry, failure: LoopFailure, error: str) -> None:
        s = entry.session
        if s.state.is_terminal:
            return
        if failure is LoopFailure.CANCELLED:
            self._transition(entry, S.ABANDONED)
            return
        kind = failure_kind_for(
            failure,
            budget_flag=entry.attention.budget_exhausted,
            auth_flag=entry.attention.auth_outstanding,
        )
        if kind is FailureKind.BUDGET_EXHAUSTED:
            s.keep_workspace_on_failure = True
            if not entry.attention.budget_exhausted:
                self._emit(
                    entry, EventKind.BUDGET_EXHAUSTED, {"reason": error, "iterations": s.iterations}
                )
        s.error = error
        s.failure_kind = kind
        if s.keep_workspace_on_failure and s.worktree:
            self._emit(
                entry,
                EventKind.ERROR,
                {"message": (f"session failed; worktree retained for postmortem at {s.worktree}")},
            )
        self._transition(entry, S.FAILED)

    # -- respond / steer ------------------------------------------------------

    async def respond(self, session_id: str, text: str, *, steer: bool = False) -> dict[str, bool]:
        entry = self._entry(session_id)
        if not steer:
            entry.gate.fulfill(text)
            self.board.notify(session_id)  # answering emits no event
            return {"ok": True}
        if entry.gate.is_pending:
            raise CorralError(ANSWER_FIRST)
        s = entry.session
        message = check_guidance(text, len(s.steering_messages))
        if not entry.steering.is_open:
            raise CorralError(f"{label(s.id)} is not accepting steering right now")
        s.steering_messages.append(message)
        try:
            self._persist(entry)
        except Exception as exc:
            s.steering_messages.pop()
            raise CorralError(f"Could not save the guidance: {exc}") from exc
        entry.steering.push(message)
        self._emit(entry, EventKind.OPERATOR_GUIDANCE, {"text": message, "status": "queued"})
        return {"ok": True, "queued": True}

    # -- approve --------------------------------------------------------------

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

    # -- cancel ---------------------------------------------------------------

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

    # -- reading --------------------------------------------------------------

    def list(self) -> list[SessionSummary]:
        rows = [self._summary_for(sid) for sid in self._snapshots]
        return sorted((r for r in rows if r), key=lambda r: r.updated_at, reverse=True)

    def get(self, session_id: str) -> SessionDetail:
        entry = self._live.get(session_id)
        if entry is None:
            stored = self._snapshots.get(session_id)
            if stored is None:
                raise CorralError(f"no corral session '{session_id}'")
            return SessionDetail(
                session=stored,
                live=False,
                next_seq=None,
                steering_available=False,
                question_prompt=None,
                needs_you=None,
                needs_you_label=None,
            )
        row = live_summary(entry)
        return SessionDetail(
            session=entry.session,
            live=True,
            next_seq=entry.log.next_seq,
            steering_available=row.steering_available,
            question_prompt=row.question_prompt,
            needs_you=row.needs_you,
            needs_you_label=row.needs_you_label,
        )

    def question_options(self, session_id: str) -> list[str]:
        entry = self._live.get(session_id)
        return list(entry.gate.options) if entry and entry.gate.is_pending else []

    def watch(self) -> tuple[list[SessionSummary], Watcher]:
        """The whole board and a registration for changes, atomically."""
        watcher = self.board.register()
        return self.list(), watcher

    def unwatch(self, watcher: Watcher) -> bool:
        return self.board.unregister(watcher)

    def subscribe(
        self, session_id: str, from_seq: int = 0
    ) -> tuple[SubscribeResult, Subscription | None]:
        entry = self._live.get(session_id)
        if entry is None:
            stored = self._snapshots.get(session_id)
            if stored is None:
                raise CorralError(f"no corral session '{session_id}'")
            return SubscribeResult(
                state=stored.state,
                events_replayed=0,
                events_skipped=0,
                live=False,
                replay_available=False,
            ), None
        sub, replayed, skipped = entry.log.subscribe(from_seq)
        return SubscribeResult(
            state=entry.session.state,
            events_replayed=replayed,
            events_skipped=skipped,
            live=True,
            replay_available=True,
        ), sub

    def unsubscribe(self, sub: Subscription) -> None:
        sub.close()

    async def wait_for(
        self,
        session_id: str,
        states: set[CoderState] | None = None,
        *,
        needs: bool = False,
        timeout: float = 30,
    ) -> SessionSummary:
        """Wait until a session reaches one of `states` (or, with `needs`, needs
        the operator, or is terminal). For scripts and tests."""

        def done(row: SessionSummary | None) -> bool:
            if row is None:
                return False
            if states and row.state in states:
                return True
            return needs and (row.needs_you is not None or row.state.is_terminal)

        watcher = self.board.register()
        try:
            row = self._summary_for(session_id)
            async with asyncio.timeout(timeout):
                while not done(row):
                    for changed in await watcher.get():
                        if changed.session_id == session_id:
                            row = changed
            assert row is not None
            return row
        finally:
            self.board.unregister(watcher)

    # -- retention ------------------------------------------------------------

    def _prune_finished(self) -> list[str]:
        """Drop finished sessions from memory after the retention window, only
        when their snapshot is stored and their task has ended."""
        now = self.clock()
        gone: list[str] = []
        assert self.store is not None
        for sid, entry in list(self._live.items()):
            s = entry.session
            if entry.task_running or entry.ops:
                continue
            if not retention.collectable_by_age(
                s.state.is_terminal, s.updated_at, now, self.config.finished_retention_secs
            ):
                continue
            if self.store.load_session(sid) is None:
                continue
            entry.log.close()
            del self._live[sid]
            gone.append(sid)
        self._sweep_disk()
        return gone

    def _sweep_disk(self) -> None:
        mono = time.monotonic()
        interval = self.config.disk_gc_interval_secs
        if self._last_disk_gc is not None and mono - self._last_disk_gc < interval:
            return
        self._last_disk_gc = mono
        assert self.store is not None
        victims = retention.disk_gc_victims(
            list(self._snapshots.values()),
            set(self._live),
            now=self.clock(),
            max_sessions=self.config.retention.max_sessions,
            max_age_days=self.config.retention.max_age_days,
        )
        if not victims:
            return
        self.store.delete_sessions(victims)
        for sid in victims:
            self._snapshots.pop(sid, None)
            self.journal_path(sid).unlink(missing_ok=True)

    async def _janitor_loop(self) -> None:
        while True:
            await asyncio.sleep(60)
            try:
                self._prune_finished()
            except Exception:
                log.exception("retention sweep failed")

    # -- introspection for views ------------------------------------------------

    def is_live(self, session_id: str) -> bool:
        return session_id in self._live

    def needs_you_of(self, session_id: str) -> str | None:
        row = self._summary_for(session_id)
        return None if row is None or row.needs_you is None else needs_you_label(row.needs_you)


def _retrieve(task: asyncio.Task[Any]) -> None:
    """Mark a background task's exception as seen; callers that wait get it."""
    if not task.cancelled():
        task.exception()


def check_guidance_limit_message() -> str:
    from .gates import GUIDANCE_LIMIT

    return GUIDANCE_LIMIT


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


__all__ = ["Supervisor", "needs_you"]
