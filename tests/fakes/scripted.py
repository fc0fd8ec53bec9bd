"""A scripted drafter and engine for tests: contracts and agent steps played
in order, so a test decides exactly what the model "does" and when it parks.

They do real work where it matters: the scripted engine writes real files in
the real worktree, so the runtime's verification and the diff are genuine.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from corral.supervisor.contracts.checks import run_command
from corral.supervisor.contracts.drafting import DraftingError, DraftRequest, ReviseRequest
from corral.supervisor.engines.base import Engine, EngineOutcome, RunContext
from corral.supervisor.errors import CorralError
from corral.supervisor.events import PlanTextData, ToolCallData
from corral.supervisor.models import ContractCheck, NoChangeFinding, OutcomeContract
from corral.supervisor.sandbox import SandboxPolicy
from corral.supervisor.states import LoopFailure

# --- drafter ---------------------------------------------------------------

DraftStep = OutcomeContract | Exception | Callable[[DraftRequest], Awaitable[OutcomeContract]]


class ScriptedDrafter:
    """Serves contracts (or errors) in order; the last one repeats.

    `gate`, when set, makes every call wait for it first (a parked model).
    """

    name = "scripted"

    def __init__(
        self,
        drafts: Sequence[DraftStep] = (),
        *,
        revisions: Sequence[DraftStep] = (),
        gate: asyncio.Event | None = None,
    ) -> None:
        self.drafts = list(drafts)
        self.revisions = list(revisions)
        self.gate = gate
        self.calls: list[DraftRequest] = []

    async def _serve(self, steps: list[DraftStep], request: DraftRequest) -> OutcomeContract:
        self.calls.append(request)
        if self.gate is not None:
            await self.gate.wait()
        if not steps:
            raise DraftingError("the scripted drafter has nothing to serve")
        step = steps.pop(0) if len(steps) > 1 else steps[0]
        if isinstance(step, Exception):
            raise step
        if isinstance(step, OutcomeContract):
            return step.model_copy(deep=True)
        return await step(request)

    async def draft(self, request: DraftRequest) -> OutcomeContract:
        return await self._serve(self.drafts, request)

    async def revise(self, request: ReviseRequest) -> OutcomeContract:
        if not self.revisions:
            assert request.prior is not None
            return request.prior.model_copy(deep=True)
        return await self._serve(self.revisions, request)


# --- engine ----------------------------------------------------------------


@dataclass
class Say:
    text: str


@dataclass
class Write:
    path: str
    content: str


@dataclass
class Run:
    """Run a shell command in the worktree (reported as a tool call)."""

    command: str
    timeout: float = 60


@dataclass
class Ask:
    prompt: str
    options: list[str] = field(default_factory=list)
    write_answer_to: str | None = None


@dataclass
class Sleep:
    seconds: float


@dataclass
class Wait:
    """Park until the event is set (a gated model)."""

    event: asyncio.Event


@dataclass
class Iteration:
    n: int


@dataclass
class Fail:
    failure: LoopFailure
    error: str


@dataclass
class Nominate:
    summary: str
    evidence: str = ""
    kind: str = "premise_wrong"


@dataclass
class Impossible:
    """The agent says the task cannot be done as specified (the built-in
    engine's `report_impossible` tool ends its round this way)."""

    reason: str


Step = Say | Write | Run | Ask | Sleep | Wait | Iteration | Fail | Nominate | Impossible


class ScriptedEngine:
    """Plays one script per round (the last one repeats for repair rounds)."""

    def __init__(self, rounds: Sequence[Sequence[Step]] = ((),), *, label: str = "scripted"):
        self.rounds = [list(r) for r in rounds] or [[]]
        self.label = label
        self.contexts: list[RunContext] = []

    async def run(self, ctx: RunContext) -> EngineOutcome:
        self.contexts.append(ctx)
        script = self.rounds[min(ctx.round - 1, len(self.rounds) - 1)]
        iterations = 0
        for step in script:
            for note in ctx.take_guidance():
                ctx.emit(PlanTextData(text=f"Taking guidance: {note}"))
            match step:
                case Say(text):
                    ctx.emit(PlanTextData(text=text))
                case Write(path, content):
                    target = _inside(ctx.worktree, path)
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_text(content, encoding="utf-8")
                    ctx.emit(ToolCallData.with_args("write_file", {"path": path}))
                case Run(command, timeout):
                    ctx.emit(ToolCallData.with_args("shell", {"command": command}))
                    # an agent (not the built-in shell): unconfined, as external agents run
                    await run_command(
                        command, ctx.worktree, timeout, policy=SandboxPolicy(enabled=False)
                    )
                case Ask(prompt, options, write_to):
                    answer = await ctx.ask_user(prompt, options)
                    ctx.emit(PlanTextData(text=f"Operator answered: {answer}"))
                    if write_to:
                        _inside(ctx.worktree, write_to).write_text(answer, encoding="utf-8")
                case Sleep(seconds):
                    await asyncio.sleep(seconds)
                case Wait(event):
                    await event.wait()
                case Iteration(n):
                    iterations = n
                    ctx.iteration_started(n)
                case Fail(failure, error):
                    return EngineOutcome(failure=failure, error=error, iterations=iterations)
                case Impossible(reason):
                    return EngineOutcome(
                        iterations=max(iterations, 1), impossible=reason, authored_by=[self.label]
                    )
                case Nominate(summary, evidence, kind):
                    return EngineOutcome(
                        iterations=iterations,
                        nomination=NoChangeFinding(kind=kind, summary=summary, evidence=evidence),
                        authored_by=[self.label],
                    )
        return EngineOutcome(iterations=max(iterations, 1), authored_by=[self.label])


def _inside(root: Path, rel: str) -> Path:
    target = (root / rel).resolve()
    if not target.is_relative_to(root.resolve()):
        raise CorralError(f"path {rel!r} is outside the worktree")
    return target


class ScriptedEngines:
    """An engine registry that serves one engine for every request."""

    def __init__(self, engine: Engine | Callable[[], Engine]) -> None:
        self._engine = engine

    def resolve(self, requested: str) -> tuple[str, str]:
        label = getattr(self._engine, "label", "scripted")
        if requested in ("auto", "native", "scripted", label):
            return label, f"{requested} → {label} (scripted engine)"
        raise CorralError(
            f"engine {requested!r} is not available here; use auto, native or scripted"
        )

    def create(self, label: str) -> Engine:
        engine = self._engine
        if isinstance(engine, ScriptedEngine) or hasattr(engine, "run"):
            return engine  # type: ignore[return-value]
        return engine()


def contract(*checks: tuple[str, str], description: str = "", **kw: Any) -> OutcomeContract:
    """Shorthand: `contract(("tests", "pytest -q"), ...)`."""
    return OutcomeContract(
        description=description,
        checks=[ContractCheck(name=n, command=c, **kw) for n, c in checks],
    )
