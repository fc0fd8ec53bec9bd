"""Run handles for callers that cannot hold a stream open (MCP tools): start
returns a handle at once, poll reads what happened since a cursor, cancel
stops the session. The work itself is an ordinary session on the board; a
handle only adds a cursor over its events and the bounds below.

Bounds, so a forgetful caller cannot spend the operator's machine: at most
`max_open_runs` runs started this way are open at once (a start past it is
refused, never queued); a handle nobody polled for `idle_ttl_secs` is reaped
(the handle dropped; its session cancelled only while no person's decision is
pending: a session at a gate — a contract to confirm, a question, a sign-in, a
diff or finding to approve — is left on the board for the operator, and
counts as open until it ends); each handle keeps the last `event_buffer_max`
events and states how many a poll missed.

Gates stay human: a run waits at gate 1 unless the caller gave a contract
*and* the operator allowed MCP callers to confirm (`[mcp]
callers_may_confirm`) *and* the caller is not an agent; approval of the diff
is always the operator's.

Who calls is the owner's classification of the connection (`callers.py`):
an agent starts runs only where `[mcp] agents_may_start` allows, and what
it starts always stops at gate 1. The `invoked_by` chain a caller sends is
recorded as it says it, and can only refuse it (a chain naming corral), never
let it through.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import ValidationError
from pydantic_core import to_json

from ..contracts.files import load_contract
from ..contracts.hidden import for_agent
from ..errors import CorralError
from ..models import OutcomeContract
from ..session.journal import SubscriptionClosed, SubscriptionDropped
from ..states import CoderState, NeedsYou
from . import rules
from .callers import Agent, Caller
from .protocol import StartArgs, event_row
from .rules import NOT_AN_AGENT as NOT_AN_AGENT  # where tests and the MCP bridge read it
from .start_keys import StartKeys

if TYPE_CHECKING:
    from ..api import Supervisor

log = logging.getLogger("corral.supervisor.control")

MAX_OPEN_RUNS = 8
IDLE_TTL_SECS = 3600.0
EVENT_BUFFER_MAX = 2000
POLL_AFTER_MS = 2000
REAP_INTERVAL_SECS = 60.0
RUN_PREFIX = "mcp-run-"
RUNS_LEDGER = "mcp-runs.jsonl"  # in the state dir: who started which run

# a run here waits for a person, whatever `needs_you` reads at the instant
GATE_STATES = frozenset({CoderState.CONTRACT_PROPOSED, CoderState.NEEDS_APPROVAL})

HANDLE_STATUS = {
    CoderState.MERGED: "ok",
    CoderState.REPORTED: "ok",
    CoderState.FAILED: "error",
    CoderState.ABANDONED: "cancelled",
}


@dataclass(frozen=True)
class RunBounds:
    max_open_runs: int = MAX_OPEN_RUNS
    idle_ttl_secs: float = IDLE_TTL_SECS
    event_buffer_max: int = EVENT_BUFFER_MAX


@dataclass(frozen=True)
class CallerPolicy:
    """What the operator lets MCP callers do (config table `[mcp]`)."""

    callers_may_confirm: bool = False  # confirm gate 1 when they give a contract
    agents_may_start: bool = False  # an agent running inside corral may start runs


class AssistantTools(Protocol):
    """What the MCP tools call: the owner's handle table, or a bridge to it."""

    async def start(self, args: StartArgs, caller: Caller | None = None) -> dict[str, Any]: ...
    async def poll(self, run_id: str, since_seq: int) -> dict[str, Any]: ...
    async def cancel(self, run_id: str, caller: Caller | None = None) -> dict[str, Any]: ...
    async def sessions_list(self) -> list[dict[str, Any]]: ...
    async def session_get(self, session_id: str) -> dict[str, Any]: ...
    async def report_impossible(self, reason: str, caller: Caller | None = None) -> str: ...


HIDDEN_NOT_HERE = (
    "hidden checks are the operator's, held back from agents: a run started here cannot "
    "hold them (give them with corral run --hidden-check or in the console)"
)


def chain_links(chain: str | None) -> list[str]:
    """`a>b>c` (the `CORRAL_INVOKED_BY` form) as its links, lowercased."""
    return [link.strip().lower() for link in (chain or "").split(">") if link.strip()]


def merge_ancestry(base: list[str], invoked_by: str | None) -> list[str]:
    """The owner's own chain, then the caller's (its own chain or its name),
    without repeating the link where they meet."""
    merged = list(base)
    for link in chain_links(invoked_by):
        if not merged or merged[-1] != link:
            merged.append(link)
    return merged


@dataclass
class _Run:
    run_id: str
    ancestry: list[str]
    created_at: float
    last_poll: float
    session_id: str | None = None
    events: deque[dict[str, Any]] = field(default_factory=deque)
    next_seq: int = 0
    trimmed: int = 0  # events dropped from the head (or never received: a dropped feed)
    pump: asyncio.Task[None] | None = None
    confirmer: asyncio.Task[None] | None = None
    started_by: str | None = None  # the agent's session that started it (None: the operator)


class HandleTable:
    """The owner's run handles (one table per owner, in memory: a handle does
    not survive a restart, though its session does)."""

    def __init__(
        self,
        supervisor: Supervisor,
        *,
        policy: CallerPolicy | None = None,
        bounds: RunBounds | None = None,
        clock: Callable[[], float] = time.time,
        base_chain: str | None = None,
        run_ids: Callable[[], str] | None = None,
    ) -> None:
        self.sup = supervisor
        self.run_ids = run_ids or (lambda: RUN_PREFIX + uuid.uuid4().hex)
        self.policy = policy or CallerPolicy()
        self.bounds = bounds or RunBounds()
        self.clock = clock
        # read once: the ancestry must not depend on who calls later
        chain = os.environ.get("CORRAL_INVOKED_BY") if base_chain is None else base_chain
        self.base_ancestry = chain_links(chain)
        self.runs: dict[str, _Run] = {}
        # sessions whose handle was reaped while they waited for a person:
        # still open (they count toward `max_open_runs`) until they end
        self.released: set[str] = set()
        self.start_keys = StartKeys(clock)
        self._reaper: asyncio.Task[None] | None = None

    # -- lifetime ----------------------------------------------------------------------

    def start_reaper(self, interval: float = REAP_INTERVAL_SECS) -> None:
        async def loop() -> None:
            while True:
                await asyncio.sleep(interval)
                try:
                    await self.reap_idle()
                except Exception:
                    log.exception("mcp: reaping idle runs failed")

        self._reaper = asyncio.get_running_loop().create_task(loop())

    async def close(self) -> None:
        """Stop reading; the sessions themselves stay with the owner."""
        if self._reaper is not None:
            self._reaper.cancel()
        for run in self.runs.values():
            for task in (run.pump, run.confirmer):
                if task is not None:
                    task.cancel()
        self.runs.clear()

    # -- the tools ---------------------------------------------------------------------

    def open_runs(self) -> int:
        self.released = {sid for sid in self.released if not self._terminal(sid)}
        handled = sum(1 for run in self.runs.values() if self._status(run) == "running")
        return handled + len(self.released)

    async def start(self, args: StartArgs, caller: Caller | None = None) -> dict[str, Any]:
        """Start a run for `caller` (None: the owner's own code); with an
        `idempotency_key`, once per key however often it is repeated."""
        return await self.start_keys.once(args, caller, lambda: self._start(args, caller))

    async def _start(self, args: StartArgs, caller: Caller | None) -> dict[str, Any]:
        if not args.intent.strip():
            raise CorralError("intent is empty: say what the run should achieve")
        ancestry = merge_ancestry(self.base_ancestry, args.invoked_by)
        agent = caller if isinstance(caller, Agent) else None
        refused = rules.start_refusal(caller, self.policy.agents_may_start, ancestry)
        if refused is not None:
            raise CorralError(refused)
        repo = Path(args.repo).expanduser()
        if not repo.is_absolute() or not repo.is_dir():
            raise CorralError(
                f"repo is not a directory: {args.repo}. Pass the absolute path of the git "
                "repository the run should work in."
            )
        contract = self._contract(args.contract)
        await self.reap_idle()
        if self.open_runs() >= self.bounds.max_open_runs:
            waiting = (
                f" ({len(self.released)} of them wait for the operator on the board, their "
                "handles released after nobody polled them)"
                if self.released
                else ""
            )
            raise CorralError(
                f"{self.bounds.max_open_runs} runs started through MCP are already open{waiting}, "
                "which is the limit. Wait for one to reach a terminal status (assistant_poll) or "
                "stop one with assistant_cancel, then start again: starts are refused, never "
                "queued."
            )
        now = self.clock()
        run = _Run(self.run_ids(), ancestry, now, now)
        if agent is not None:
            run.started_by = agent.session_id or "an agent of an unknown session"
        self.runs[run.run_id] = run  # the slot is taken before anything awaits
        try:
            started = await self.sup.start(
                args.intent,
                repo,
                engine=args.engine,
                base=args.base,
                wait=False,
                contract=contract,
            )
        except BaseException:
            self.runs.pop(run.run_id, None)
            raise
        run.session_id = started.session_id
        loop = asyncio.get_running_loop()
        run.pump = loop.create_task(self._pump(run))
        # a run an agent started always waits for a person at gate 1
        caller_confirms = contract is not None and rules.may_confirm_own_contract(
            caller, self.policy.callers_may_confirm
        )
        if caller_confirms:
            run.confirmer = loop.create_task(self._confirm(run))
        self._record(run, args)
        return {
            "run_id": run.run_id,
            "session_id": started.session_id,
            "status": "running",
            "poll_after_ms": POLL_AFTER_MS,
            "ancestry": ancestry,
            "gate": (
                "the contract you gave is confirmed for you (the operator allows it)"
                if caller_confirms
                else "the run waits at gate 1 until the operator confirms its contract in "
                "the corral console"
            ),
        }

    async def poll(self, run_id: str, since_seq: int) -> dict[str, Any]:
        run = self._run(run_id)
        run.last_poll = self.clock()
        events = [e for e in run.events if e["seq"] >= since_seq]
        first = run.events[0]["seq"] if run.events else run.next_seq
        skipped = max(0, min(first, run.next_seq) - since_seq) if run.trimmed else 0
        out: dict[str, Any] = {
            "run_id": run.run_id,
            "session_id": run.session_id,
            "status": self._status(run),
            "events": for_agent(events),  # MCP callers are assistants: no hidden check shows
            "events_skipped": min(skipped, run.trimmed),
            "next_seq": run.next_seq,
            "ancestry": run.ancestry,
            "created_at": run.created_at,
        }
        if run.session_id is None:
            out.update(state=None, needs_you=None, poll_after_ms=POLL_AFTER_MS)
            return out
        detail = self.sup.get(run.session_id)
        session = detail.session
        out["state"] = session.state.value
        out["needs_you"] = self._needs(run.session_id, detail.needs_you, detail)
        if out["status"] == "running":
            out["poll_after_ms"] = POLL_AFTER_MS
        else:
            out["result"] = {
                "state": session.state.value,
                "branch": session.result_branch,
                "commit": session.result_commit,
                "delivery": session.result_delivery,
                "error": session.error,
            }
        return out

    async def cancel(self, run_id: str, caller: Caller | None = None) -> dict[str, Any]:
        """Cancel a run; an agent only one it started itself."""
        run = self.runs.get(run_id)
        if run is None:
            return {"run_id": run_id, "status": "unknown"}
        rules.check_cancel_run(caller, run.started_by)
        if self._status(run) != "running" or run.session_id is None:
            return {"run_id": run_id, "status": "already_terminal"}
        run.last_poll = self.clock()
        result = await self.sup.cancel(run.session_id)
        status = "already_terminal" if result.already_terminal else "cancelled"
        return {"run_id": run_id, "status": status, "state": result.state.value}

    async def sessions_list(self) -> list[dict[str, Any]]:
        return [r.model_dump(mode="json") for r in self.sup.list()]

    async def session_get(self, session_id: str) -> dict[str, Any]:
        shown: dict[str, Any] = for_agent(self.sup.get(session_id).model_dump(mode="json"))
        return shown

    async def report_impossible(self, reason: str, caller: Caller | None = None) -> str:
        """The calling agent's own session: its task cannot be done as specified."""
        return self.sup.report_impossible(rules.own_session(caller), reason)

    async def reap_idle(self) -> list[str]:
        """Drop every handle nobody polled within the TTL. Its session is
        cancelled only while no person's decision is pending: a session at a
        gate waits for the operator whoever started it (a reaper releases the
        client's handle, never the operator's decision)."""
        now = self.clock()
        idle = [
            run for run in self.runs.values() if now - run.last_poll > self.bounds.idle_ttl_secs
        ]
        for run in idle:
            self.runs.pop(run.run_id, None)
            for task in (run.pump, run.confirmer):
                if task is not None:
                    task.cancel()
            sid = run.session_id
            if sid is None or self._terminal(sid):
                log.warning("mcp: run %s idle past its TTL: dropped", run.run_id)
            elif self._waits_for_a_person(sid):
                self.released.add(sid)
                log.warning(
                    "mcp: run %s idle past its TTL: its handle released; session %s waits "
                    "for the operator on the board",
                    run.run_id,
                    sid,
                )
            else:
                with contextlib.suppress(CorralError):
                    await self.sup.cancel(sid)
                log.warning("mcp: run %s idle past its TTL: cancelled and dropped", run.run_id)
        return [run.run_id for run in idle]

    def _waits_for_a_person(self, session_id: str) -> bool:
        """At a gate (or asked something): the decision is the operator's."""
        try:
            detail = self.sup.get(session_id)
        except CorralError:
            return False
        return detail.needs_you is not None or detail.session.state in GATE_STATES

    # -- inside ------------------------------------------------------------------------

    def _run(self, run_id: str) -> _Run:
        run = self.runs.get(run_id)
        if run is None:
            raise CorralError(
                f"run not found: {run_id}. A run handle lives in the owner's memory: the "
                "owner restarted, or nobody polled the run within its idle TTL and it was "
                "cancelled. Its session, if any, is on the board (sessions_list); start "
                "again with assistant_start."
            )
        return run

    def _terminal(self, session_id: str) -> bool:
        try:
            return self.sup.get(session_id).session.state.is_terminal
        except CorralError:
            return True

    def _status(self, run: _Run) -> str:
        if run.session_id is None:
            return "running"
        try:
            state = self.sup.get(run.session_id).session.state
        except CorralError:
            return "error"
        return HANDLE_STATUS.get(state, "running")

    def _contract(self, given: dict[str, Any] | str | None) -> OutcomeContract | None:
        if given is None:
            return None
        if isinstance(given, str):
            path = Path(given).expanduser()
            with contextlib.suppress(OSError, ValueError):
                data = json.loads(path.read_text(encoding="utf-8"))
                if isinstance(data, dict) and data.get("hidden_checks"):
                    raise CorralError(HIDDEN_NOT_HERE)
            return load_contract(path)
        if given.get("hidden_checks"):
            raise CorralError(HIDDEN_NOT_HERE)
        try:
            contract = OutcomeContract.model_validate(given)
        except ValidationError as exc:
            raise CorralError(f"contract: {exc.errors()[0]['msg']}") from exc
        problems = contract.validate_contract()
        if problems:
            raise CorralError("contract: " + "; ".join(problems))
        return contract

    def _needs(self, sid: str, needs: NeedsYou | None, detail: Any) -> dict[str, Any] | None:
        if needs is None:
            return None
        session = detail.session
        out: dict[str, Any] = {"kind": needs.value, "label": detail.needs_you_label}
        if needs is NeedsYou.CONTRACT:
            out["contract"] = session.contract.model_dump(mode="json") if session.contract else None
            out["baseline"] = [c.model_dump(mode="json") for c in session.baseline]
            out["who"] = "the operator confirms or revises the contract in the corral console"
        elif needs is NeedsYou.QUESTION:
            out["question"] = detail.question_prompt
            try:
                out["options"] = self.sup.question_options(sid)
            except CorralError:
                out["options"] = []
            out["who"] = "the operator answers in the corral console"
        elif needs in (NeedsYou.MERGE, NeedsYou.FINDING):
            diff = session.diff
            out["diff"] = (
                None
                if diff is None
                else {"stat": diff.stat, "files": [f.model_dump(mode="json") for f in diff.files]}
            )
            if session.no_change_finding is not None:
                out["finding"] = session.no_change_finding.summary
            out["who"] = "approval is always the operator's, in the corral console"
        elif needs is NeedsYou.AUTH:
            out["message"] = detail.auth_message
        return out

    async def _pump(self, run: _Run) -> None:
        """Copy the session's events into the handle's bounded buffer."""
        assert run.session_id is not None
        from_seq = 0
        while True:
            try:
                result, sub = self.sup.subscribe(run.session_id, from_seq)
            except CorralError:
                return
            if sub is None:
                return
            if result.events_skipped:
                run.trimmed += result.events_skipped
            try:
                async for event in sub:
                    row = json.loads(to_json(event_row(event), fallback=str))
                    run.events.append(row)
                    run.next_seq = event.seq + 1
                    if len(run.events) > self.bounds.event_buffer_max:
                        run.events.popleft()
                        run.trimmed += 1
                return
            except SubscriptionDropped:
                from_seq = sub.last_seq + 1
            except SubscriptionClosed:
                return
            finally:
                sub.close()

    async def _confirm(self, run: _Run) -> None:
        """Confirm the caller's contract once it is proposed (operator allowed)."""
        assert run.session_id is not None
        with contextlib.suppress(CorralError):
            row = await self.sup.wait_for(
                run.session_id, {CoderState.CONTRACT_PROPOSED}, needs=True, timeout=None
            )
            if row.state is CoderState.CONTRACT_PROPOSED:
                await self.sup.confirm(run.session_id)

    def _record(self, run: _Run, args: StartArgs) -> None:
        row = {
            "run_id": run.run_id,
            "session_id": run.session_id,
            "ancestry": run.ancestry,
            "invoked_by": args.invoked_by,
            "engine": args.engine,
            "started_at": run.created_at,
        }
        try:
            with open(self.sup.state_dir / RUNS_LEDGER, "a", encoding="utf-8") as f:
                f.write(json.dumps(row) + "\n")
        except OSError as exc:
            log.warning("mcp: could not record run %s: %s", run.run_id, exc)
