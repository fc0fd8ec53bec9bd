"""The built-in engine: corral's own model loop with worktree-confined tools.

One `run` is one round of the session (the first run, or a repair round that
starts from the failing checks). Each iteration is one model turn:
`iteration_started {n, max}`, queued operator guidance handed to the model as
a user message, the turn (its text to the event log, its token usage and cost
summed and emitted), then every tool call through the inspector chain and the
tool. The round ends when the model ends its turn without tool calls, when it
nominates a no-change finding, or when a budget runs out: `max_iterations`
turns, or the session's one wall-clock deadline (never restarted; each model
call gets the remaining time as its timeout).

The engine never decides success: corral re-runs the contract afterwards.
Operator policy files are read when a session's first round starts and stay
frozen for its later rounds; one that does not parse fails the run before any
model turn (`configuration`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..events import (
    BLOCKED_BY_POLICY,
    BLOCKED_BY_PROVIDER,
    GUIDANCE_DELIVERED,
    GUIDANCE_NOT_DELIVERED,
    BlockedData,
    ModelUsageData,
    OperatorGuidanceData,
    PlanTextData,
    ToolCallData,
    ToolDeniedData,
    ToolResultData,
)
from ..governance.chain import default_chain
from ..governance.env_scrub import invoked_by_chain, scrubbed_env
from ..governance.operator_policy import OperatorPolicy
from ..governance.policy_files import PolicyFileError, load_operator_policy
from ..llm.base import Message, ModelError, ModelProvider, ToolCall, ToolSpec, Turn, Usage
from ..llm.chain import HOP_REASONS, Hop, ModelChain
from ..models import CheckResult, OutcomeContract
from ..states import LoopFailure
from .base import EngineOutcome, RunContext, go_on_prompt, held_back_line, judging_note
from .tools.results import ToolResult, short_args
from .tools.workbench import Workbench

DEFAULT_CALL_TIMEOUT = 600.0  # a model call's timeout when the session has no deadline
PLAN_TEXT_CHARS = 4000
FAILING_TAIL_LINES = 40
FAILING_TAIL_CHARS = 4000


def system_prompt(
    intent: str, contract: OutcomeContract, worktree: Path, tools: Sequence[str]
) -> str:
    checks = "\n".join(f"- {c.name}: `{c.command.strip()}`" for c in contract.checks)
    parts = [
        "You are corral's built-in coding engine. You change code in one git worktree with the "
        "tools you are given; a human operator supervises the run and reviews your diff.",
        f"## Task\n{intent.strip()}",
    ]
    if contract.description.strip():
        parts.append(f"## What done means\n{contract.description.strip()}")
    parts.append(
        "## Checks\nDone means every one of these checks passes. corral re-runs these itself "
        f"when you stop; you cannot declare success:\n{checks or '- (no checks)'}"
        + held_back_line(contract)
    )
    rules = [
        f"Work only in this directory ({worktree}); tool paths are relative to it and nothing "
        "outside it is reachable.",
        "Do not commit, push, open pull requests or publish anything: the operator reviews "
        "and delivers your diff.",
        "Read a file before replacing it with write_file; prefer edit_file for changes to "
        "existing files.",
    ]
    if "shell" in tools:
        rules.append("Run the checks yourself with the shell tool to see where you stand.")
    if "ask_user" in tools:
        rules.append(
            "Use ask_user only for decisions the operator must make; the run waits for the answer."
        )
    if "report_no_change" in tools:
        rules.append(
            "If investigation shows the task needs no change (its premise is wrong, or the "
            "behaviour is deliberate), call report_no_change with evidence instead of editing; "
            "it is refused once you have changed anything."
        )
    if "report_impossible" in tools:
        rules.append(
            "If the task cannot be done as specified (its tests contradict its intent), call "
            "report_impossible with the reason instead of changing the tests or special-casing "
            "their inputs; the operator decides."
        )
    rules.append(
        "Some actions are denied by policy; a denial says why, so take another way instead of "
        "retrying."
    )
    rules.append("When you are done, reply with a short summary and no tool calls.")
    parts.append("## Rules\n" + "\n".join(f"- {r}" for r in rules))
    return "\n\n".join(parts)


def repair_message(failing: Sequence[CheckResult], round_: int) -> str:
    answer = go_on_prompt(list(failing))
    if answer is not None:
        return answer
    parts = [
        f"corral re-ran the contract and these checks fail (repair round {max(1, round_ - 1)}):"
    ]
    for r in failing:
        status = "timed out" if r.timed_out else f"exit code {r.exit_code}"
        tail = "\n".join(r.output_tail.strip().splitlines()[-FAILING_TAIL_LINES:])
        tail = tail[-FAILING_TAIL_CHARS:] or "(no output)"
        parts.append(f"\n## {r.name} ({status})\n{tail}")
    parts.append(
        "\nYour earlier changes are still in the worktree. Fix the cause (not the checks), "
        "then stop."
    )
    parts.append(judging_note("call report_impossible with the reason"))
    return "\n".join(parts)


def guidance_message(notes: Sequence[str]) -> str:
    lines = "\n".join(f"- {n.strip()}" for n in notes)
    return (
        "Guidance from the operator supervising this run (it takes precedence over your "
        f"plan):\n{lines}"
    )


@dataclass
class _Totals:
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float | None = None

    def add(self, usage: Usage) -> None:
        self.tokens_in += usage.input_tokens
        self.tokens_out += usage.output_tokens
        if usage.cost_usd is not None:
            self.cost_usd = (self.cost_usd or 0.0) + usage.cost_usd


class NativeEngine:
    """Runs `provider` in a tool loop over the session's worktree."""

    label = "native"

    def __init__(
        self,
        provider: ModelProvider,
        *,
        max_tokens: int = 4096,
        temperature: float = 0.0,
        global_policy: Path | None = None,
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
    ) -> None:
        self.provider = provider
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.global_policy = global_policy  # None: ~/.config/corral/policy.toml
        self.call_timeout = call_timeout
        self._policies: dict[str, OperatorPolicy] = {}

    # -- set-up -----------------------------------------------------------------

    def _policy(self, ctx: RunContext) -> OperatorPolicy:
        """Read once per session (the first round) and frozen for later rounds."""
        policy = self._policies.get(ctx.session_id)
        if policy is None:
            policy = load_operator_policy(ctx.worktree, self.global_policy)
            self._policies[ctx.session_id] = policy
        return policy

    @staticmethod
    def shell_env() -> dict[str, str]:
        env = scrubbed_env(invoked_by=invoked_by_chain("engine:native"))
        env.update(GIT_EDITOR="true", GIT_PAGER="cat", PAGER="cat")
        return env

    # -- the run ------------------------------------------------------------------

    def _provider_for(self, ctx: RunContext) -> ModelProvider:
        """The session's view of the model chain: its pin kept strictly, its
        hops journaled, its ledger filled; any other provider is used as is."""
        chain = self.provider
        if not isinstance(chain, ModelChain):
            return chain
        journal = ctx.on_model_hop

        def on_hop(hop: Hop) -> None:
            if journal is not None:
                journal(hop)
            if hop.reason == HOP_REASONS["rate_limit"]:  # its provider refused: typed
                ctx.emit(
                    BlockedData(
                        what=f"a request to the model {hop.from_}",
                        why=hop.detail or f"{hop.from_} is rate-limited",
                        by=BLOCKED_BY_PROVIDER,
                    )
                )

        return chain.view(
            pin=chain.get(ctx.model) if ctx.model else None,
            on_hop=on_hop,
            auth_wait=ctx.auth_wait,
            ledger=ctx.ledger,
        )

    async def run(self, ctx: RunContext) -> EngineOutcome:
        provider = self._provider_for(ctx)
        try:
            policy = self._policy(ctx)
        except PolicyFileError as exc:
            return EngineOutcome(failure=LoopFailure.CONFIGURATION, error=str(exc))
        root = ctx.worktree
        bench = Workbench(
            root,
            chain=default_chain(policy),
            env=self.shell_env(),
            ask=ctx.ask_user,
            withdraw=ctx.withdraw_question,
            seconds_left=ctx.seconds_left,
            hidden=lambda path: policy.path_denied(path, root) is not None,
            disabled=policy.denied_tools,
        )
        specs = bench.specs()
        if policy.rules and ctx.round == 1:
            ctx.emit(
                PlanTextData(
                    text="Operator policy in force: " + ", ".join(str(p) for p in policy.sources)
                ),
            )
        names = [s.name for s in specs]
        first = (
            repair_message(ctx.failing_checks, ctx.round)
            if ctx.round > 1
            else "Start on the task described above."
        )
        messages: list[Message] = [
            Message("system", system_prompt(ctx.intent, ctx.contract, root, names)),
            Message("user", first),
        ]
        totals = _Totals()
        n = 0
        pending: list[str] = []

        def outcome(**kw: Any) -> EngineOutcome:
            served = provider.ledger.served if isinstance(provider, ModelChain) else []
            return EngineOutcome(
                iterations=n,
                authored_by=[self.label, *served],
                cost_usd=totals.cost_usd,
                **kw,
            )

        def out_of_time() -> EngineOutcome:
            return outcome(
                failure=LoopFailure.BUDGET_EXHAUSTED,
                error=(
                    f"the session's wall-clock budget ran out during iteration {n} of the "
                    "built-in engine"
                ),
            )

        while True:
            if n >= ctx.max_iterations:
                return outcome(
                    failure=LoopFailure.BUDGET_EXHAUSTED,
                    error=(
                        f"the built-in engine used all {ctx.max_iterations} iterations without "
                        "finishing"
                    ),
                )
            left = ctx.seconds_left()
            if left is not None and left <= 0:
                return out_of_time()
            n += 1
            ctx.iteration_started(n)
            pending += ctx.take_guidance()
            if pending:
                messages.append(Message("user", guidance_message(pending)))
                ctx.emit(
                    PlanTextData(
                        text="Handing operator guidance to the model: " + " / ".join(pending)
                    ),
                )
                for note in pending:
                    ctx.emit(OperatorGuidanceData(text=note, status=GUIDANCE_DELIVERED))
                pending = []
            try:
                turn = await self._complete(provider, messages, specs, left)
            except TimeoutError:
                return out_of_time()
            except ModelError as exc:
                return self._model_failure(exc, ctx, outcome)
            totals.add(turn.usage)
            ctx.emit(
                ModelUsageData(
                    engine=self.label,
                    model=turn.model or provider.model,
                    iteration=n,
                    tokens_in=totals.tokens_in,
                    tokens_out=totals.tokens_out,
                    cost_usd=totals.cost_usd,
                ),
            )
            text = turn.text.strip()
            if text:
                ctx.emit(PlanTextData(text=text[:PLAN_TEXT_CHARS]))
            messages.append(Message("assistant", turn.text, tool_calls=tuple(turn.tool_calls)))
            if not turn.tool_calls:
                pending += ctx.take_guidance()
                left = ctx.seconds_left()
                room = n < ctx.max_iterations and (left is None or left > 0)
                if pending and room:
                    continue  # guidance arrived while the model finished: hand it over
                if pending:
                    ctx.emit(
                        PlanTextData(
                            text="Guidance arrived after the model finished, with no budget "
                            "left to act on it: " + " / ".join(pending)
                        ),
                    )
                    for note in pending:
                        ctx.emit(
                            OperatorGuidanceData(
                                text=note,
                                status=GUIDANCE_NOT_DELIVERED,
                                reason="the model had finished with no budget left to act on it",
                            )
                        )
                    return outcome()
                if turn.stop_reason == "max_tokens":
                    messages.append(
                        Message("user", "Your reply was cut off at the output limit; continue.")
                    )
                    continue
                return outcome()
            for call in turn.tool_calls:
                left = ctx.seconds_left()
                if left is not None and left <= 0:
                    messages.append(self._skipped(call))
                    continue
                result = await self._tool(ctx, bench, call)
                messages.append(Message("tool", result.text, tool_call_id=call.id, name=call.name))
                if result.nomination is not None:
                    return outcome(nomination=result.nomination)
                if result.impossible is not None:
                    return outcome(impossible=result.impossible)

    async def _complete(
        self,
        provider: ModelProvider,
        messages: list[Message],
        specs: list[ToolSpec],
        left: float | None,
    ) -> Turn:
        timeout = self.call_timeout if left is None else max(left, 0.001)
        call = provider.complete(
            list(messages),
            specs,
            max_tokens=self.max_tokens,
            temperature=self.temperature,
            timeout=timeout,
        )
        if left is None:
            return await call
        return await asyncio.wait_for(call, timeout)

    def _model_failure(
        self, exc: ModelError, ctx: RunContext, outcome: Callable[..., EngineOutcome]
    ) -> EngineOutcome:
        left = ctx.seconds_left()
        if exc.kind == "rate_limit":  # HTTP 429 from the last model it could try
            ctx.emit(
                BlockedData(what="a request to the model", why=str(exc), by=BLOCKED_BY_PROVIDER)
            )
        if exc.kind == "auth":
            return outcome(failure=LoopFailure.NEEDS_AUTH, error=str(exc))
        if exc.kind == "unavailable":
            return outcome(failure=LoopFailure.ENGINE_UNAVAILABLE, error=str(exc))
        if exc.kind == "timeout" and left is not None and left <= 0.5:
            return outcome(
                failure=LoopFailure.BUDGET_EXHAUSTED,
                error="the session's wall-clock budget ran out while the model was answering",
            )
        return outcome(
            failure=LoopFailure.INFRASTRUCTURE,
            error=f"the model call failed ({exc.kind}): {exc}",
        )

    @staticmethod
    def _skipped(call: ToolCall) -> Message:
        return Message(
            "tool",
            "not run: the session's time budget ran out",
            tool_call_id=call.id,
            name=call.name,
        )

    async def _tool(self, ctx: RunContext, bench: Workbench, call: ToolCall) -> ToolResult:
        args = short_args(call.name, call.arguments if isinstance(call.arguments, dict) else {})
        result = await bench.call(
            call, on_start=lambda: ctx.emit(ToolCallData.with_args(call.name, args))
        )
        if result.denied is not None:
            ctx.emit(ToolDeniedData.with_args(call.name, args, denied=result.denied))
            # the typed notice every agent kind gives: what, why, and by whom
            target = next(iter(args.values()), "") if args else ""
            what = f"{call.name} {target}".strip()
            ctx.emit(BlockedData(what=what, why=result.denied, by=BLOCKED_BY_POLICY))
        else:
            ctx.emit(
                ToolResultData(tool=call.name, result=result.summary, ok=result.ok),
            )
        return result
