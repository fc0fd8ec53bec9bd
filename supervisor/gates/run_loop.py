"""The run: the engine works on the confirmed contract, the verifier re-runs
every check, failing checks go back to the engine for a bounded number of
repair rounds, and the outcome is handed to the approval gate (a verified
diff or a no-change finding) or recorded as a failure. Meanwhile the engine
may ask the operator a question and the operator may steer it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from pathlib import Path
from typing import Any, Protocol

from ..config import SupervisorConfig
from ..contracts.hidden import agent_contract, names_of, visible_to_agent
from ..engines.base import (
    Engine,
    EngineOutcome,
    EngineRegistry,
    RunContext,
    operator_reply,
)
from ..errors import CorralError, DiskFullError, disk_full, is_disk_full, nearly_full, swallowed
from ..events import (
    GUIDANCE_NOT_DELIVERED,
    GUIDANCE_QUEUED,
    MESSAGE_REJECTED,
    BudgetExhaustedData,
    EngineFallbackData,
    ErrorData,
    EventData,
    IterationStartedData,
    OperatorGuidanceData,
    PlanTextData,
    ToolCallData,
    UserInputExpiredData,
    UserInputRequestedData,
)
from ..faults import fault_point
from ..git.run import WorktreeMetadataChanged
from ..git.trees import tree_of
from ..hosts.configured import Hosts
from ..models import AgentOffers, CheckResult, NoChangeFinding
from ..session.identity import resume_id
from ..session.live import LiveSession
from ..session.model_use import auth_waiter, hop_event, record_use
from ..session.questions import ANSWER_FIRST, QuestionCleared, check_guidance
from ..session.registry import SessionRegistry
from ..states import (
    CoderState,
    FailureKind,
    LoopFailure,
    failure_kind_for,
    fallback_allowed,
    label,
)
from ..workspaces import Workspaces
from .approval import ApprovalGate
from .verifier import STABILITY_ATTEMPTS, Verification, Verifier, name_paths

FOREMAN_PREFIX = "foreman:"


def is_foreman(engine: str | None) -> bool:
    """A `foreman:<agent>` session: the foreman service builds its engine."""
    return bool(engine) and str(engine).startswith(FOREMAN_PREFIX)


class ForemanEngines(Protocol):
    """What the run loop asks of the foreman service (a floor-3 room beside
    this one, that builds on the gates): the engine of a foreman session."""

    def engine(self, live: LiveSession) -> Engine: ...


S = CoderState
log = logging.getLogger("corral.supervisor")


VERIFY_AGAIN = "verify again"
STOP = "stop"
# the operator's choices when the agent reports the task impossible as specified
REVISE = "revise the contract"
GO_ON = "go on"
CANCEL = "cancel"
GO_ON_DEFAULT = "Carry on with the task as specified."


class UserInputExpired(CorralError):
    """Kept for callers that catch it: a question no longer expires (it
    waits for the operator, reminding them), so nothing raises it now."""


class RunLoop:
    def __init__(
        self,
        registry: SessionRegistry,
        verifier: Verifier,
        approval: ApprovalGate,
        *,
        engines: EngineRegistry,
        workspaces: Workspaces,
        config: SupervisorConfig,
        foreman: ForemanEngines | None = None,
        hosts: Hosts | None = None,
    ) -> None:
        self._foreman = foreman
        self._hosts = hosts  # where sessions on other hosts run
        self._registry = registry
        self._verifier = verifier
        self._approval = approval
        self._engines = engines
        self._workspaces = workspaces
        self._config = config
        self._running: dict[str, Engine] = {}  # the engine of each session whose run is on

    def start(self, live: LiveSession) -> None:
        """Run a session that is `running` (just confirmed, or re-adopted after a
        restart) on its own supervisor task."""
        live.task = asyncio.get_running_loop().create_task(self._run(live))

    async def _run(self, live: LiveSession) -> None:
        s = live.session
        assert s.contract is not None and s.worktree is not None
        wall = self._config.max_session_wall_secs
        deadline = time.monotonic() + wall if wall else None
        engine: Engine | None = None
        ran = s.engine
        rounds = 1 + self._config.repair_invokes
        failing: list[CheckResult] = []
        iterations = 0
        live.steering.open()
        try:  # from here on, whatever goes wrong ends the session with a reason
            engine = (
                self._foreman.engine(live)
                if self._foreman is not None and is_foreman(s.engine)
                else self._engines.create(s.engine)
            )
            self._running[s.id] = engine
            round_ = 0
            if s.impossible_report is not None:  # reported before a restart: asked first
                live.impossible = s.impossible_report
                reply = await self._impossible(live, engine)
                if reply is None:
                    return
                # the agent's next round carries the answer (its pane is idle)
                failing, round_, rounds = [operator_reply(reply)], 1, rounds + 1
            while round_ < rounds:
                round_ += 1
                outcome = await self._run_engine(live, engine, round_, deadline, failing)
                fallback = self._fallback_engine(live, outcome)
                if fallback is not None:
                    self._registry.emit(
                        live,
                        EngineFallbackData(from_=ran, to=fallback.label, reason=outcome.error),
                    )
                    engine, ran = fallback, fallback.label
                    outcome = await self._run_engine(live, engine, round_, deadline, failing)
                iterations += max(outcome.iterations, 1)
                s.iterations = iterations
                s.engine_ran = outcome.ran or ran
                authors = [*outcome.authored_by]
                if s.model_pinned and s.model and ran != "native":
                    authors.append(s.model)  # the agent was told to use it
                s.authored_by = sorted(set(s.authored_by) | set(authors))
                record_use(s, live.model_ledger, add_cost=False)
                if outcome.cost_usd is not None:
                    s.cost_usd = (s.cost_usd or 0) + outcome.cost_usd
                if outcome.nomination is not None:
                    await self._finish_nomination(live, outcome.nomination)
                    return
                if outcome.dormant:
                    self._go_dormant(live, outcome.error or "the agent stopped")
                    return
                if outcome.impossible is not None:  # the built-in engine's tool
                    with contextlib.suppress(CorralError):  # no longer running: nothing to ask
                        self._registry.note_impossible(s.id, outcome.impossible)
                if live.impossible is not None and outcome.failure is None:
                    # never verified, never repaired: the operator decides
                    reply = await self._impossible(live, engine)
                    if reply is None:
                        return
                    failing, rounds = [operator_reply(reply)], rounds + 1
                    continue
                if outcome.failure is not None:
                    if outcome.keep_worktree:
                        s.keep_workspace_on_failure = True
                    self._fail(live, outcome.failure, outcome.error or "the engine failed")
                    return
                verification = await self._verifier.verify(live)
                while verification.stable and any(r.cannot_run for r in verification.results):
                    if not await self._wait_for_environment(live, verification.results):
                        return
                    verification = await self._verifier.verify(live)
                if not verification.stable:
                    self._fail_unstable(live, verification)
                    return
                if live.impossible is not None:  # reported while the checks ran
                    reply = await self._impossible(live, engine)
                    if reply is None:
                        return
                    failing, rounds = [operator_reply(reply)], rounds + 1
                    continue
                if verification.passed:
                    await self._verifier.accept(live, verification)
                    await self._finish_green(live)
                    return
                failing = [r for r in verification.results if not r.passed]
                out_of_time = deadline is not None and time.monotonic() >= deadline
                if round_ < rounds and not out_of_time:
                    names = names_of(failing)
                    self._registry.emit(
                        live,
                        PlanTextData(
                            text=(
                                f"Runtime verification: {len(failing)} check(s) still fail ({names}); "
                                f"handing them back to the engine (repair {round_} of "
                                f"{rounds - 1})."
                            )
                        ),
                    )
                    continue
                names = names_of(failing)
                self._fail(
                    live,
                    LoopFailure.BUDGET_EXHAUSTED if out_of_time else LoopFailure.VERIFICATION,
                    f"contract not satisfied after {iterations} iteration(s): failing {names}",
                )
                return
        except asyncio.CancelledError:
            raise
        except WorktreeMetadataChanged as exc:  # no git ran on it: the session stops here
            s.keep_workspace_on_failure = True
            self._registry.emit(live, ErrorData(message=str(exc)))
            self._fail(live, LoopFailure.EXECUTION, str(exc))
        except Exception as exc:  # an unexpected bug must not leave a zombie "running"
            if is_disk_full(exc) or nearly_full(self._registry.state_dir):
                # not a bug: said once, in the operator's words (a tool that
                # could not write but did not say why, on a disk now full, too)
                error = str(disk_full(self._registry.state_dir))
            else:
                log.exception("run of %s crashed", s.id)
                error = f"corral error: {exc}"
            if not s.state.is_terminal:
                try:
                    self._fail(live, LoopFailure.INFRASTRUCTURE, error)
                except DiskFullError as full:  # not even the ending fits: failed here anyway
                    self._registry.fail_unstored(live, str(full))
        finally:
            live.steering.close()
            live.question.clear()
            self._report_undelivered(live)
            # an engine that owns its agent's process over pipes (ACP) stops it
            # with the run: no pane keeps it for a later look
            self._running.pop(s.id, None)
            close = getattr(engine, "aclose", None)
            if close is not None:
                with swallowed(log, "closing the engine after its run"):
                    await asyncio.shield(close())
            if s.state is S.FAILED and not self._registry.has_agent_pane(s):
                # the engine ran in this process (or over pipes, closed above):
                # it is stopped; a pane's agent is recorded once its pane stops
                self._registry.stopped(s)

    def _go_dormant(self, live: LiveSession, reason: str) -> None:
        """The agent is gone but its conversation is not: the session keeps
        its state and worktree, asks nothing of the operator, and waits for a
        revive."""
        self._registry.emit(
            live,
            PlanTextData(
                text=f"{reason}; the session is dormant (its worktree is kept): revive it (R) "
                "to resume the agent's own conversation."
            ),
        )
        self._registry.mark_dormant(live.session)
        self._registry.notify(live.session.id)

    def _report_undelivered(self, live: LiveSession) -> None:
        """Guidance and messages still queued when the run ends never reached
        the agent: say so."""
        notes = live.steering.take()
        messages = self._registry.mailboxes.take(live.session.id)
        if not notes and not messages:
            return
        if self._registry.closing:
            reason = "corral closed before the agent was ready for it"
        elif live.cancel_requested:
            reason = "the task was cancelled before the agent was ready for it"
        else:
            reason = "the run ended before the agent was ready for it"
        for note in notes:
            self._registry.emit(
                live, OperatorGuidanceData(text=note, status=GUIDANCE_NOT_DELIVERED, reason=reason)
            )
        for message in messages:
            self._registry.note_message(message, MESSAGE_REJECTED, reason)

    async def _run_engine(
        self,
        live: LiveSession,
        engine: Engine,
        round_: int,
        deadline: float | None,
        failing: list[CheckResult],
    ) -> EngineOutcome:
        ctx = self._context(live, round_, deadline, failing)
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        fault_point("run:engine-started")
        try:
            return await asyncio.wait_for(engine.run(ctx), left)
        except TimeoutError:
            wall = self._config.max_session_wall_secs
            return EngineOutcome(
                failure=LoopFailure.BUDGET_EXHAUSTED,
                error=f"the session's wall-clock budget of {wall}s ran out",
            )
        except DiskFullError:
            raise  # not the engine's failure: the run ends with the state dir's sentence
        except CorralError as exc:  # an unanswered question (UserInputExpired) included
            return EngineOutcome(failure=LoopFailure.EXECUTION, error=str(exc))

    def _context(
        self, live: LiveSession, round_: int, deadline: float | None, failing: list[CheckResult]
    ) -> RunContext:
        registry = self._registry
        s = live.session
        assert s.contract is not None and s.worktree is not None

        def emit(data: EventData) -> None:
            registry.emit(live, data)
            if isinstance(data, ToolCallData):  # an edit (or a command) is journaled
                fault_point("run:edited")

        def iteration_started(n: int) -> None:
            registry.emit(live, IterationStartedData(n=n, max=s.max_iterations))

        def withdraw_question() -> None:
            live.question.clear()
            registry.notify(s.id)

        def note_pane(pane: dict[str, Any] | None) -> None:
            """Stored before the agent starts and after it changes, so a restart
            can find the pane by its owner marker."""
            s.pane = pane
            registry.persist(live)

        def note_offers(offers: AgentOffers) -> None:
            """Kept on the session, so the board, `get` and a restart show them."""
            s.agent_offers = offers
            registry.persist(live)
            registry.notify(s.id)

        return RunContext(
            session_id=s.id,
            intent=s.execution_intent(),
            contract=agent_contract(s.contract),  # the hidden checks only counted
            worktree=Path(s.worktree),
            max_iterations=s.max_iterations,
            deadline=deadline,
            round=round_,
            rounds=1 + self._config.repair_invokes,
            # a hidden check is only "a check the operator holds back failed"
            failing_checks=visible_to_agent(failing),
            emit=emit,
            ask_user=lambda prompt, options: self._ask_user(live, prompt, options),
            take_guidance=live.steering.take,
            iteration_started=iteration_started,
            withdraw_question=withdraw_question,
            note_pane=note_pane,
            note_status=lambda reading: registry.note_agent_status(s.id, reading),
            note_offers=note_offers,
            detaching=lambda: registry.closing,
            stopping=lambda: live.cancel_requested or s.state.is_terminal,
            resume_id=lambda: resume_id(s),
            note_agent_session=lambda sid, path: registry.note_agent_hook(
                s.id, {"session_id": sid, "transcript_path": path}
            ),
            note_usage=lambda model, use: registry.note_reported_usage(s.id, model, use),
            take_messages=lambda: registry.mailboxes.take(s.id),
            messages_ended=registry.note_messages,
            model=s.model if s.model_pinned else None,
            model_id=s.model_id if s.model_pinned else None,
            on_model_hop=lambda hop: emit(hop_event(hop)),
            auth_wait=auth_waiter(emit),
            ledger=live.model_ledger,
            place=self._hosts.get(s.host) if s.host and self._hosts is not None else None,
            remote_worktree=s.remote_worktree,
        )

    def _fallback_engine(self, live: LiveSession, outcome: EngineOutcome) -> Engine | None:
        """Fall back to the built-in engine only when the agent was unavailable
        and the operator did not name it (`auto`); never silently."""
        s = live.session
        requested = (s.requested_engine or "auto").strip()
        explicit = requested not in ("auto", "native", "")
        if not fallback_allowed(outcome.failure, explicit=explicit) or s.engine == "native":
            return None
        native = getattr(self._engines, "native", None)
        return native() if native is not None else None

    # -- questions and steering while the engine works ---------------------------------------

    async def _ask_user(self, live: LiveSession, prompt: str, options: list[str]) -> str:
        """Park the session on its question (armed before the event is emitted).

        A question unanswered is still a question: it stays pending (needs you:
        question) until the operator answers, the asker withdraws it (the agent
        moved on by itself, the run stops) or the session's own time runs out.
        Each `ask_user_timeout_secs` it has waited, a reminder is recorded and
        the board's row says so again (notifications repeat); the signal is
        never cleared by the wait alone."""
        answer = live.question.arm(prompt, options)
        self._registry.emit(live, UserInputRequestedData(prompt=prompt, options=options))
        timeout = self._config.ask_user_timeout_secs
        waited = 0.0
        while True:
            try:
                return await asyncio.wait_for(asyncio.shield(answer), timeout)
            except QuestionCleared:
                if live.cancel_requested:
                    # Withdrawn by cancel: end cancelled, not with an error that the
                    # cancelled run never retrieves (asyncio would log it).
                    raise asyncio.CancelledError from None
                raise
            except TimeoutError:
                if answer.done():
                    return answer.result()  # answered (or cleared) as the window closed
                waited += timeout
                live.question.remind()
                self._registry.emit(
                    live,
                    UserInputExpiredData(
                        prompt=prompt, waited_secs=int(waited), still_waiting=True
                    ),
                )

    def _setter(self, session_id: str, method: str, what: str) -> Any:
        """The running engine's `method` that sets its agent's `what` (ACP)."""
        self._registry.live(session_id)
        engine = self._running.get(session_id)
        if engine is None:
            raise CorralError(
                f"the session's agent is not running: its {what} can be set while it runs"
            )
        setter = getattr(engine, method, None)
        if setter is None:
            raise CorralError(
                f"{engine.label} has no {what}s corral can set: only ACP agents announce them"
            )
        return setter

    async def set_mode(self, session_id: str, mode: str) -> str:
        """Switch the running agent's mode, where its engine has modes (ACP)."""
        result: str = await self._setter(session_id, "set_mode", "mode")(mode)
        return result

    async def set_model(self, session_id: str, model: str) -> str:
        """Switch the running agent's model, one it offers (ACP)."""
        result: str = await self._setter(session_id, "set_model", "model")(model)
        return result

    async def set_option(self, session_id: str, key: str, value: str) -> str:
        """Set one of the running agent's config options (ACP)."""
        result: str = await self._setter(session_id, "set_option", "config option")(key, value)
        return result

    def question_options(self, session_id: str) -> list[str]:
        live = self._registry.get_live(session_id)
        return list(live.question.options) if live and live.question.is_pending else []

    async def respond(self, session_id: str, text: str, *, steer: bool = False) -> dict[str, bool]:
        """Answer the pending question, or (`steer`) queue guidance for the
        engine's next round; guidance is stored before it is queued."""
        live = self._registry.live(session_id)
        if not steer:
            live.question.fulfill(text)
            self._registry.notify(session_id)  # answering emits no event
            return {"ok": True}
        if live.question.is_pending:
            raise CorralError(ANSWER_FIRST)
        s = live.session
        message = check_guidance(text, len(s.steering_messages))
        if not live.steering.is_open:
            raise CorralError(f"{label(s.id)} is not accepting steering right now")
        s.steering_messages.append(message)
        try:
            self._registry.persist(live)
        except Exception as exc:
            s.steering_messages.pop()
            raise CorralError(f"Could not save the guidance: {exc}") from exc
        live.steering.push(message)
        self._registry.emit(live, OperatorGuidanceData(text=message, status=GUIDANCE_QUEUED))
        return {"ok": True, "queued": True}

    # -- the outcome ---------------------------------------------------------------------

    async def _impossible(self, live: LiveSession, engine: Engine) -> str | None:
        """The agent says the task cannot be done as specified (the tests
        contradict the intent). Nothing is verified and nothing is sent back
        for repair: the operator reads the reason and revises the contract
        (back to gate 1), tells the agent to go on, or cancels. Returns the
        operator's message for the agent's next round when it goes on, None
        when the run ends here. An answer that is none of the three words is
        taken as the message (the operator typed what the agent should hear)."""
        s = live.session
        reason = live.impossible or ""
        live.impossible = None
        prompt = (
            f"the agent says the tests contradict the intent: {reason} — answer "
            f"'{REVISE}' (back to gate 1; the agent starts again on the revised contract, "
            f"its edits kept), '{GO_ON}: <message>' (the agent goes on with your message), "
            f"or '{CANCEL}' (the worktree is kept)."
        )
        try:
            answer = (await self._ask_user(live, prompt, [REVISE, GO_ON, CANCEL])).strip()
        except UserInputExpired:
            s.impossible_report = None
            s.keep_workspace_on_failure = True
            self._fail(
                live,
                LoopFailure.EXECUTION,
                f"the agent said the task cannot be done as specified ({reason}) and no answer "
                "came; nothing was verified. The worktree is kept",
            )
            return None
        s.impossible_report = None  # answered (kept until now: a restart asks again)
        word = answer.lower()
        if word.startswith("revise"):
            await self._back_to_gate_1(live, engine)
            return None
        if word == CANCEL or word.startswith(f"{CANCEL} "):
            await self._stop_agent(live, engine)
            s.keep_workspace_on_cancel = True
            self._registry.emit(
                live,
                PlanTextData(text="Cancelled after the agent said the task cannot be done."),
            )
            self._fail(live, LoopFailure.CANCELLED, "cancelled by the operator")
            self._workspaces.retain(s.worktree, note="cancelled: the agent said it cannot be done")
            return None
        message = answer[len(GO_ON) :].lstrip(" :") if word.startswith(GO_ON) else answer
        message = message.strip() or GO_ON_DEFAULT
        self._registry.persist(live)
        self._registry.emit(
            live, PlanTextData(text=f"The operator tells the agent to go on: {message}")
        )
        return message

    async def _stop_agent(self, live: LiveSession, engine: Engine) -> None:
        """The session's agent stops (its pane, or its process over pipes)."""
        self._registry.stop_agent(live.session)
        close = getattr(engine, "aclose", None)
        if close is not None:
            with swallowed(log, "closing the engine of a stopped agent"):
                await close()

    async def _back_to_gate_1(self, live: LiveSession, engine: Engine) -> None:
        """The operator revises the contract: the run ends, the agent stops,
        and the session waits at gate 1; once confirmed, a fresh agent starts
        on the revised contract in the same worktree (its edits kept)."""
        s = live.session
        await self._stop_agent(live, engine)
        s.agent_identity = None  # not resumed: the new run starts on the revised contract
        self._registry.emit(
            live,
            PlanTextData(
                text="Back at gate 1: revise the contract, then confirm it; the agent starts "
                "again on it in the same worktree."
            ),
        )
        self._registry.transition(live, S.CONTRACT_PROPOSED)
        self._registry.notify(s.id)

    async def _wait_for_environment(self, live: LiveSession, results: list[CheckResult]) -> bool:
        """A check that cannot run is not the agent's fault, so it is never sent
        back as a repair: the session asks the operator (needs you: question)
        to fix the environment and verify again, or stop. True: verify again."""
        blocked = [r for r in results if r.cannot_run]
        names = names_of(blocked)
        # what a hidden check's reason says stays in its result (the console
        # shows it); the question is on the board, which agents read
        first = next((r for r in blocked if not r.hidden), None) or blocked[0].model_copy(
            update={"reason": "see the hidden check's result", "fix": "see its reason"}
        )
        prompt = (
            f"Runtime verification: {len(blocked)} check(s) cannot run here ({names}: "
            f"{first.reason}). That is the environment, not the agent's work, so nothing was "
            f"sent back for repair. Fix it ({first.fix}, or install what is missing), then "
            f"answer '{VERIFY_AGAIN}'; '{STOP}' ends the session and keeps the worktree."
        )
        answer = await self._ask_user(live, prompt, [VERIFY_AGAIN, STOP])
        if answer.strip().lower() == VERIFY_AGAIN:
            return True
        live.session.keep_workspace_on_failure = True
        self._fail(
            live,
            LoopFailure.CONFIGURATION,
            f"check(s) {names} cannot run here ({first.reason}); the environment needs "
            f"fixing, not the work: {first.fix}. The worktree is kept",
        )
        return False

    def _fail_unstable(self, live: LiveSession, verification: Verification) -> None:
        """The worktree never held still while the checks ran: no result is
        accepted, and the worktree is kept for a look."""
        s = live.session
        s.keep_workspace_on_failure = True
        self._fail(
            live,
            LoopFailure.VERIFICATION,
            (
                f"the worktree changed during verification, on each of {STABILITY_ATTEMPTS} "
                f"attempts ({name_paths(verification.moved)}), so no result was accepted: "
                "something is still writing there (the agent, a process it left running, or "
                "typing in its pane). Stop it and start the task again; the worktree is kept"
            ),
        )

    async def _finish_green(self, live: LiveSession) -> None:
        """Every check passed on a tree that held still: a diff for approval,
        or, when the verified tree is the start commit's, a finding that the
        premise was wrong."""
        s = live.session
        assert s.start_commit is not None and s.worktree is not None
        if s.state.is_terminal:
            return
        start_tree = await asyncio.to_thread(tree_of, Path(s.worktree), s.start_commit)
        if s.review_tree == start_tree:
            finding = NoChangeFinding(
                kind="premise_wrong",
                summary="every contract check passes and the session changed nothing",
                evidence=(
                    f"After {s.iterations} iteration(s) the worktree is unchanged and every "
                    "check passes; the engine made no report_no_change nomination."
                ),
                baseline_checks=list(s.baseline),
            )
            self._approval.present_finding(live, finding)
            return
        try:
            await self._approval.present_diff(live)
        except WorktreeMetadataChanged as exc:
            self._registry.emit(live, ErrorData(message=str(exc)))
            s.keep_workspace_on_failure = True
            self._fail(live, LoopFailure.EXECUTION, str(exc))
        except CorralError as exc:
            self._registry.emit(live, ErrorData(message=f"diff generation failed: {exc}"))
            s.keep_workspace_on_failure = True
            self._fail(live, LoopFailure.INFRASTRUCTURE, f"diff generation failed: {exc}")

    async def _finish_nomination(self, live: LiveSession, finding: NoChangeFinding) -> None:
        """The engine reported that no change is needed: a finding only when it
        left the tree untouched."""
        s = live.session
        ws = live.workspace
        assert ws is not None and s.start_commit is not None
        if await asyncio.to_thread(ws.is_pristine, s.start_commit):
            finding.baseline_checks = list(s.baseline)
            self._approval.present_finding(live, finding)
        else:
            self._fail(
                live,
                LoopFailure.EXECUTION,
                (
                    "the engine reported that no change is needed but had already made a "
                    "successful edit; a finding must leave the tree untouched"
                ),
            )

    def _fail(self, live: LiveSession, failure: LoopFailure, error: str) -> None:
        s = live.session
        if s.state.is_terminal:
            return
        registry = self._registry
        if failure is LoopFailure.CANCELLED:
            registry.transition(live, S.ABANDONED)
            return
        kind = failure_kind_for(
            failure,
            budget_flag=live.attention.budget_exhausted,
            auth_flag=live.attention.auth_outstanding,
        )
        if kind is FailureKind.BUDGET_EXHAUSTED:
            s.keep_workspace_on_failure = True
            if not live.attention.budget_exhausted:
                registry.emit(live, BudgetExhaustedData(reason=error, iterations=s.iterations))
        s.error = error
        s.failure_kind = kind
        # A failure is not the operator's decision, so nothing is thrown away:
        # the worktree and whatever the agent left in it stay (retained, never
        # swept) for a look, a `retry --keep-edits` on top of it, or a prune
        # that asks.
        s.keep_workspace_on_failure = True
        if s.worktree:
            registry.emit(
                live,
                ErrorData(
                    message=f"session failed; worktree retained for postmortem at {s.worktree}"
                ),
            )
        registry.transition(live, S.FAILED)
        try:
            self._workspaces.retain(s.worktree, note=f"failed: {error}"[:300])
        except Exception as exc:  # its lease stays in use: nothing removes it either
            if not is_disk_full(exc):
                raise
            log.warning("the lease of %s could not be marked retained: %s", s.worktree, exc)
