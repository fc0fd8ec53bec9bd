"""`corral run`: one session, headless. Events stream to stdout (JSON lines
with `--json`), and the exit code says where the session ended (`common.RUN_EXIT_CODES`,
also in `corral run --help` and the README).

With an owner running (a console, `corral serve`), `corral run` is its
client over the control socket: the session shows on that owner's board and
stays with it. With none, it owns the state dir for its run (and serves the
control socket meanwhile, so `corral get|watch|…` reach it).

A session left at a gate is restored the next time a console opens. Its
agent is left running only when the session can continue (waiting for an
answer or an approval: the next owner re-adopts it), and stderr says so; a
finished session's agent is stopped before `corral run` exits.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
from pathlib import Path

from corral.supervisor.api import Supervisor
from corral.supervisor.doctor import confinement_status
from corral.supervisor.errors import CorralError, is_disk_full
from corral.supervisor.events import CoderEvent
from corral.supervisor.factory import build_supervisor, default_drafter
from corral.supervisor.interface import (
    ContractDrafter,
    FixedDrafter,
    Subscription,
    checks_contract,
    load_contract,
)
from corral.supervisor.models import CoderSession, OutcomeContract, SessionSummary
from corral.supervisor.paths import default_state_dir
from corral.supervisor.remote import (
    AttachedSupervisor,
    NoOwner,
    OwnerServices,
    OwnerSurface,
    owner_running,
)
from corral.supervisor.states import CoderState, FailureKind, label, said

from ..event_text import describe, for_terminal
from .common import DELIVERY_REFUSED, DISK_FULL

EXIT = {
    CoderState.MERGED: 0,
    CoderState.REPORTED: 0,
    CoderState.FAILED: 1,
    CoderState.CONTRACT_PROPOSED: 3,
    CoderState.NEEDS_APPROVAL: 5,
    CoderState.ABANDONED: 6,
}


def _print_event(event: CoderEvent, as_json: bool) -> None:
    if as_json:
        print(json.dumps(event.model_dump(mode="json"), ensure_ascii=False), flush=True)
    else:
        print(for_terminal(describe(event).plain), flush=True)


async def _pump(sub: Subscription, as_json: bool) -> None:
    async for event in sub:
        _print_event(event, as_json)


class _Run:
    """What `corral run` asks of the owner, in its words: the in-process
    facade when this process owns the state dir, or the owner over its
    control socket (`AttachedSupervisor`); both are the one `OwnerSurface`."""

    def __init__(
        self,
        owner: OwnerSurface,
        *,
        local: bool,
        contract: OutcomeContract | None = None,
        host: str | None = None,
    ) -> None:
        self.owner = owner
        # this process owns the session: it must stay to go on (a remote owner
        # keeps the session and retries for it)
        self.keeps_waiting = local
        self.local = local
        self.contract = contract  # given to a remote owner (a local one drafts with it)
        self.host = host  # the [[hosts]] name it runs on (None: here)

    async def start(
        self, intent: str, repo: Path, engine: str, base: str | None, model: str | None
    ) -> str:
        started = await self.owner.start(
            intent,
            repo,
            engine=engine,
            base=base,
            wait=False,
            contract=self.contract,
            model=model,
            host=self.host,
        )
        return started.session_id

    async def subscribe(self, sid: str) -> Subscription[CoderEvent]:
        _, sub = self.owner.subscribe(sid, 0)
        if sub is None:
            raise CorralError(f"{label(sid)} is not live on the owner")
        return sub

    async def wait_for(self, sid: str, *, timeout: float | None) -> SessionSummary:
        return await self.owner.wait_for(sid, needs=True, timeout=timeout)

    async def confirm(self, sid: str) -> None:
        await self.owner.confirm(sid)

    async def respond(self, sid: str, text: str) -> None:
        await self.owner.respond(sid, text)

    async def options(self, sid: str) -> list[str]:
        return self.owner.question_options(sid)

    async def approve(self, sid: str, deliver: str, finding: bool) -> None:
        if finding:
            await self.owner.approve(sid, accept_finding=True)
        else:
            await self.owner.approve(sid, delivery=deliver)

    async def session(self, sid: str) -> CoderSession:
        return self.owner.get(sid).session

    def disk_full(self) -> str | None:
        # a remote owner says it in its own log and console
        return self.owner.disk_full() if self.local else None


async def run_session(
    *,
    repo: Path,
    intent: str,
    contract_file: Path | None,
    engine: str,
    base: str | None,
    yes: bool,
    deliver: str,
    as_json: bool,
    backend: str = "tmux",
    on_question: str = "ask",
    model: str | None = None,
    host: str | None = None,
    checks: list[str] | None = None,
) -> int:
    """As a client of the owner when one runs; else as the owner for the run."""
    if contract_file is not None and checks:
        raise CorralError("give the contract as --contract FILE or as --check commands, not both")
    given = (
        load_contract(contract_file)
        if contract_file
        else checks_contract(checks)
        if checks
        else None
    )
    state_dir = default_state_dir()
    if owner_running(state_dir):
        attached = AttachedSupervisor(state_dir, mirror_board=False)
        try:
            await attached.open()
            client: AttachedSupervisor | None = attached
        except NoOwner:
            await attached.close()
            client = None  # it went away in between: own the state dir instead
        if client is not None:
            if not as_json:
                print(f"corral run: a client of the corral that owns {state_dir}", file=sys.stderr)
            try:
                return await _drive(
                    _Run(client, local=False, contract=given, host=host),
                    repo,
                    intent,
                    engine,
                    base,
                    yes,
                    deliver,
                    as_json,
                    on_question,
                    model,
                )
            finally:
                await client.close()
    drafter: ContractDrafter = FixedDrafter(given) if given is not None else default_drafter()
    sup = build_supervisor(state_dir, drafter, backend=backend)
    await sup.open()
    services = OwnerServices(sup, mcp_http=False)  # other clients reach this run's owner
    await services.start()
    theirs_before = {r.session_id for r in sup.list()}
    try:
        me = services.caller_of(os.getpid())
        if me.is_agent:  # no owner ran: this run is its own owner, and an agent
            if not sup.mcp_settings().agents_may_start:
                raise CorralError(
                    f"refused: this corral run is {me.describe()} ({me.why}); the operator has "
                    "not allowed agents to start sessions ([mcp] agents_may_start)"
                )
            if yes or deliver != "none":
                print(
                    "corral run: started by an agent, so the session waits at gate 1 for the "
                    "operator (--yes and --deliver are a person's)",
                    file=sys.stderr,
                )
            yes, deliver = False, "none"
        code = await _drive(
            _Run(sup, local=True, host=host),
            repo,
            intent,
            engine,
            base,
            yes,
            deliver,
            as_json,
            on_question,
            model,
        )
        await _until_clients_wait(sup, theirs_before)
        return code
    finally:
        await services.close()
        try:
            await sup.close()
        except CorralError:
            if sup.disk_full() is None:
                raise  # a full disk was said once already; closing cannot record more
        for left in sup.left_running:
            print(
                f"corral run: the agent of {label(left)} is still running; the next corral "
                f"here re-adopts it (`corral panes stop {left}` stops it)",
                file=sys.stderr,
            )


#: what a run stopped at a gate says next (the session's id: every command takes it)
GATE_NEXT = {
    CoderState.CONTRACT_PROPOSED: "gate 1: review it in the console, or `corral confirm {sid}`",
    CoderState.NEEDS_APPROVAL: (
        "gate 2: review the diff in the console, or `corral approve {sid}` / `corral reject {sid}`"
    ),
}


async def _drive(
    owner: _Run,
    repo: Path,
    intent: str,
    engine: str,
    base: str | None,
    yes: bool,
    deliver: str,
    as_json: bool,
    on_question: str,
    model: str | None = None,
) -> int:
    pump: asyncio.Task[None] | None = None
    try:
        sid = await owner.start(intent, repo, engine, base, model)
        sub = await owner.subscribe(sid)
        pump = asyncio.get_running_loop().create_task(_pump(sub, as_json))
        row = await _past_sign_in(owner, sid, await owner.wait_for(sid, timeout=3600))
        if row.state is CoderState.CONTRACT_PROPOSED and yes:
            await owner.confirm(sid)
            row = await _past_sign_in(owner, sid, await owner.wait_for(sid, timeout=None))
            while row.needs_you == "question":
                options = await owner.options(sid)
                answer = await _answer(options, row.question_prompt or "", on_question, as_json)
                if answer is None:
                    break
                await owner.respond(sid, answer)
                await asyncio.sleep(0.2)
                row = await owner.wait_for(sid, timeout=None)
        if row.needs_you in ("question", "auth"):
            code = 4
        elif row.state is CoderState.NEEDS_APPROVAL and deliver != "none":
            try:
                await owner.approve(sid, deliver, row.needs_you == "finding")
            except CorralError as exc:
                if (await owner.session(sid)).state is not CoderState.NEEDS_APPROVAL:
                    raise
                print(
                    f"corral run: delivery refused, the session waits at approval: {exc}",
                    file=sys.stderr,
                    flush=True,
                )
                code = DELIVERY_REFUSED
            else:
                code = EXIT.get((await owner.session(sid)).state, 1)
        else:
            code = EXIT.get((await owner.session(sid)).state, 1)
        await asyncio.sleep(0.05)  # let the last events print
        session = await owner.session(sid)
        if _no_checks(session):
            code = EXIT[CoderState.CONTRACT_PROPOSED]  # stopped at gate 1: give the checks
            print(
                f"corral run: stopped at gate 1: nothing in {repo} says how to check the work. "
                'Run again with --check "CMD" (repeatable: each a check that passes when the '
                "work is done) or --contract FILE.",
                file=sys.stderr,
                flush=True,
            )
        full = owner.disk_full()
        if full is not None:
            print(f"corral: {full}", file=sys.stderr, flush=True)
            code = DISK_FULL
        summary = {
            "session_id": sid,
            "state": session.state.value,
            "result_branch": session.result_branch,
            "result_commit": session.result_commit,
            "error": session.error,
            "exit_code": code,
        }
        if as_json:
            print(json.dumps({"kind": "result", **summary}), flush=True)
        else:
            print(
                f"corral run: {label(sid)} {said(session.state)}"
                + (f" → {session.result_branch}" if session.result_branch else "")
                + (f" ({session.error})" if session.error else ""),
                flush=True,
            )
            waits = GATE_NEXT.get(session.state)
            if waits is not None:  # stopped at a gate: which session, and how to go on
                print(f"corral run: session {sid} waits at {waits.format(sid=sid)}", flush=True)
        return code
    finally:
        if pump is not None:
            pump.cancel()
            if pump.done() and not pump.cancelled():
                pump.exception()  # retrieved: a reader gone away is reported by the entry point


def _no_checks(session: CoderSession) -> bool:
    """A session that ended at gate 1 because no contract could be drafted:
    the operator, not a fault, supplies the checks."""
    return (
        session.state is CoderState.FAILED
        and session.contract is None
        and session.failure_kind is FailureKind.CONFIGURATION
    )


async def _until_clients_wait(sup: Supervisor, before: set[str]) -> None:
    """This run owns the state dir: sessions other clients started through it
    while it ran stay with it until each reaches a gate (or ends), so none is
    dropped mid-run when this run's own session is done."""
    said = False
    while True:
        busy = [
            r
            for r in sup.list()
            if r.session_id not in before
            and r.live
            and not r.state.is_terminal
            and r.needs_you is None
            and not r.dormant
        ]
        if not busy:
            return
        if not said:
            print(
                f"corral run: {len(busy)} session(s) other clients started here still run; "
                "this run stays until each reaches a gate (ctrl+c leaves them to the next "
                "corral, which re-adopts them)",
                file=sys.stderr,
                flush=True,
            )
            said = True
        await asyncio.sleep(0.5)


async def _past_sign_in(owner: _Run, sid: str, row: SessionSummary) -> SessionSummary:
    """A session waiting for a sign-in: a client says so and leaves it with its
    owner (exit 4); a run that owns the state dir itself keeps waiting, since
    no one else would retry for it, and says so once."""
    said = False
    while row.needs_you == "auth":
        if not said:
            why = row.auth_message or "a model rejected its key"
            then = "corral retries by itself" if owner.keeps_waiting else "its owner retries"
            print(f"corral run: waiting for a sign-in: {why} ({then})", file=sys.stderr)
            said = True
        if not owner.keeps_waiting:
            return row
        await asyncio.sleep(1.0)
        row = await owner.wait_for(sid, timeout=None)
    return row


APPROVE = re.compile(r"^yes\b(?!.*(always|don't ask|all edits|during this session))", re.I)
DENY = re.compile(r"^no\b", re.I)
ACP_APPROVE, ACP_DENY = "[allow_once]", "[reject_once]"


async def _answer(options: list[str], prompt: str, policy: str, as_json: bool) -> str | None:
    """--on-question: `ask` reads a line from stdin; `approve` picks the
    agent's "yes, once" option (never "always"; `allow_once` for an ACP
    agent); `deny` picks its refusal (`reject_once`)."""
    if policy in ("approve", "deny"):
        pattern = APPROVE if policy == "approve" else DENY
        # an ACP agent's options carry their kind: allow once, or reject once
        kind = ACP_APPROVE if policy == "approve" else ACP_DENY
        choice = next((o for o in options if o.endswith(kind)), None)
        choice = choice or next((o for o in options if pattern.search(o)), None)
        if choice is None:  # a question only a person can answer: say which, leave it waiting
            said = (
                f"corral run: --on-question {policy} cannot answer this (its options: "
                f"{', '.join(options)}), so the session waits for you: {prompt}"
            )
            print(for_terminal(said), file=sys.stderr)
            return None
        return choice
    if not as_json:
        print(for_terminal(f"question: {prompt}"))
        for i, option in enumerate(options, 1):
            print(for_terminal(f"  {i}. {option}"))
    line = await asyncio.to_thread(sys.stdin.readline)
    return line.strip() or None


def main_run(args: argparse.Namespace) -> int:
    if not args.intent.strip():
        raise CorralError("--intent is empty: say what the task should achieve")
    sandbox = confinement_status()
    if not sandbox.confined:
        print(f"corral: sandbox {sandbox.detail}", file=sys.stderr, flush=True)
    if sandbox.agents_unconfined:
        print(f"corral: agents {sandbox.agents}", file=sys.stderr, flush=True)
    try:
        return asyncio.run(
            run_session(
                repo=Path(args.repo or "."),
                intent=args.intent,
                contract_file=Path(args.contract) if args.contract else None,
                engine=args.engine,
                base=args.base,
                yes=args.yes,
                deliver=args.deliver,
                as_json=args.json,
                backend=args.backend,
                on_question=args.on_question,
                model=args.model,
                host=args.host,
                checks=args.check,
            )
        )
    except CorralError as exc:
        if is_disk_full(exc):
            raise  # the entry point says it, once
        print(f"corral: {exc}", file=sys.stderr)
        return 2
