"""The run: the engine ladder with repair rounds, runtime verification, and
the outcome (diff, finding or failure); questions and steering meanwhile."""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path
from typing import Any

from .contracts.checks import captures_from, run_contract
from .core import S, SupervisorCore, log
from .engines.base import Engine, EngineOutcome, RunContext
from .entry import SessionEntry
from .errors import CorralError
from .gates import ANSWER_FIRST, QuestionCleared, check_guidance
from .git.delivery import review_identity
from .models import (
    CheckResult,
    EventKind,
    NoChangeFinding,
)
from .states import (
    FailureKind,
    LoopFailure,
    failure_kind_for,
    fallback_allowed,
    label,
)


class UserInputExpired(CorralError):
    """No answer within the question window."""


class RunLoop(SupervisorCore):
    def _context(
        self, entry: SessionEntry, round_: int, deadline: float | None, failing: list[CheckResult]
    ) -> RunContext:
        s = entry.session
        assert s.contract is not None and s.worktree is not None

        def iteration_started(n: int) -> None:
            self._emit(entry, EventKind.ITERATION_STARTED, {"n": n, "max": s.max_iterations})

        def withdraw_question() -> None:
            entry.gate.clear()
            self.board.notify(s.id)

        def note_pane(pane: dict[str, Any] | None) -> None:
            """Persisted before the agent starts, updated after (seed 002)."""
            s.pane = pane
            self._persist(entry)

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
            withdraw_question=withdraw_question,
            note_pane=note_pane,
            detaching=lambda: self._closing,
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
        ran = s.engine
        captures = captures_from(s.contract, s.baseline)
        rounds = 1 + self.config.repair_invokes
        failing: list[CheckResult] = []
        iterations = 0
        entry.steering.open()
        try:
            for round_ in range(1, rounds + 1):
                outcome = await self._run_engine(entry, engine, round_, deadline, failing)
                fallback = self._fallback_engine(entry, outcome)
                if fallback is not None:
                    self._emit(
                        entry,
                        EventKind.ENGINE_FALLBACK,
                        {"from": ran, "to": fallback.label, "reason": outcome.error},
                    )
                    engine, ran = fallback, fallback.label
                    outcome = await self._run_engine(entry, engine, round_, deadline, failing)
                iterations += max(outcome.iterations, 1)
                s.iterations = iterations
                s.engine_ran = ran
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

    def _fallback_engine(self, entry: SessionEntry, outcome: EngineOutcome) -> Engine | None:
        """Fall back to the built-in engine only when the agent was unavailable
        and the operator did not name it (seed 000 §5.4); never silently."""
        s = entry.session
        requested = (s.requested_engine or "auto").strip()
        explicit = requested not in ("auto", "native", "")
        if not fallback_allowed(outcome.failure, explicit=explicit) or s.engine == "native":
            return None
        native = getattr(self.engines, "native", None)
        return native() if native is not None else None

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
            await self._announce_diff(entry)
        except CorralError as exc:
            self._emit(entry, EventKind.ERROR, {"message": f"diff generation failed: {exc}"})
            s.keep_workspace_on_failure = True
            self._fail(entry, LoopFailure.INFRASTRUCTURE, f"diff generation failed: {exc}")
            return
        self._transition(entry, S.NEEDS_APPROVAL)

    async def _announce_diff(self, entry: SessionEntry) -> None:
        """Describe the worktree's change and record its review identity: the
        exact tree the operator will approve."""
        s = entry.session
        ws = entry.workspace
        assert ws is not None and s.start_commit is not None
        diff = await asyncio.to_thread(ws.diff, s.start_commit)
        s.review_tree = await asyncio.to_thread(review_identity, ws.path)
        s.diff = diff
        self._persist(entry)
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
        assert self.workspaces is not None
        if s.keep_workspace_on_failure:
            self.workspaces.retain(s.worktree, note=f"failed: {error}"[:300])
        else:
            self._spawn(entry, asyncio.to_thread(self.workspaces.remove, s.worktree, force=True))

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
