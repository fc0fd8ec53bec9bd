"""The engine seam. An engine gets a `RunContext` (worktree, intent, contract,
budgets, and the supervisor's hooks for events, questions and guidance) and
returns an `EngineOutcome`. It never decides success: the runtime re-runs the
contract afterwards."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..events import EventData
from ..models import CheckResult, NoChangeFinding, OutcomeContract, TokenUse
from ..session.messages import Message
from ..states import LoopFailure


@dataclass
class EngineOutcome:
    failure: LoopFailure | None = None
    error: str | None = None
    iterations: int = 0
    nomination: NoChangeFinding | None = None
    authored_by: list[str] = field(default_factory=list)
    cost_usd: float | None = None
    # The agent stopped and its own conversation can be resumed: the session
    # waits, dormant, for a revive instead of failing (`error` says why).
    dormant: bool = False
    # a failure that is not the work's (its agent stopped on purpose): the
    # worktree stays for a retry or a look
    keep_worktree: bool = False
    # the engine that did the work when it differs from the session's (the
    # foreman's repair on top of its union is its agent's work)
    ran: str | None = None
    # the agent says the task cannot be done as specified, and why: the
    # operator decides (never verified, never sent back for repair)
    impossible: str | None = None


OPERATOR_REPLY = "operator_reply"  # a "failing check" that is the operator's answer


def operator_reply(message: str) -> CheckResult:
    """The operator's answer to the agent's report that the task is
    impossible, handed to the next round as its only "failing check" (every
    engine's repair prompt carries it; `go_on_prompt` words it)."""
    return CheckResult(name=OPERATOR_REPLY, passed=False, output_tail=message)


def go_on_prompt(failing: list[CheckResult]) -> str | None:
    """The next round's prompt when it answers the agent's report (None: it
    is an ordinary repair round)."""
    replies = [r.output_tail for r in failing if r.name == OPERATOR_REPLY]
    if not replies:
        return None
    return (
        "The operator read your report that the task cannot be done as specified, and "
        f"answers: go on.\n\n{replies[-1].strip()}\n\nWhen you stop, corral runs the checks."
    )


def held_back_line(contract: OutcomeContract) -> str:
    """What the agent's task prompt says of the hidden checks: how many,
    never which (empty when there are none)."""
    n = len(contract.hidden_checks)
    if not n:
        return ""
    return (
        f"\nThe operator also holds back {n} check{'s' if n != 1 else ''} you cannot see; "
        "corral runs them on your work too, so make it right for every input the task "
        "means, not only the visible tests' inputs."
    )


def judging_note(how_to_report: str) -> str:
    """What every repair prompt says about changing the exam, and the way out."""
    return (
        "Changing how the work is judged (tests, test configuration, runner or CI scripts) "
        "does not make a check pass: corral shows every such change to the operator, and "
        "it never passes by itself. If the task cannot be done as specified (the tests "
        f"contradict the intent), say so instead: {how_to_report}. The operator then decides."
    )


@dataclass
class RunContext:
    session_id: str
    intent: str
    contract: OutcomeContract
    worktree: Path
    max_iterations: int
    deadline: float | None  # time.monotonic() value shared by every rung
    round: int  # 1 for the first run, 2+ for repair rounds
    failing_checks: list[CheckResult]
    emit: Callable[[EventData], None]  # announce one event of the session
    ask_user: Callable[[str, list[str]], Awaitable[str]]
    take_guidance: Callable[[], list[str]]
    iteration_started: Callable[[int], None]
    withdraw_question: Callable[[], None] = lambda: None
    note_pane: Callable[[dict[str, Any] | None], None] = lambda _pane: None
    # The agent's status when its engine knows it exactly (a protocol's
    # answer), rather than from a pane corral reads.
    note_status: Callable[[Any], None] = lambda _reading: None
    # What an ACP agent announced it can switch (`models.AgentOffers`), kept
    # on the session each time it changes.
    note_offers: Callable[[Any], None] = lambda _offers: None
    detaching: Callable[[], bool] = lambda: False  # True while corral closes (agents live on)
    # True once the operator cancelled the session or it ended: no new agent
    # process may start for it, whatever the engine was doing when it heard.
    stopping: Callable[[], bool] = lambda: False
    # The agent's own session to resume when a new pane starts (None: start afresh).
    resume_id: Callable[[], str | None] = lambda: None
    # Record the agent's own session named at launch: (its id, its transcript).
    note_agent_session: Callable[[str, str | None], None] = lambda _sid, _path: None
    # Tokens the agent reported over its own protocol (an ACP agent's `usage`):
    # its running total, by the name it is priced by.
    note_usage: Callable[[str, TokenUse], None] = lambda _model, _use: None
    # Messages from other sessions waiting for the agent's idle prompt, and
    # where each ended (accepted / rejected / ambiguous, with the reason).
    take_messages: Callable[[], list[Message]] = lambda: []
    messages_ended: Callable[[list[Message], str, str | None], None] = lambda _m, _s, _r: None
    # The session's pinned model: its configured name (the built-in engine's
    # strict choice) and the id an agent CLI is given with its model flag.
    model: str | None = None
    model_id: str | None = None
    # The model chain's hooks for this session (see `llm.chain`).
    on_model_hop: Callable[[Any], None] | None = None
    auth_wait: Callable[[str, str], Awaitable[None]] | None = None
    ledger: Any = None
    # A session on another host: where it runs (a `hosts.place.HostPlace`)
    # and its worktree there; None for a session run here.
    place: Any = None
    remote_worktree: str | None = None

    # rounds in all: the first run and the repairs the config allows
    rounds: int = 1

    def seconds_left(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.monotonic()

    @property
    def rounds_left(self) -> int:
        """Repair rounds still allowed after this one."""
        return max(0, self.rounds - self.round)


class Engine(Protocol):
    label: str

    async def run(self, ctx: RunContext) -> EngineOutcome: ...


class EngineRegistry(Protocol):
    """What a supervisor needs from its engines: resolve a request (`auto`, an
    agent's name) to an engine label and the reason for it, and create the
    engine for a label. A registry may also offer `native()` (the fallback)
    and `available()` (the choices for a new session)."""

    def resolve(self, requested: str) -> tuple[str, str]: ...

    def create(self, label: str) -> Engine: ...


EngineFactory = Callable[[str], Engine]
"""Maps the resolved engine label (`native`, `external:claude`, ...) to an engine."""
