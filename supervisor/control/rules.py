"""Who may call what: every caller rule of the owner's surface, decided here.

A method's own record (`surface.Calls`) says who may call it at all: a
person only (`person`), agents too (`agents`), an agent only about its own
session (`own_session`). `admit` reads those flags and is the one check every
way in runs before a handler: the control socket's dispatch (`server.py`)
and the MCP tools (`mcp.py`, each tool names its record). The few rules that
depend on a call's arguments or the operator's config (an agent starting a
session, giving hidden checks or a context pack, cancelling a run, speaking as
a session) are the functions below, called by the handlers that need them, so
no handler, handle method or command decides them itself.

The caller is the owner's classification of the connection (`callers.py`):
an unknown or doubtful peer is an agent, never the operator.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..errors import CorralError
from .callers import Agent, Caller

if TYPE_CHECKING:
    from .surface import Call

NOT_AN_AGENT = (
    "report_impossible is for an agent corral runs, about its own task; the owner does not "
    "take this caller for one"
)

HIDDEN_ARE_THE_OPERATORS = (
    "refused: hidden checks are the operator's, held back from agents; an agent cannot "
    "give them (start without hidden_checks)"
)

CONTEXT_IS_THE_OPERATORS = (
    "refused: loading another session's context is the operator's (corral run "
    "--context); an agent starts sessions without one"
)

START_PHRASE = "start a session"  # a person's, unless the operator lets agents start


@dataclasses.dataclass(frozen=True)
class Refusal:
    """Why a caller may not make a call. `phrase` is set when the method is a
    person's (the owner records the attempt where the operator sees it);
    `sentence` is what the caller reads otherwise."""

    sentence: str
    phrase: str | None = None


def admit(call: Call[Any, Any], caller: Caller | None, target: str | None) -> Refusal | None:
    """Whether `caller` may make `call` about session `target`, from the
    record's flags alone (None: the owner's own code, or the operator)."""
    if not isinstance(caller, Agent):
        return None
    if call.person is not None:
        return Refusal(person_refusal(caller, call.person, target), call.person)
    if not call.agents:
        return Refusal(
            f"refused: {caller.describe()} may not call {call.name}; it is the operator's"
        )
    if call.own_session and (caller.session_id is None or target != caller.session_id):
        return Refusal(
            f"refused: {caller.describe()} may call {call.name} only about its own session"
        )
    return None


def person_refusal(caller: Agent, phrase: str, target: str | None) -> str:
    """The sentence an agent reads when it tries what only a person may do."""
    return (
        f"refused: {caller.describe()} may not "
        f"{phrase.format(whose=whose(caller.session_id, target))}; "
        "only the operator can, from the console or their own terminal"
    )


def whose(caller: str | None, target: str | None) -> str:
    """Whose thing an agent reached for, as the refusal says it."""
    if target is None:
        return "a session's"
    if target == caller:
        return "its own"
    return f"session {target[-8:]}'s"


def start_refusal(
    caller: Caller | None, agents_may_start: bool, ancestry: Iterable[str] = ()
) -> str | None:
    """Why `caller` may not start a session or run (None: it may). An agent
    starts only where the operator allows (`[mcp] agents_may_start`); an
    `invoked_by` chain naming corral can only refuse, never let through."""
    if agents_may_start:
        return None
    if isinstance(caller, Agent):
        return (
            f"refused: this caller is {caller.describe()} ({caller.why}); the operator has "
            "not allowed agents to start runs ([mcp] agents_may_start = true in corral's "
            "config)"
        )
    chain = list(ancestry)
    if "corral" in chain:
        return (
            "refused: this caller is an agent running inside corral "
            f"(invoked by {'>'.join(chain)}); the operator has not allowed agents to "
            "start runs ([mcp] agents_may_start = true in corral's config)"
        )
    return None


def check_agent_start(caller: Caller | None, *, hidden_checks: bool, context: bool) -> None:
    """What an agent may not give a session it starts: hidden checks (the
    operator's, held back from agents) and another session's context."""
    if not isinstance(caller, Agent):
        return
    if hidden_checks:
        raise CorralError(HIDDEN_ARE_THE_OPERATORS)
    if context:
        raise CorralError(CONTEXT_IS_THE_OPERATORS)


def decides_notices(caller: Caller | None) -> bool:
    """Whether what the caller says it decided may silence the operator's
    notices: never an agent's (what it starts waits at gate 1, announced)."""
    return not isinstance(caller, Agent)


def passes_gates(caller: Caller | None) -> bool:
    """Whether the caller may pass a person's gate itself (confirm a contract,
    deliver): never an agent, whatever flags it gives (`corral run --yes`)."""
    return not isinstance(caller, Agent)


def sees_hidden_checks(caller: Caller | None) -> bool:
    """Whether the caller may read a hidden check's name, command, files or
    output: the operator's, held back from agents."""
    return not isinstance(caller, Agent)


def may_confirm_own_contract(caller: Caller | None, callers_may_confirm: bool) -> bool:
    """A run's caller confirms gate 1 itself only where the operator allows
    it, and never an agent: what an agent starts waits for a person."""
    return callers_may_confirm and passes_gates(caller)


def check_cancel_run(caller: Caller | None, started_by: str | None) -> None:
    """An agent cancels only the runs it started itself."""
    if isinstance(caller, Agent) and (caller.session_id is None or started_by != caller.session_id):
        raise CorralError(f"refused: {caller.describe()} may cancel only runs it started itself")


def own_session(caller: Caller | None) -> str:
    """The calling agent's own session (an agent reports only about its own)."""
    if not isinstance(caller, Agent) or caller.session_id is None:
        raise CorralError(NOT_AN_AGENT)
    return caller.session_id


def sender_of(caller: Caller, operator: str) -> str:
    """Who a message is from: the session the owner identified, or the
    operator. The `sender` a client names is not believed."""
    if not isinstance(caller, Agent):
        return operator
    if caller.session_id is None:
        raise CorralError(
            f"refused: {caller.describe()} sends no messages (the owner cannot tell "
            "which session it would speak for)"
        )
    return caller.session_id
