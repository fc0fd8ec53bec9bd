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
import contextlib
import logging
import os
import posixpath
import re
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from corral.supervisor.api import Supervisor
from corral.supervisor.doctor import confinement_status
from corral.supervisor.errors import (
    CorralError,
    FlakyPassHeld,
    JudgeChangeHeld,
    is_disk_full,
    nearly_full,
)
from corral.supervisor.events import CoderEvent
from corral.supervisor.factory import build_supervisor, default_drafter
from corral.supervisor.interface import (
    ContractDrafter,
    FixedDrafter,
    GivenSetup,
    Subscription,
    checks_contract,
    given_setup,
    hidden_check_from_file,
    load_contract,
    repo_root,
    with_given_setup,
)
from corral.supervisor.models import (
    CoderSession,
    ContextPack,
    JudgeChange,
    JudgeFile,
    OutcomeContract,
    SessionSummary,
)
from corral.supervisor.paths import default_state_dir
from corral.supervisor.remote import (
    AttachedSupervisor,
    NoOwner,
    OwnerServices,
    OwnerSurface,
    owner_running,
)
from corral.supervisor.states import CoderState, FailureKind, NeedsYou, label, said

from ..event_text import describe
from .common import DELIVERY_REFUSED, DISK_FULL, FLAKY_HELD, JUDGE_CHANGED
from .context import load_pack
from .output import say, say_json

log = logging.getLogger("corral.tui.cli.run")

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
        say_json(event.model_dump(mode="json"), indent=None, ensure_ascii=False, flush=True)
    else:
        say(describe(event).plain, flush=True)


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
        context: ContextPack | None = None,
    ) -> None:
        self.owner = owner
        # this process owns the session: it must stay to go on (a remote owner
        # keeps the session and retries for it)
        self.keeps_waiting = local
        self.local = local
        self.contract = contract  # given to a remote owner (a local one drafts with it)
        self.host = host  # the [[hosts]] name it runs on (None: here)
        self.sid: str | None = None  # the session, once started
        self.context = context  # another session's context pack, given with the task

    async def start(
        self,
        intent: str,
        repo: Path,
        engine: str,
        base: str | None,
        model: str | None,
        decided: list[NeedsYou],
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
            decided=decided,
            context=self.context,
        )
        self.sid = started.session_id
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
    context: ContextPack | None = None,
    judge: list[str] | None = None,
    not_judge: list[str] | None = None,
    hidden: list[str] | None = None,
    setup: list[str] | None = None,
    setup_add: list[str] | None = None,
) -> int:
    """As a client of the owner when one runs; else as the owner for the run.

    `--check` replaces the drafted checks and keeps the drafted setup;
    `setup` (`--setup`, repeatable; `[]` for `--no-setup`) replaces the
    setup of any contract: a drafted one, a file's or the checks';
    `setup_add` (`--setup-add`) runs after it."""
    if contract_file is not None and checks:
        raise CorralError("give the contract as --contract FILE or as --check commands, not both")
    setup = given_setup(setup) if setup is not None else None
    added = given_setup(setup_add) if setup_add else []
    given: OutcomeContract | None = None
    if contract_file:
        given = with_given_setup(load_contract(contract_file), setup, added)
    elif checks:
        # the setup is drafted from the repository's top level, as drafting does
        root = repo_root(repo) if setup is None else None
        given = with_given_setup(checks_contract(checks, setup=setup, root=root), None, added)
    if judge or not_judge:
        if given is None:
            raise CorralError(
                "--judge and --not-judge change a given contract: add --contract FILE or "
                '--check "CMD" (or list the paths in the contract\'s judge_files / not_judged)'
            )
        given = given.model_copy(
            update={
                "judge_files": [
                    *given.judge_files,
                    *(JudgeFile(path=_repo_path(p), why="named with --judge") for p in judge or []),
                ],
                "not_judged": [*given.not_judged, *(_repo_path(p) for p in not_judge or [])],
            }
        )
    given = _with_hidden(given, hidden or [])
    state_dir = default_state_dir()
    full = nearly_full(state_dir, repo)
    if full is not None:  # said before anything is written: nothing hangs half-made
        raise full
    if owner_running(state_dir):
        if given is None and (setup is not None or added):
            raise CorralError(
                "--setup or --setup-add with a drafted contract needs this run to draft it, and "
                f"a corral owns {state_dir}: give the checks too (--check CMD) or a --contract "
                "FILE"
            )
        attached = AttachedSupervisor(state_dir, mirror_board=False)
        try:
            await attached.open()
            client: AttachedSupervisor | None = attached
        except NoOwner:
            await attached.close()
            client = None  # it went away in between: own the state dir instead
        if client is not None:
            if not as_json:
                say(f"corral run: a client of the corral that owns {state_dir}", file=sys.stderr)
            remote = _Run(client, local=False, contract=given, host=host, context=context)
            try:
                return await _drive(
                    remote,
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
            except asyncio.CancelledError:  # Ctrl-C: the session stays with its owner
                say(_left_behind(remote, _row(client, remote.sid), state_dir), file=sys.stderr)
                raise
            finally:
                await client.close()
    drafting = given is None or not given.checks  # hidden checks alone: the rest is drafted
    drafter: ContractDrafter = (
        FixedDrafter(given) if given is not None and given.checks else default_drafter()
    )
    if drafting and (setup is not None or added):
        drafter = GivenSetup(drafter, setup, added)
    sup = build_supervisor(state_dir, drafter, backend=backend)
    await sup.open()
    services = OwnerServices(sup, mcp_http=False)  # other clients reach this run's owner
    await services.start()
    theirs_before = {r.session_id for r in sup.list()}
    local = _Run(sup, local=True, host=host, context=context, contract=given if drafting else None)
    interrupted: SessionSummary | bool | None = False
    try:
        me = services.caller_of(os.getpid())
        refused = services.start_refusal(me)  # no owner ran: this run is its own owner
        if refused is not None:
            raise CorralError(refused)
        if not services.passes_gates(me):
            if yes or deliver != "none":
                say(
                    "corral run: started by an agent, so the session waits at gate 1 for the "
                    "operator (--yes and --deliver are a person's)",
                    file=sys.stderr,
                )
            yes, deliver = False, "none"
        code = await _drive(
            local,
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
        await _until_clients_wait(sup, theirs_before, services.control.clients)
        return code
    except asyncio.CancelledError:  # Ctrl-C: said once this run has closed
        interrupted, row_at_interrupt = True, _row(sup, local.sid)
        raise
    finally:
        await services.close()
        try:
            await sup.close()
        except CorralError:
            if sup.disk_full() is None:
                raise  # a full disk was said once already; closing cannot record more
        for left in sup.left_running:
            say(
                f"corral run: the agent of {label(left)} is still running; the next corral "
                f"here re-adopts it (`corral panes stop {left}` stops it)",
                file=sys.stderr,
            )
        if interrupted:
            say(_left_behind(local, row_at_interrupt, state_dir), file=sys.stderr, flush=True)


def _row(owner: OwnerSurface, sid: str | None) -> SessionSummary | None:
    """The session's board row as Ctrl-C found it (None: none started, or unreadable)."""
    if sid is None:
        return None
    try:
        return next((r for r in owner.list() if r.session_id == sid), None)
    except Exception as exc:  # the owner went away with the interrupt: say less, never fail
        log.info("reading the interrupted session's row failed: %s", exc)
        return None


def _left_behind(run: _Run, row: SessionSummary | None, state_dir: Path) -> str:
    """What an interrupted `corral run` leaves, in one line."""
    if run.sid is None:
        return "corral run: interrupted before a session was made; nothing is left behind"
    name = label(run.sid)
    if row is None:
        return f"corral run: interrupted; {name} is kept in {state_dir} (`corral get {name}`)"
    said = f"corral run: interrupted; {name} is left {row.state.value}"
    if row.needs_you is not None:
        said += f", needing you ({row.needs_you_label or row.needs_you.value})"
    if row.worktree and row.state not in (CoderState.MERGED, CoderState.REPORTED):
        said += f"; its worktree {row.worktree} is kept"
    if not run.local:
        return said + f"; it stays with the corral that owns {state_dir}, on its board"
    return said + f"; run `corral` here to carry on with it (`corral delete {name}` drops it)"


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
        # what the operator decided by the command line needs no notice
        decided = [NeedsYou.CONTRACT] if yes else []
        if deliver != "none":
            decided += [NeedsYou.MERGE, NeedsYou.FINDING]
        if yes and on_question in ("approve", "deny"):  # it answers each question itself
            decided.append(NeedsYou.QUESTION)
        sid = await owner.start(intent, repo, engine, base, model, decided)
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
        judged = (
            [c for c in (await owner.session(sid)).judge_changes if c.blocks]
            if row.state is CoderState.NEEDS_APPROVAL and row.needs_you != "finding"
            else []
        )
        judge_held = (
            f"corral run: not delivered, {label(sid)} waits at approval for a person: "
            f"{judge_text(judged)}. Read it (`corral get {sid}`), then "
            f"`corral approve {sid} --accept-judge-changes`, or reject it."
        )
        if row.needs_you in ("question", "auth"):
            code = 4
        elif judged and deliver == "none":  # never delivered without a person who saw it
            say(judge_held, file=sys.stderr, flush=True)
            code = JUDGE_CHANGED
        elif row.state is CoderState.NEEDS_APPROVAL and deliver != "none":
            # the approve decided ahead is put to the gate even when it must
            # refuse (a judge change, a flaky pass): the gate's hold makes the
            # session need a person, and the owner's notifier says so
            try:
                await owner.approve(sid, deliver, row.needs_you == "finding")
            except JudgeChangeHeld:
                say(judge_held, file=sys.stderr, flush=True)
                code = JUDGE_CHANGED
            except FlakyPassHeld as exc:  # the gate holds it for a person; never acknowledged here
                say(f"corral run: {exc}.", file=sys.stderr, flush=True)
                code = FLAKY_HELD
            except CorralError as exc:
                if (await owner.session(sid)).state is not CoderState.NEEDS_APPROVAL:
                    raise
                say(
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
            say(
                f"corral run: stopped at gate 1: nothing in {repo} says how to check the work. "
                'Run again with --check "CMD" (repeatable: each a check that passes when the '
                "work is done) or --contract FILE.",
                file=sys.stderr,
                flush=True,
            )
        full = owner.disk_full()
        if full is None and session.state is CoderState.FAILED:
            # a write that found the disk full but did not say so (git's "could
            # not write …"): a disk too full to start on now is the cause
            nearly = nearly_full(default_state_dir(), repo, ending="what was stored so far is kept")
            full = str(nearly) if nearly is not None else None
        if full is not None:
            say(f"corral: {full}", file=sys.stderr, flush=True)
            code = DISK_FULL
        summary = {
            "session_id": sid,
            "state": session.state.value,
            "result_branch": session.result_branch,
            "result_commit": session.result_commit,
            "attestation": session.attestation,
            "error": session.error,
            "exit_code": code,
        }
        if as_json:
            say_json({"kind": "result", **summary}, indent=None, flush=True)
        else:
            say(
                f"corral run: {label(sid)} {said(session.state)}"
                + (f" → {session.result_branch}" if session.result_branch else "")
                + (f" ({session.error})" if session.error else ""),
                flush=True,
            )
            if session.attestation:
                say(f"corral run: {session.attestation}", flush=True)
            waits = GATE_NEXT.get(session.state)
            if waits is not None:  # stopped at a gate: which session, and how to go on
                say(f"corral run: session {sid} waits at {waits.format(sid=sid)}", flush=True)
        return code
    finally:
        if pump is not None:
            pump.cancel()
            if pump.done() and not pump.cancelled():
                pump.exception()  # retrieved: a reader gone away is reported by the entry point


def _repo_path(path: str) -> str:
    """A path as the contract keeps it: repo-relative, POSIX, no `./`."""
    return posixpath.normpath(path.replace(os.sep, "/")).removeprefix("./").strip("/")


def judge_text(changes: list[JudgeChange], limit: int = 5) -> str:
    """`the work changed how it is judged: tests/test_mul.py (edited; holds a named test)`."""
    shown = ", ".join(c.shown() for c in changes[:limit])
    more = f" and {len(changes) - limit} more" if len(changes) > limit else ""
    return f"the work changed how it is judged: {shown}{more}"


def _with_hidden(given: OutcomeContract | None, specs: list[str]) -> OutcomeContract | None:
    """The contract with the `--hidden-check FILE[:DEST]` files read into
    hidden checks (without a contract: hidden checks alone, the visible ones
    drafted). The owner stores their content; only its sha256 stays."""
    if not specs:
        return given
    taken = (
        {c.name for c in given.checks} | {h.name for h in given.hidden_checks} if given else set()
    )
    added = [hidden_check_from_file(spec, given, taken) for spec in specs]
    if given is None:
        return OutcomeContract(hidden_checks=added)
    return given.model_copy(update={"hidden_checks": [*given.hidden_checks, *added]})


def _no_checks(session: CoderSession) -> bool:
    """A session that ended at gate 1 because no contract could be drafted:
    the operator, not a fault, supplies the checks."""
    return (
        session.state is CoderState.FAILED
        and session.contract is None
        and session.failure_kind is FailureKind.CONFIGURATION
    )


CLIENT_GRACE = 5.0  # seconds the owner waits for clients to finish with sessions at a gate


async def _until_clients_wait(
    sup: Supervisor, before: set[str], clients: Callable[[], list[Any]]
) -> None:
    """This run owns the state dir: sessions other clients started through it
    while it ran stay with it until each reaches a gate (or ends), so none is
    dropped mid-run when this run's own session is done; then their clients
    get a moment to read that gate and leave before the owner goes (a
    console that stays attached is not waited for past CLIENT_GRACE)."""
    said = False
    others = any(r.session_id not in before for r in sup.list())
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
            break
        if not said:
            say(
                f"corral run: {len(busy)} session(s) other clients started here still run; "
                "this run stays until each reaches a gate (ctrl+c leaves them to the next "
                "corral, which re-adopts them)",
                file=sys.stderr,
                flush=True,
            )
            said = True
        await asyncio.sleep(0.5)
    deadline = time.monotonic() + CLIENT_GRACE
    while others and clients() and time.monotonic() < deadline:
        await asyncio.sleep(0.1)


async def _past_sign_in(owner: _Run, sid: str, row: SessionSummary) -> SessionSummary:
    """A session waiting for a sign-in: a client says so and leaves it with its
    owner (exit 4); a run that owns the state dir itself keeps waiting, since
    no one else would retry for it, and says so once."""
    said = False
    while row.needs_you == "auth":
        if not said:
            why = row.auth_message or "a model rejected its key"
            then = "corral retries by itself" if owner.keeps_waiting else "its owner retries"
            say(f"corral run: waiting for a sign-in: {why} ({then})", file=sys.stderr)
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
            say(said, file=sys.stderr)
            return None
        return choice
    if not as_json:
        say(f"question: {prompt}")
        for i, option in enumerate(options, 1):
            say(f"  {i}. {option}")
    line = await _read_line()
    return line.strip() or None


async def _read_line() -> str:
    """One line of stdin, read in a daemon thread of its own: Ctrl-C cancels
    the wait at once (`asyncio.run` joins its executor's threads on the way
    out, so a read there held the exit until Enter). Unbuffered byte reads,
    so the thread holds no lock the interpreter needs when it exits."""
    loop = asyncio.get_running_loop()
    got: asyncio.Future[str] = loop.create_future()

    def settle(text: str) -> None:
        if not got.done():
            got.set_result(text)

    def read() -> None:
        data = bytearray()
        with contextlib.suppress(OSError):
            while not data.endswith(b"\n"):
                chunk = os.read(0, 1)
                if not chunk:
                    break
                data += chunk
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits
            loop.call_soon_threadsafe(settle, data.decode("utf-8", "replace"))

    threading.Thread(target=read, name="corral-run-stdin", daemon=True).start()
    return await got


def main_run(args: argparse.Namespace) -> int:
    if not args.intent.strip():
        raise CorralError("--intent is empty: say what the task should achieve")
    if args.no_setup and args.setup:
        raise CorralError("give the setup as --setup commands or drop it with --no-setup, not both")
    sandbox = confinement_status()
    if not sandbox.confined:
        say(f"corral: sandbox {sandbox.detail}", file=sys.stderr, flush=True)
    if sandbox.agents_unconfined:
        say(f"corral: agents {sandbox.agents}", file=sys.stderr, flush=True)
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
                context=load_pack(args.context) if args.context else None,
                judge=args.judge,
                not_judge=args.not_judge,
                hidden=args.hidden_check,
                setup=[] if args.no_setup else args.setup,
                setup_add=args.setup_add,
            )
        )
    except CorralError as exc:
        if is_disk_full(exc):
            raise  # the entry point says it, once
        say(f"corral: {exc}", file=sys.stderr)
        return 2
