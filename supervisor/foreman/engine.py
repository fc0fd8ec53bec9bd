"""The foreman engine (`foreman:<agent>`): one task split into subtasks that
run in parallel, each a child run of `<agent>` in its own worktree from the
session's start commit, each verified on its own checks (the same snapshot
rule as any session). Verified subtasks are merged in the split's order
into the session's worktree (the integration worktree); the runtime then
runs the whole contract on that union, as after any engine.

When the union is red, or two subtasks conflict, or no subtask was
verified, one `<agent>` repairs on top of the verified union (announced as
an `engine_fallback` from `foreman:<agent>` to `<agent>`), using the
session's ordinary repair rounds. A subtask that fails for a reason a fresh
attempt could fix (its agent crashed or exited, its pane died, its checks
stayed red) is re-placed once in a fresh worktree from the same base; if that
fails too, or it failed for any other reason, it is reported with its reason
and the union continues without it, saying so. Cancel stops every
child (their agents are stopped, their worktrees kept). A child's question
(its agent waits on a prompt or a menu) is shown as the parent session's,
named by its subtask; the operator's answer goes to that child's pane.

Every placement (subtask → host → worktree → result) is written to the
ledger as it changes, so it survives a restart.

With hosts configured, subtasks are placed across this machine and the hosts
(see `places` for the rule). A subtask on a host runs exactly like a session
there: its worktree is made from the base pushed to the host's mirror, its
agent runs in the host's tmux, its checks run there, and its verified commit
is fetched home before it is merged. A host that stops answering for
`foreman_host_wait_secs` gives up the subtask, which is re-placed once,
elsewhere when another place has room.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from ..cancelling import cancel_and_wait
from ..engines.base import Engine, EngineOutcome, RunContext
from ..errors import CorralError, swallowed
from ..events import EngineFallbackData, EventData, PaneAnswerData, PlanTextData
from ..gates.host_tree import HostTree, on_host
from ..gates.verifier import Verification, Verifier, name_paths
from ..hosts.configured import Hosts
from ..hosts.unreachable import HostUnreachable
from ..models import CheckResult, CoderSession, OutcomeContract, Placement, Split, Subtask
from ..states import LoopFailure
from ..status import AgentStatus
from ..store import placements as P
from ..store.placements import PlacementStore
from ..workspaces import Workspaces
from .places import LOCAL, Places
from .split import split_problems, subtask_contract
from .union import changed_files, commit_subtask, merge_into, write_union

log = logging.getLogger("corral.supervisor.foreman.engine")

if TYPE_CHECKING:  # the hosts' machinery loads when a host is configured
    from ..hosts.place import HostPlace

REPAIR_REASON = "contract not satisfied after the foreman's verified union"
ATTEMPTS = 2  # a subtask is placed at most twice
# Agent failures a fresh worktree and a fresh agent could fix: it crashed or
# exited, its pane died. Not: a refused configuration, a missing agent, no budget.
REPLACEABLE = frozenset(
    {LoopFailure.EXECUTION, LoopFailure.INFRASTRUCTURE, LoopFailure.VERIFICATION}
)


class Replaceable(CorralError):
    """A subtask attempt failed for a reason a fresh attempt could fix."""


def _first_line(exc: BaseException) -> str:
    text = str(exc)
    return text.splitlines()[0][:300] if text.strip() else "failed"


def placement_ref(session_id: str, subtask: str) -> str:
    return f"refs/corral/foreman/{session_id}/{subtask}"


def trailer(p: Placement) -> str:
    """`subtask=s1 host=local files=a.py,b.py`: one `Corral-Placement` value."""
    return f"subtask={p.subtask} host={p.host} files={','.join(p.files) or '-'}"


@dataclass
class _Child:
    sub: Subtask
    placement: Placement
    tree: str | None = None
    authors: tuple[str, ...] = ()
    avoid: frozenset[str] = frozenset()  # where a re-placement should not go


@dataclass
class ForemanHooks:
    """What the foreman needs from the session it runs for."""

    session: CoderSession
    split: Callable[[], Awaitable[Split]]  # the confirmed split (proposed now if none)
    progress: Callable[[int, int], None]  # (verified, total): stored and shown on the board
    integrated: Callable[[list[str]], None]  # the placement trailers of what landed
    stop_pane: Callable[[str], Awaitable[None]]  # a finished child's agent
    hosts_note: str | None = None
    # where subtasks go (None: all on this machine) and the hosts they may go to
    places: Places | None = None
    hosts: Hosts | None = None
    host_wait: float = 60.0  # seconds a host may not answer before its subtask is given up
    pane_status: Callable[[str], AgentStatus | None] = lambda _child: None


class ForemanEngine:
    def __init__(
        self,
        inner_label: str,
        *,
        create: Callable[[str], Engine],
        workspaces: Workspaces,
        verifier: Verifier,
        ledger: PlacementStore,
        hooks: ForemanHooks,
        rounds: int,
    ) -> None:
        self.label = f"foreman:{inner_label}"
        self.inner_label = inner_label
        self._create = create
        self._workspaces = workspaces
        self._verifier = verifier
        self._ledger = ledger
        self._hooks = hooks
        self._rounds = max(1, rounds)
        self._inner: Engine | None = None
        self._fell_back = False
        self._asking = asyncio.Lock()  # the parent shows one child's question at a time

    # -- the rounds ---------------------------------------------------------------------

    async def run(self, ctx: RunContext) -> EngineOutcome:
        fanned_out = bool(await asyncio.to_thread(self._ledger.placements, ctx.session_id))
        if ctx.round == 1 and not fanned_out:
            return await self._fan_out(ctx)
        # a repair round (or a restart after the union landed): one agent on top
        return await self._repair(ctx, REPAIR_REASON + "; repairing on top of the verified union")

    async def _repair(self, ctx: RunContext, reason: str) -> EngineOutcome:
        if not self._fell_back:
            self._fell_back = True
            ctx.emit(EngineFallbackData(from_=self.label, to=self.inner_label, reason=reason))
        if self._inner is None:
            self._inner = self._create(self.inner_label)
        outcome = await self._inner.run(ctx)
        outcome.ran = self.inner_label
        return outcome

    # -- fan out, verify each, merge in order -------------------------------------------

    async def _fan_out(self, ctx: RunContext) -> EngineOutcome:
        s = self._hooks.session
        assert s.start_commit is not None
        split = await self._hooks.split()
        assert s.contract is not None
        problems = split_problems(split, s.contract)
        if problems:
            return EngineOutcome(
                failure=LoopFailure.CONFIGURATION,
                error="the split does not fit the confirmed contract: " + "; ".join(problems),
            )
        if self._hooks.hosts_note:
            ctx.emit(PlanTextData(text=self._hooks.hosts_note))
        children = [
            _Child(
                sub,
                Placement(
                    session_id=s.id,
                    subtask=sub.id,
                    position=i,
                    child_id=f"{s.id}-{sub.id}",
                    host=LOCAL,
                    files=list(sub.files),
                ),
            )
            for i, sub in enumerate(split.subtasks)
        ]
        for child in children:
            await asyncio.to_thread(self._ledger.record, child.placement)
        names = "; ".join(
            f"{c.sub.id}" + (f" ({', '.join(c.sub.files)})" if c.sub.files else "")
            for c in children
        )
        ctx.emit(
            PlanTextData(
                text=(
                    f"Foreman: {len(children)} subtasks in parallel ({split.proposed_by}): "
                    f"{names}. Each runs {self.inner_label} in its own worktree from "
                    f"{s.start_commit[:8]} and is verified on its own checks."
                )
            )
        )
        self._hooks.progress(0, len(children))
        tasks = [asyncio.create_task(self._child(ctx, c, len(children))) for c in children]
        try:
            await asyncio.gather(*tasks)
        except asyncio.CancelledError:
            why = "corral closed while it ran" if ctx.detaching() else "cancelled"
            await self._stop_children(tasks, children, why)
            raise
        return await self._integrate(ctx, children)

    async def _stop_children(
        self, tasks: list[asyncio.Task[None]], children: list[_Child], why: str
    ) -> None:
        """Cancel: every child's agent stopped, every worktree kept, the ledger says so."""
        await cancel_and_wait(tasks, timeout=4.5, what="a foreman subtask")
        for child in children:
            p = child.placement
            if p.result in P.UNFINISHED or p.result == P.VERIFIED:
                p.result, p.reason = P.CANCELLED, f"{why}; its worktree is kept"
                with swallowed(
                    log, "writing a cancelled subtask to the foreman's ledger", logging.WARNING
                ):
                    self._ledger.record(p)
            self._keep(p, f"foreman subtask: {why}")

    async def _child(self, ctx: RunContext, child: _Child, total: int) -> None:
        """One subtask: placed, and re-placed once in a fresh worktree when its
        first attempt failed for a reason a fresh attempt could fix."""
        s = self._hooks.session
        p, sub = child.placement, child.sub
        assert s.start_commit is not None
        try:
            while True:
                try:
                    await self._attempt(ctx, child, total)
                    return
                except Replaceable as exc:
                    if p.attempt >= ATTEMPTS:
                        raise
                    child.avoid = frozenset({p.host})  # elsewhere, when another has room
                    await self._replace(ctx, child, _first_line(exc))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # reported, never fatal to the other subtasks
            p.result, p.reason = P.FAILED, _first_line(exc)
            with swallowed(
                log, "writing a failed subtask to the foreman's ledger", logging.WARNING
            ):
                await asyncio.to_thread(self._ledger.record, p)
            self._keep(p, f"foreman subtask failed: {p.reason}")
            again = " again after its re-placement" if p.attempt > 1 else ""
            ctx.emit(
                PlanTextData(
                    text=(
                        f"Subtask {sub.id} failed{again}: {p.reason}. The foreman continues "
                        "without it: the union will not hold its work (its worktree is kept)."
                    )
                )
            )
        finally:
            with swallowed(log, "stopping a subtask's pane"):
                await asyncio.shield(self._hooks.stop_pane(p.child_id))

    async def _replace(self, ctx: RunContext, child: _Child, reason: str) -> None:
        """The first attempt is recorded as failed (its worktree kept), its agent
        stopped; the subtask starts over in a fresh worktree from the same base."""
        s = self._hooks.session
        p = child.placement
        assert s.start_commit is not None
        p.result, p.reason = P.FAILED, reason
        await asyncio.to_thread(self._ledger.record, p)
        self._keep(p, f"foreman subtask failed: {reason}")
        where = f" on {p.host}" if p.host != LOCAL else ""
        ctx.emit(
            PlanTextData(
                text=(
                    f"Subtask {p.subtask} failed{where}: {reason}. Re-placing it once in a "
                    f"fresh worktree from {s.start_commit[:8]} (the first one is kept)."
                )
            )
        )
        with swallowed(log, "stopping a replaced subtask's pane"):
            await asyncio.shield(self._hooks.stop_pane(p.child_id))
        p.attempt += 1
        p.first_reason, p.first_worktree = reason, p.worktree
        p.child_id = f"{s.id}-{p.subtask}-{p.attempt}"
        p.worktree, p.result, p.reason = None, P.PENDING, None
        p.files = list(child.sub.files)
        child.authors = ()
        await asyncio.to_thread(self._ledger.record, p)

    def _keep(self, p: Placement, note: str) -> None:
        """A failed or left-out subtask's worktree is kept (on a host: left there)."""
        if p.worktree and p.host == LOCAL:
            with swallowed(log, "keeping a subtask's worktree", logging.WARNING):
                self._workspaces.retain(p.worktree, note=note)

    async def _discard(self, p: Placement) -> None:
        """A landed subtask's worktree is removed (on a host: best effort)."""
        if not p.worktree:
            return
        if p.host == LOCAL:
            await asyncio.to_thread(self._workspaces.remove, p.worktree, force=True)
            return
        place, repo = self._place(p.host), Path(self._hooks.session.repo)
        with contextlib.suppress(CorralError, HostUnreachable):
            await asyncio.to_thread(lambda: place.remove(place.mirror_path(repo), str(p.worktree)))

    def _place(self, host: str) -> HostPlace:
        assert self._hooks.hosts is not None
        return self._hooks.hosts.get(host)

    async def _attempt(self, ctx: RunContext, child: _Child, total: int) -> None:
        """One placement of a subtask, on the place the rule picks; its slot is
        given back when the attempt ends."""
        places = self._hooks.places
        p = child.placement
        p.host = LOCAL if places is None else await places.take(set(child.avoid))
        try:
            await self._attempt_on(ctx, child, total)
        finally:
            if places is not None:
                await places.give_back(p.host)

    async def _worktree(self, child: _Child) -> tuple[Path, HostTree | None]:
        """The attempt's worktree: here, or on its host from the pushed base."""
        s = self._hooks.session
        p = child.placement
        assert s.start_commit is not None
        if p.host == LOCAL:
            made = await asyncio.to_thread(
                self._workspaces.provision, Path(s.repo), p.child_id, s.start_commit
            )
            return made.workspace.path, None
        place, start = self._place(p.host), s.start_commit
        try:
            _mirror, path = await on_host(
                place.name,
                lambda: place.make_worktree(Path(s.repo), start, p.child_id),
                wait=self._hooks.host_wait,
            )
        except (CorralError, HostUnreachable) as exc:
            raise Replaceable(
                f"its worktree could not be made on host {place.name}: {exc}"
            ) from exc
        child_session = s.model_copy(
            update={"id": p.child_id, "host": place.name, "remote_worktree": path}
        )
        return Path(path), HostTree(place, child_session, wait=self._hooks.host_wait)

    async def _attempt_on(self, ctx: RunContext, child: _Child, total: int) -> None:
        """One placement of a subtask: its worktree, its agent, its own checks,
        a bounded repair. Raises `Replaceable` for what a fresh attempt could fix."""
        s = self._hooks.session
        p, sub = child.placement, child.sub
        assert s.contract is not None and s.start_commit is not None
        worktree, there = await self._worktree(child)
        p.worktree, p.result = str(worktree), P.RUNNING
        await asyncio.to_thread(self._ledger.record, p)
        again = f" (attempt {p.attempt})" if p.attempt > 1 else ""
        ctx.emit(PlanTextData(text=f"Subtask {sub.id} placed on {p.host} in {worktree}{again}."))
        engine = self._create(self.inner_label)
        contract = subtask_contract(sub, s.contract)
        failing: list[CheckResult] = []
        for round_ in range(1, self._rounds + 1):
            child_ctx = self._child_ctx(ctx, child, worktree, round_, failing)
            if there is not None:
                child_ctx = replace(child_ctx, place=there.place, remote_worktree=str(worktree))
            outcome = await self._run_child(engine, child_ctx, there)
            child.authors = (*child.authors, *outcome.authored_by)
            # an agent left waiting to be resumed (`dormant`, where engines report it)
            # cannot be revived as a subtask: the attempt failed
            if outcome.dormant or outcome.failure in REPLACEABLE:
                raise Replaceable(outcome.error or f"its agent failed ({outcome.failure})")
            if outcome.failure is not None:
                raise CorralError(outcome.error or f"its agent failed ({outcome.failure})")
            verification = await self._verify(contract, worktree, there)
            if not verification.stable:
                raise Replaceable(
                    "its worktree kept changing while its checks ran "
                    f"({name_paths(verification.moved)})"
                )
            if verification.passed:
                assert verification.tree is not None
                child.tree = verification.tree
                p.files = await asyncio.to_thread(
                    changed_files, Path(s.repo), s.start_commit, verification.tree
                )
                p.result, p.reason = P.VERIFIED, None
                await asyncio.to_thread(self._ledger.record, p)
                self._hooks.progress(self._verified(), total)
                home = f", fetched home from host {p.host}" if there is not None else ""
                ctx.emit(
                    PlanTextData(
                        text=(
                            f"Subtask {sub.id} verified on its own checks "
                            f"({', '.join(r.name for r in verification.results)}){home}."
                        )
                    )
                )
                return
            failing = [r for r in verification.results if not r.passed]
        names = ", ".join(r.name for r in failing)
        raise Replaceable(f"its checks still fail after {self._rounds} round(s): {names}")

    async def _verify(
        self, contract: OutcomeContract, worktree: Path, there: HostTree | None
    ) -> Verification:
        baseline = self._hooks.session.baseline
        if there is None:
            return await self._verifier.verify_worktree(contract, worktree, baseline)
        try:
            return await self._verifier.verify_on_host(contract, there, baseline)
        except (CorralError, HostUnreachable) as exc:
            raise Replaceable(
                f"its checks could not run on host {there.place.name}: {exc}"
            ) from exc

    async def _run_child(
        self, engine: Engine, child_ctx: RunContext, there: HostTree | None
    ) -> EngineOutcome:
        """The child's agent turn; on a host, given up when the host does not
        answer for `host_wait` seconds (its pane reads unreachable that long)."""
        if there is None:
            return await engine.run(child_ctx)
        run = asyncio.ensure_future(engine.run(child_ctx))
        silent_since: float | None = None
        try:
            while not run.done():
                await asyncio.wait({run}, timeout=1.0)
                if run.done():
                    break
                status = self._hooks.pane_status(child_ctx.session_id)
                if status is not AgentStatus.UNREACHABLE:
                    silent_since = None
                    continue
                silent_since = silent_since or time.monotonic()
                if time.monotonic() - silent_since >= self._hooks.host_wait:
                    await cancel_and_wait([run], what="a subtask on an unreachable host")
                    raise Replaceable(
                        f"host {there.place.name} did not answer for "
                        f"{self._hooks.host_wait:.0f} s while its agent ran"
                    )
        except asyncio.CancelledError:
            run.cancel()
            raise
        try:
            return run.result()
        except (CorralError, HostUnreachable) as exc:  # e.g. the host went away at its start
            if isinstance(exc, Replaceable):
                raise
            raise Replaceable(f"on host {there.place.name}: {_first_line(exc)}") from exc

    def _verified(self) -> int:
        rows = self._ledger.placements(self._hooks.session.id)
        return sum(1 for r in rows if r.result in (P.VERIFIED, P.INTEGRATED))

    def _child_ctx(
        self,
        ctx: RunContext,
        child: _Child,
        worktree: Path,
        round_: int,
        failing: list[CheckResult],
    ) -> RunContext:
        s = self._hooks.session
        assert s.contract is not None
        sub = child.sub
        intent = sub.intent.strip()
        if sub.files:
            intent += (
                f"\n\nYou own these files or areas: {', '.join(sub.files)}. Other agents "
                "work on the rest of the task in parallel; leave other files alone."
            )

        def emit(data: EventData) -> None:
            if isinstance(data, PlanTextData):  # narration only; the parent owns the rest
                ctx.emit(PlanTextData(text=f"[{sub.id}] {data.text}"))
            elif isinstance(data, PaneAnswerData):
                ctx.emit(
                    PlanTextData(
                        text=f"[{sub.id}] the operator's answer {data.answer!r} landed in its "
                        f"agent's pane ({data.action})."
                    )
                )

        async def ask_operator(prompt: str, options: list[str]) -> str:
            """The child's question is the parent session's (one at a time), named
            by its subtask; the answer comes back to the child's engine, which
            delivers it to the child's pane."""
            async with self._asking:
                try:
                    return await ctx.ask_user(f"Subtask {sub.id} asks: {prompt}", options)
                except asyncio.CancelledError:  # the question left the child's screen
                    ctx.withdraw_question()
                    raise

        return replace(
            ctx,
            session_id=child.placement.child_id,
            intent=intent,
            contract=subtask_contract(sub, s.contract),
            worktree=worktree,
            round=round_,
            failing_checks=failing,
            emit=emit,
            ask_user=ask_operator,
            take_guidance=lambda: [],
            iteration_started=lambda _n: None,
            withdraw_question=lambda: None,
            note_pane=lambda _pane: None,
            detaching=lambda: False,  # no later owner adopts a child: always stopped
        )

    async def _integrate(self, ctx: RunContext, children: list[_Child]) -> EngineOutcome:
        """Merge the verified subtasks in order into the integration worktree."""
        s = self._hooks.session
        assert s.start_commit is not None and s.worktree is not None
        repo, start = Path(s.repo), s.start_commit
        union = start
        landed: list[_Child] = []
        conflicts: list[str] = []
        for child in children:
            p = child.placement
            if child.tree is None:
                continue
            commit = await asyncio.to_thread(
                commit_subtask,
                repo,
                start,
                child.tree,
                placement_ref(s.id, p.subtask),
                f"corral foreman subtask {p.subtask} of {s.id}\n",
            )
            p.commit = commit
            merged = await asyncio.to_thread(
                merge_into, repo, union, commit, f"corral foreman union + {p.subtask}\n"
            )
            if merged.commit is None:
                with_whom = [
                    c.placement.subtask
                    for c in landed
                    if set(c.placement.files) & set(merged.conflicts)
                ]
                files = ", ".join(merged.conflicts)
                p.result = P.CONFLICT
                p.reason = f"conflicts with {', '.join(with_whom) or 'the union'} on {files}"
                conflicts.append(
                    f"{p.subtask} and {', '.join(with_whom) or 'the union'} on {files}"
                )
                self._keep(p, f"foreman subtask: {p.reason}")
            else:
                union = merged.commit
                p.result, p.reason = P.INTEGRATED, None
                landed.append(child)
            await asyncio.to_thread(self._ledger.record, p)
        if union != start:
            await asyncio.to_thread(write_union, Path(s.worktree), union)
        for child in landed:  # what they made is in the union (and anchored by a ref)
            await self._discard(child.placement)
        self._hooks.integrated([trailer(c.placement) for c in landed])
        left_out = [c.placement for c in children if c not in landed]
        text = f"Verified union: {len(landed)} of {len(children)} subtasks integrated"
        text += f" ({', '.join(c.placement.subtask for c in landed)})" if landed else ""
        if left_out:
            text += "; left out: " + "; ".join(
                f"{p.subtask} ({p.result}: {p.reason})" for p in left_out
            )
        ctx.emit(PlanTextData(text=text + ". The whole contract runs on the union next."))
        authors = sorted({a for c in landed for a in c.authors})
        if conflicts:
            note = (
                "\n\nThe task was split among agents whose verified work is already merged "
                "into this worktree. These subtasks conflicted and are NOT merged: "
                + "; ".join(conflicts)
                + ". Do their part on top of what is here:\n"
                + "\n".join(
                    f"- {c.sub.id}: {c.sub.intent.strip()}"
                    for c in children
                    if c.placement.result == P.CONFLICT
                )
            )
            outcome = await self._repair(
                replace(ctx, intent=ctx.intent + note),
                "subtasks " + "; ".join(conflicts) + " conflict; repairing on top of the "
                "verified union",
            )
            outcome.authored_by = sorted({*authors, *outcome.authored_by})
            return outcome
        if not landed:
            outcome = await self._repair(
                ctx, "no subtask was verified; one agent does the task on the untouched tree"
            )
            return outcome
        return EngineOutcome(iterations=1, authored_by=authors)
