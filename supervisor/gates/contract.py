"""Gate 1: a session starts, its outcome contract is drafted (or given),
baselined on the untouched tree (a check that already passes proves nothing),
revised on the operator's request (compare-and-swap: a revision never
overwrites one that landed meanwhile), and confirmed. Confirmation hands the
session to the run loop.

Each proposed and the confirmed contract carries the files that judge the
work (`contracts.judge.discover`), shown at gate 1 as "how this work is
judged"; what is confirmed is what verification puts back. A check that
names tests (`must_pass`) whose runner reported no per-test outcomes on the
untouched tree is refused at confirmation: corral could not tell whether
the named tests ran."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ..agents.base import AgentUnavailable
from ..agents.oneshot import is_oneshot
from ..agents.profiles import profile_for
from ..config import SupervisorConfig
from ..contracts.drafting import (
    MAX_REVISION_BYTES,
    ContractDrafter,
    DraftingError,
    DraftRequest,
    ReviseRequest,
    apply_check_edit,
    apply_judge_edit,
    apply_remove,
    apply_setup_edit,
)
from ..contracts.hidden import HiddenStore, hidden_check_from_file, hidden_tally
from ..contracts.judge import discover, judged_summary
from ..contracts.per_test import placed_count, unseen_regressions
from ..discuss.linked_runs import (
    NOT_CONFIRMED_STOPPED,
    REPO_DIFFERS,
    DiscussionRuns,
    decisive_run,
    first_unfinished,
    linked_rows,
    resumable_run,
    resumed_guidance,
    resuming,
    unfinished_work,
)
from ..engines.base import EngineRegistry
from ..engines.pins import Pin
from ..errors import CorralError
from ..events import (
    AuthRequiredData,
    ContractBaselineData,
    ContractProposedData,
    ContractRevisionRejectedData,
    EngineSelectedData,
    EventData,
    PlanTextData,
    SetupCompletedData,
)
from ..faults import fault_point
from ..git.repo import refuse_initialised_submodules, repo_root, resolve_base
from ..git.trees import seed_worktree, snapshot_tree
from ..git.workspace import GitWorkspace
from ..hosts.configured import Hosts
from ..hosts.unreachable import HostUnreachable
from ..llm.catalog import AUTO
from ..models import (
    CheckResult,
    CheckVerdict,
    CoderSession,
    ContextPack,
    OutcomeContract,
    ReviseResult,
    SetupOutcome,
    StartResult,
    contracts_equivalent,
)
from ..paths import ensure_private_dir
from ..session.live import LiveSession
from ..session.model_use import auth_waiter, hop_event, record_use
from ..session.registry import SessionRegistry
from ..states import (
    CoderState,
    FailureKind,
    already_happened,
    label,
)
from ..workspaces import Workspaces
from .run_loop import RunLoop
from .verifier import Verifier

if TYPE_CHECKING:  # the hosts' machinery loads when a host is configured
    from ..hosts.place import HostPlace

S = CoderState

DRAFTING_CANCELLED = "cancelled while drafting the outcome contract"


REASSESS_FEEDBACK = (
    "Every proposed check already passes before any edit, so none of them proves the work. "
    "Strengthen the weak checks so at least one fails on the untouched tree and passes only "
    "once the intent is done. Use exact byte comparison for exact text and newlines. Do not "
    "add artificial failures."
)


NOT_EXPRESSIBLE = (
    "that request could not be expressed as contract checks, so the contract is unchanged. "
    "Say which command should prove it, or use /check name command"
)


LOST_REVISION_RACE = (
    "another revision of this contract landed while yours was being drafted, so yours was "
    "NOT applied — nothing was overwritten. Re-read the contract and revise again if needed"
)


class ContractGate:
    def __init__(
        self,
        registry: SessionRegistry,
        verifier: Verifier,
        run_loop: RunLoop,
        *,
        drafter: ContractDrafter,
        engines: EngineRegistry,
        workspaces: Workspaces,
        config: SupervisorConfig,
        id_factory: Callable[[], str],
        before_start: Callable[[], object],
        discussion_runs: DiscussionRuns,
        hosts: Hosts | None = None,
        subtasks_on: Callable[[str], int] = lambda _host: 0,
    ) -> None:
        self._hosts = hosts
        self._subtasks_on = subtasks_on  # foreman subtasks running on a host take its slots too
        self._starting: dict[str, int] = {}  # sessions admitted on a host, not registered yet
        self._registry = registry
        self._verifier = verifier
        self._run_loop = run_loop
        self._drafter = drafter
        self._engines = engines
        self._workspaces = workspaces
        self._config = config
        self._id_factory = id_factory
        self._before_start = before_start  # retention: make room before a new session
        self._discussion_runs = discussion_runs
        # One admission at a time per discussion, held until the new session is
        # registered: two starts must not both see "no unfinished work".
        self._admissions: dict[str, asyncio.Lock] = {}

    async def start(
        self,
        intent: str,
        repo: Path | str,
        *,
        engine: str = "auto",
        base: str | None = None,
        max_iterations: int | None = None,
        constraints: list[str] | None = None,
        discussion_id: str | None = None,
        wait: bool = True,
        contract: OutcomeContract | None = None,
        model: str | None = None,
        retry_of: str | None = None,
        retry_guidance: list[str] | None = None,
        host: str | None = None,
        seed_tree: str | None = None,
        context: ContextPack | None = None,
    ) -> StartResult:
        """Register a session and draft its contract.

        `model` pins a model (see `engines.pins`): kept strictly through
        drafting, revision and the run; refused before anything exists when
        the engine cannot use it.

        With `wait`, returns once the contract is proposed (or raises if
        drafting failed or was cancelled); otherwise returns at `created`.
        Drafting runs on a supervisor task either way.

        With `discussion_id`, the discussion must exist, share the repository
        and have no unfinished run; without a `base`, a follow-up starts where
        the discussion's last delivery left off (see `discuss.linked_runs`).
        All of that is decided before a worktree exists.

        With `host`, the agent, its worktree and the checks run on that
        configured host (see `hosts.place`); refused when the host is
        unknown, at its `max_sessions`, or unreachable.

        With `seed_tree` (a retry that keeps the previous attempt's edits),
        the worktree starts on `base` holding that tree's content as
        uncommitted changes.
        """
        intent = intent.strip()
        if not intent:
            raise CorralError("say what the task should achieve (the intent is empty)")
        root = await asyncio.to_thread(repo_root, repo)
        base_sha = await asyncio.to_thread(resolve_base, root, base)
        await asyncio.to_thread(refuse_initialised_submodules, root)
        resolved, reason = self._resolve(engine, host)
        place = await self._admit_host(host)
        try:
            if model is None and discussion_id is not None:  # the discussion's pin carries over
                model = await asyncio.to_thread(self._discussion_runs.model_of, discussion_id)
            pin = self._pin(model, resolved)
            if pin is not None and resolved == "native":  # the chain's order does not apply
                reason = (
                    f"{engine or 'auto'} → built-in engine ({pin.name}, pinned: no other model)"
                )
            ensure_private_dir(self._registry.state_dir)
            self._before_start()

            followup: str | None = None
            resume: CoderSession | None = None
            async with self._admission(discussion_id):
                if discussion_id is not None:
                    base_sha, followup, resume = await self._admit(discussion_id, root, base_sha)
                if resume is not None and resume.worktree:  # carried on, never redone
                    seed_tree = await asyncio.to_thread(snapshot_tree, Path(resume.worktree))
                    retry_guidance = [*(retry_guidance or []), *resumed_guidance(resume)]
                sid = self._id_factory()
                now = self._registry.clock()
                session = CoderSession(
                    id=sid,
                    repo=str(root),
                    intent=intent,
                    engine=resolved,
                    requested_engine=engine,
                    max_iterations=max_iterations or self._config.default_max_iterations,
                    created_at=now,
                    updated_at=now,
                    discussion_id=discussion_id,
                    discussion_constraints=list(constraints or []),
                    keep_workspace_on_failure=self._config.keep_workspace_on_failure,
                    retry_of=retry_of,
                    retry_guidance=list(retry_guidance or []),
                    resumed_from=resume.id if resume is not None else None,
                    context=context,
                )
                if pin is not None:
                    session.model, session.model_pinned = pin.name, True
                    session.model_id = pin.model_id
                made = await asyncio.to_thread(self._workspaces.provision, root, sid, base_sha)
                if seed_tree is not None:
                    await asyncio.to_thread(seed_worktree, made.workspace.path, seed_tree)
                fault_point("start:worktree")
                if place is not None:
                    session.host = place.name
                    session.remote_worktree = await self._remote_worktree(
                        place, root, made.start_commit, sid, str(made.workspace.path)
                    )
                session.worktree = str(made.workspace.path)
                session.base = base_sha
                session.start_commit = made.start_commit
                session.checkout_identity = made.identity
                session.inputs_snapshot = made.identity.snapshot if made.identity else None
                live = self._registry.register(session)
                live.workspace = made.workspace
                self._registry.persist(live)
                fault_point("start:session")
                if discussion_id is not None:
                    self._discussion_runs.record_safely(session)
        finally:
            if place is not None:
                self._starting[place.name] -= 1
        self._registry.notify(sid)
        self._registry.emit(live, EngineSelectedData(engine=resolved, reason=reason))
        if session.inputs_snapshot:
            self._registry.emit(
                live,
                PlanTextData(
                    text=(
                        "Starting from a private snapshot of your current files, including uncommitted "
                        "edits. Your checkout and staged index are unchanged; review will show only the "
                        "task's changes."
                    )
                ),
            )
        if followup:
            self._registry.emit(live, PlanTextData(text=followup))
        task = self._registry.spawn(live, self._draft(live, contract))
        if wait:
            try:
                await asyncio.shield(task)
            except asyncio.CancelledError:
                if not task.cancelled():
                    raise  # our caller was cancelled; drafting goes on
                raise CorralError(DRAFTING_CANCELLED) from None
        return self._start_result(live)

    def _resolve(self, engine: str, host: str | None) -> tuple[str, str]:
        """The engine, as for any session; on a host, an agent named outright
        need not be installed here (it is looked for there when it starts)."""
        try:
            resolved, reason = self._engines.resolve(engine)
        except CorralError:
            name = (engine or "").strip().removeprefix("external:")
            if not host or name in ("", "auto", "native") or is_oneshot(name):
                raise
            try:
                profile_for(name)
            except AgentUnavailable as exc:
                raise CorralError(str(exc)) from None
            return f"external:{name}", f"{engine} → on host {host} (looked for there)"
        if host and resolved == "native":
            raise CorralError(
                f"the built-in engine runs on this machine only: choose an agent (e.g. "
                f"external:claude) to run on host {host}"
            )
        return resolved, reason

    async def _admit_host(self, host: str | None) -> HostPlace | None:
        """The place a session on `host` runs, once the host can take it."""
        if not host:
            return None
        if self._hosts is None:
            raise CorralError("no hosts are configured: add [[hosts]] to the config file")
        place = self._hosts.get(host)
        busy = [
            row
            for row in self._registry.summaries()
            if row.host == place.name and not row.state.is_terminal
        ]
        # starts on their way count, and so do foreman subtasks placed there
        taken = len(busy) + self._starting.get(place.name, 0) + self._subtasks_on(place.name)
        limit = place.settings.max_sessions
        if taken >= limit:
            raise CorralError(
                f"host {place.name} already runs {taken} session(s), its max_sessions "
                f"({limit}): wait for one to finish, or raise max_sessions for it in [[hosts]]"
            )
        try:
            await asyncio.to_thread(place.facts)
        except HostUnreachable as exc:
            raise CorralError(f"nothing was started: {exc}") from None
        self._starting[place.name] = self._starting.get(place.name, 0) + 1
        return place

    async def _remote_worktree(
        self, place: HostPlace, root: Path, commit: str, sid: str, home: str
    ) -> str:
        """The session's worktree on its host; the home copy is removed when
        it cannot be made, so a refused start leaves nothing behind."""
        try:
            _mirror, path = await asyncio.to_thread(place.make_worktree, root, commit, sid)
        except (CorralError, HostUnreachable) as exc:
            await asyncio.to_thread(self._workspaces.remove, home, force=True)
            raise CorralError(f"nothing was started: {exc}") from None
        return path

    def _pin(self, model: str | None, engine: str) -> Pin | None:
        """The pin checked against the engine (registries that cannot check
        one take the name as it is)."""
        name = (model or "").strip()
        if not name or name == AUTO:
            return None
        pin_of = getattr(self._engines, "pin", None)
        if pin_of is None:
            return Pin(name, name, None)
        pin: Pin | None = pin_of(name, engine)
        return pin

    def _admission(
        self, discussion_id: str | None
    ) -> contextlib.AbstractAsyncContextManager[object]:
        """The discussion's admission lock (nothing to hold without one)."""
        if discussion_id is None:
            return contextlib.nullcontext()
        return self._admissions.setdefault(discussion_id, asyncio.Lock())

    async def _admit(
        self, discussion_id: str, root: Path, base: str | None
    ) -> tuple[str | None, str | None, CoderSession | None]:
        """Admit a start from a discussion. Returns the base it starts from
        (an explicit `base` wins), a sentence saying where a follow-up
        starts, for the new session's log, and the failed or abandoned run
        it carries on from (its kept worktree's edits, once its execution is
        confirmed stopped); raises when it must not start."""
        runs = self._discussion_runs
        grounded = await asyncio.to_thread(runs.repo_of, discussion_id)
        if grounded.resolve() != root.resolve():
            raise CorralError(REPO_DIFFERS)
        registry = self._registry
        sessions = [
            s
            for row in registry.summaries()
            if row.discussion_id == discussion_id and (s := registry.stored(row.session_id))
        ]
        recorded, worktrees = await asyncio.to_thread(
            lambda: (runs.runs(discussion_id), self._unfinished_changes(sessions))
        )
        rows = linked_rows(recorded, sessions, worktrees)
        busy = first_unfinished(rows)
        if busy is not None:
            raise CorralError(unfinished_work(str(busy["session_id"]), str(busy["state"])))
        if base is not None:
            return base, None, None
        left = resumable_run(rows)
        if left is not None:
            old = registry.stored(str(left["session_id"]))
            if old is None or not old.execution_stopped or old.start_commit is None:
                raise CorralError(NOT_CONFIRMED_STOPPED)
            return old.start_commit, resuming(label(old.id), str(left["worktree"])), old
        run = decisive_run(rows)
        if run is None:
            return None, None, None
        who = label(str(run["session_id"]))
        if run.get("result_delivery") == "checkout":
            return (
                None,
                f"{who} delivered its change to your checkout, so this follow-up starts from "
                "your checkout's current files: that change plus any edits since.",
                None,
            )
        commit = str(run["result_commit"])
        try:
            sha = await asyncio.to_thread(resolve_base, root, commit)
        except CorralError:
            raise CorralError(
                f"the commit {who} delivered ({commit[:12]}) is no longer in {root}, so nothing "
                "was started. Name a base revision to start this follow-up from"
            ) from None
        assert sha is not None
        branch = run.get("result_branch")
        where = f", delivered to {branch}" if branch else ""
        return (
            sha,
            (
                f"This follow-up starts from the commit {who} delivered ({sha[:12]}{where}), not "
                "from your checkout."
            ),
            None,
        )

    def _unfinished_changes(self, sessions: list[CoderSession]) -> dict[str, str]:
        """Failed or abandoned runs whose kept worktree still holds changes: a
        worktree that is unchanged, or that a rejection made disposable,
        holds no work to lose."""
        found: dict[str, str] = {}
        for s in sessions:
            if s.state not in (S.FAILED, S.ABANDONED) or not s.worktree:
                continue
            path = Path(s.worktree)
            if not path.is_dir() or self._workspaces.disposable(s.worktree):
                continue
            ws = GitWorkspace(Path(s.repo), path)
            if s.start_commit is None or not ws.is_pristine(s.start_commit):
                found[s.id] = s.worktree
        return found

    async def _draft(self, live: LiveSession, given: OutcomeContract | None = None) -> None:
        """Draft the contract, or take the operator's own (`given`, e.g. a
        contract file): it is validated and baselined all the same."""
        s = live.session
        try:
            held_back = []
            if given is not None and given.hidden_checks and not given.checks:
                # hidden checks alone (`corral run --hidden-check` without
                # --check): the visible checks are drafted, these kept
                held_back, given = given.hidden_checks, None
            contract = given or await self._drafter.draft(self._request(live))
            if held_back:
                contract = contract.model_copy(
                    update={"hidden_checks": [*contract.hidden_checks, *held_back]}
                )
            contract = self._hidden_stored(s, contract)
            fault_point("contract:drafted")
            problems = contract.validate_contract(
                max_timeout_secs=self._config.max_check_timeout_secs
            )
            if problems:
                raise DraftingError("the drafted contract is invalid: " + "; ".join(problems))
            baseline = await self._verifier.baseline(live.session, contract, self._on_setup(live))
            gates_nothing = bool(baseline) and all(r.passed for r in baseline)
            if gates_nothing:
                contract, baseline, gates_nothing = await self._reassess(live, contract, baseline)
        except asyncio.CancelledError:
            raise CorralError(DRAFTING_CANCELLED) from None
        except DraftingError as exc:
            if live.cancel_requested or s.state.is_terminal:
                raise CorralError(DRAFTING_CANCELLED) from None
            self._fail_drafting(live, exc)
            raise
        except Exception as exc:  # git, checks, or a drafter bug: nothing was attempted
            if live.cancel_requested or s.state.is_terminal:
                raise CorralError(DRAFTING_CANCELLED) from None
            self._fail_drafting(live, DraftingError(str(exc) or type(exc).__name__))
            raise CorralError(f"contract derivation failed: {exc}") from exc
        if live.cancel_requested or s.state.is_terminal:
            raise CorralError(DRAFTING_CANCELLED)
        record_use(s, live.model_ledger, add_cost=True)
        contract = await self._judged(live, contract, baseline)
        s.contract, s.baseline, s.baseline_gates_nothing = contract, baseline, gates_nothing
        self._registry.transition(live, S.CONTRACT_PROPOSED)
        fault_point("contract:saved")
        self._announce_contract(live)

    def _hidden_stored(self, s: CoderSession, contract: OutcomeContract) -> OutcomeContract:
        """The contract with its hidden files' content in the state dir (only
        their sha256 stays in it). A session on a host keeps them here too:
        they are written only into its verification checkouts there."""
        if not contract.hidden_checks:
            return contract
        try:
            return HiddenStore(self._registry.state_dir).absorb(contract)
        except (CorralError, OSError) as exc:
            raise DraftingError(f"the hidden checks could not be stored: {exc}") from exc

    async def _reassess(
        self, live: LiveSession, contract: OutcomeContract, baseline: list[CheckResult]
    ) -> tuple[OutcomeContract, list[CheckResult], bool]:
        """One attempt to strengthen an all-green contract: the drafter is asked
        once for a check that fails now; whatever comes back is said plainly."""
        self._registry.emit(
            live,
            PlanTextData(text="The proposed checks already pass before any edits. Checking once…"),
        )
        shown = contract.model_copy(update={"hidden_checks": []})  # never the model's to see
        request = ReviseRequest(**vars(self._request(live)), prior=shown, request=REASSESS_FEEDBACK)
        try:
            better = await asyncio.wait_for(self._drafter.revise(request), 180)
        except TimeoutError:
            self._registry.emit(
                live,
                PlanTextData(text="Automatic check reassessment timed out; review the checks."),
            )
            return contract, baseline, True
        except DraftingError as exc:
            self._registry.emit(
                live,
                PlanTextData(text=f"Could not improve the proposed checks automatically: {exc}"),
            )
            return contract, baseline, True
        better = better.model_copy(update={"hidden_checks": list(contract.hidden_checks)})
        if better.validate_contract() or contracts_equivalent(better, contract):
            self._registry.emit(
                live,
                PlanTextData(
                    text=(
                        "Every check still passes before editing: this contract proves nothing yet. "
                        "Add a check that fails now and passes only when the work is done."
                    )
                ),
            )
            return contract, baseline, True
        new_baseline = await self._verifier.baseline(live.session, better, self._on_setup(live))
        gates_nothing = all(r.passed for r in new_baseline)
        text = (
            "The revised checks now include a failing baseline."
            if not gates_nothing
            else "Every check still passes before editing, even after one reassessment."
        )
        self._registry.emit(live, PlanTextData(text=text))
        return better, new_baseline, gates_nothing

    async def _judged(
        self, live: LiveSession, contract: OutcomeContract, baseline: list[CheckResult]
    ) -> OutcomeContract:
        """`contract` with the files that judge it at the start commit."""
        s = live.session
        if s.start_commit is None:
            return contract
        files = await asyncio.to_thread(discover, Path(s.repo), s.start_commit, contract, baseline)
        return contract.model_copy(update={"judge_files": files})

    def _on_setup(self, live: LiveSession) -> Callable[[SetupOutcome], None]:
        """Record and announce a baseline's setup run (its output is in the log)."""

        def heard(outcome: SetupOutcome) -> None:
            live.session.setup_outcome = outcome
            self._registry.emit(live, SetupCompletedData(outcome=outcome))

        return heard

    def _announce_contract(self, live: LiveSession, *, revised: bool = False) -> None:
        s = live.session
        assert s.contract is not None
        self._registry.emit(
            live,
            ContractProposedData(contract=s.contract.model_copy(deep=True), revised=revised),
        )
        if s.contract.judge_files:
            self._registry.emit(
                live,
                PlanTextData(
                    text=(
                        f"How this work is judged: {len(s.contract.judge_files)} file(s) fixed "
                        f"as they are now ({judged_summary(s.contract.judge_files)}); "
                        "verification puts them back before the checks run, and a change to "
                        "any of them is shown at approval and needs a person."
                    )
                ),
            )
        if s.baseline:
            self._registry.emit(
                live,
                ContractBaselineData(
                    results=list(s.baseline), gates_nothing=s.baseline_gates_nothing
                ),
            )
            for r in s.baseline:
                if r.already_failing and not r.hidden:
                    count = len(r.already_failing)
                    shown = ", ".join(r.already_failing[:10])
                    more = f" and {count - 10} more" if count > 10 else ""
                    placed = placed_count(r.already_failing, r.tests)
                    unchanged = " and none of these fails differently" if placed else ""
                    self._registry.emit(
                        live,
                        PlanTextData(
                            text=(
                                f"{r.name}: already failing on the untouched tree ({count}): "
                                f"not this task's work ({shown}{more}). The check passes when "
                                f"no test that passed before fails{unchanged}; "
                                f"{unseen_regressions(count, placed)}."
                            )
                        ),
                    )
            proving = [r for r in s.baseline if r.verdict is CheckVerdict.FAILS and not r.hidden]
            if proving:
                seen = "; ".join(f"{r.name}: {r.reason}" for r in proving)
                self._registry.emit(
                    live,
                    PlanTextData(
                        text=f"Red on the untouched tree, as the work must change it ({seen})."
                    ),
                )
            tally = hidden_tally(s.baseline)
            if tally is not None:
                self._registry.emit(
                    live,
                    PlanTextData(
                        text=f"Hidden checks (held back from the agent) on the untouched "
                        f"tree: {tally}."
                    ),
                )
            blocked = [r for r in s.baseline if r.cannot_run and not r.hidden]
            if blocked:
                first = blocked[0]
                names = ", ".join(r.name for r in blocked)
                self._registry.emit(
                    live,
                    PlanTextData(
                        text=(
                            f"{len(blocked)} check(s) cannot run here ({names}: {first.reason}). "
                            "That is the environment, not the work, so they prove nothing yet: "
                            f"{first.fix}."
                        )
                    ),
                )

    def _fail_drafting(self, live: LiveSession, exc: DraftingError) -> None:
        s = live.session
        record_use(s, live.model_ledger, add_cost=True)
        if exc.auth:
            s.error = (
                "contract drafting needs a sign-in — set the model's credentials (see "
                f"`corral doctor`) and start again: {exc}"
            )
            s.failure_kind = FailureKind.AUTH_REQUIRED
            self._registry.emit(live, AuthRequiredData(message=s.error, wait_secs=0))
        elif exc.no_checks:  # the operator gives the checks: a configuration, not a fault
            s.error = f"no contract could be drafted: {exc}"
            s.failure_kind = FailureKind.CONFIGURATION
        else:
            s.error = f"contract derivation failed: {exc}"
            s.failure_kind = FailureKind.INFRASTRUCTURE
        s.keep_workspace_on_failure = True
        self._registry.transition(live, S.FAILED)
        self._workspaces.retain(s.worktree, note=f"drafting failed: {s.error}"[:300])

    async def revise(self, session_id: str, request: str) -> ReviseResult:
        live = self._registry.live(session_id)
        text = request.lstrip() if request.lstrip().startswith("/check") else request.strip()
        if not text:
            raise CorralError("say what you want changed about the contract")
        if len(text.encode("utf-8")) > MAX_REVISION_BYTES:
            raise CorralError("A check revision must contain at most 16384 bytes of text.")
        if live.cancel_requested:
            raise CorralError(DRAFTING_CANCELLED)
        s = live.session
        if s.state is not S.CONTRACT_PROPOSED:
            raise CorralError(already_happened(s.id, s.state, S.CONTRACT_PROPOSED, "revise"))
        if s.contract is None:
            raise CorralError(f"{label(s.id)} has no proposed contract")
        prior = s.contract
        task = self._registry.spawn(live, self._revise(live, prior, text))
        return await asyncio.shield(task)

    async def _revise(self, live: LiveSession, prior: OutcomeContract, text: str) -> ReviseResult:
        s = live.session
        try:
            if text.startswith("/check"):
                redraft = apply_check_edit(prior, text)
            elif text.startswith("/remove"):
                redraft = apply_remove(prior, text)
            elif text.startswith("/setup"):
                redraft = apply_setup_edit(prior, text)
            elif text.startswith(("/judge", "/not-judge")):
                redraft = apply_judge_edit(prior, text)
            elif text.startswith("/hidden"):
                redraft = self._add_hidden(s, prior, text.removeprefix("/hidden").strip())
            else:
                # the drafting model never sees the hidden checks; they stay as they are
                shown = prior.model_copy(update={"hidden_checks": []})
                req = ReviseRequest(**vars(self._request(live)), prior=shown, request=text)
                redraft = (await self._drafter.revise(req)).model_copy(
                    update={"hidden_checks": list(prior.hidden_checks)}
                )
        except DraftingError as exc:
            if exc.auth:
                reason = f"the redraft needs a sign-in — set the model's credentials, then revise again: {exc}"
                result = self._reject_revision(live, text, reason)
                self._registry.emit(live, AuthRequiredData(message=reason, wait_secs=0))
                return result
            return self._reject_revision(live, text, f"the redraft failed: {exc}")
        finally:
            record_use(s, live.model_ledger, add_cost=True)
        problems = redraft.validate_contract(max_timeout_secs=self._config.max_check_timeout_secs)
        if problems:
            return self._reject_revision(
                live, text, "the redrafted contract is invalid: " + "; ".join(problems)
            )
        judging = text.startswith(("/judge", "/not-judge"))  # the checks stay; the judge changes
        if (
            not judging
            and contracts_equivalent(redraft, prior)
            and redraft.description == prior.description
        ):
            return self._reject_revision(live, text, NOT_EXPRESSIBLE)
        baseline = await self._verifier.baseline(live.session, redraft, self._on_setup(live))
        if s.state is not S.CONTRACT_PROPOSED or live.cancel_requested:
            reason = already_happened(s.id, s.state, S.CONTRACT_PROPOSED, "revise")
            self._reject_revision(live, text, reason)
            raise CorralError(reason)
        redraft = await self._judged(live, redraft, baseline)
        if s.contract is not prior:
            return self._reject_revision(live, text, LOST_REVISION_RACE)
        # a revision is the contract itself (the agent gets the confirmed
        # contract in its prompt), never operator guidance
        old = (s.contract, s.baseline, s.baseline_gates_nothing)
        self._registry.transition(live, S.CONTRACT_PROPOSED)
        s.contract = redraft
        s.baseline = baseline
        s.baseline_gates_nothing = bool(baseline) and all(r.passed for r in baseline)
        try:
            self._registry.persist(live)
        except Exception as exc:
            s.contract, s.baseline, s.baseline_gates_nothing = old
            raise CorralError(f"Could not save the revised checks: {exc}") from exc
        self._announce_contract(live, revised=True)
        return self._revision_result(live, True, None)

    def _add_hidden(self, s: CoderSession, prior: OutcomeContract, spec: str) -> OutcomeContract:
        """`/hidden FILE[:DEST]` at gate 1: a hidden check from a file the
        owner reads now (see `contracts.hidden.hidden_check_from_file`)."""
        if not spec:
            raise DraftingError(
                "say which file: /hidden PATH[:WHERE] (WHERE: its place in the repository)"
            )
        taken = {c.name for c in prior.checks} | {h.name for h in prior.hidden_checks}
        try:
            added = hidden_check_from_file(spec, prior, taken)
        except CorralError as exc:
            raise DraftingError(str(exc).removeprefix("--hidden-check ")) from None
        grown = prior.model_copy(update={"hidden_checks": [*prior.hidden_checks, added]})
        return self._hidden_stored(s, grown)

    def _reject_revision(self, live: LiveSession, text: str, reason: str) -> ReviseResult:
        """Said to the operator (the answer) and on the log; a `/hidden`
        request's file is named in the answer only, never on the log the
        agent may later read."""
        logged_text, logged_reason = text, reason
        if text.startswith("/hidden"):
            logged_text = "/hidden (a file held back from the agent)"
            logged_reason = "the hidden check could not be added (the answer said why)"
        self._registry.emit(
            live, ContractRevisionRejectedData(request=logged_text, reason=logged_reason)
        )
        return self._revision_result(live, False, reason)

    def _revision_result(
        self, live: LiveSession, revised: bool, message: str | None
    ) -> ReviseResult:
        s = live.session
        return ReviseResult(
            state=s.state,
            revised=revised,
            contract=s.contract,
            baseline=s.baseline,
            baseline_gates_nothing=s.baseline_gates_nothing,
            message=message,
        )

    async def confirm(
        self, session_id: str, contract: OutcomeContract | None = None
    ) -> dict[str, str]:
        live = self._registry.live(session_id)
        s = live.session
        if live.cancel_requested:
            raise CorralError(DRAFTING_CANCELLED)
        if contract is not None:
            problems = contract.validate_contract(
                max_timeout_secs=self._config.max_check_timeout_secs
            )
            if problems:
                raise CorralError("edited contract is invalid: " + "; ".join(problems))
            try:
                contract = self._hidden_stored(s, contract)
            except DraftingError as exc:
                raise CorralError(str(exc)) from None
        if s.state is not S.CONTRACT_PROPOSED:
            raise CorralError(already_happened(s.id, s.state, S.CONTRACT_PROPOSED, "confirm"))
        if s.contract is None:
            raise CorralError(f"{label(s.id)} has no proposed contract")
        if contract is not None and not (
            contracts_equivalent(contract, s.contract)
            and contract.description == s.contract.description
        ):
            prior = s.contract
            task = self._registry.spawn(
                live, self._verifier.baseline(s, contract, self._on_setup(live))
            )
            try:
                baseline = await asyncio.shield(task)
            except asyncio.CancelledError:
                raise CorralError(DRAFTING_CANCELLED) from None
            if live.cancel_requested or s.state.is_terminal:
                raise CorralError(DRAFTING_CANCELLED)
            if s.state is not S.CONTRACT_PROPOSED:
                raise CorralError(already_happened(s.id, s.state, S.CONTRACT_PROPOSED, "confirm"))
            if s.contract is not prior:
                raise CorralError(
                    "the proposed contract changed during confirmation; re-read it before "
                    "confirming"
                )
            s.contract = contract
            s.baseline = baseline
            s.baseline_gates_nothing = bool(baseline) and all(r.passed for r in baseline)
            self._registry.persist(live)
            self._announce_contract(live, revised=True)
        unreadable = _named_tests_unreadable(s.contract, s.baseline)
        if unreadable:
            raise CorralError(unreadable)
        judged = await self._judged(live, contract or s.contract, s.baseline)
        if s.state is not S.CONTRACT_PROPOSED or live.cancel_requested:
            raise CorralError(already_happened(s.id, s.state, S.CONTRACT_PROPOSED, "confirm"))
        s.contract = judged
        self._registry.transition(live, S.CONTRACT_CONFIRMED)
        self._registry.transition(live, S.RUNNING)
        self._run_loop.start(live)
        return {"state": S.RUNNING.value}

    def _request(self, live: LiveSession) -> DraftRequest:
        s = live.session

        def emit(data: EventData) -> None:
            self._registry.emit(live, data)

        return DraftRequest(
            session_id=s.id,
            intent=s.intent,
            repo=Path(s.repo),
            worktree=Path(s.worktree) if s.worktree else None,
            constraints=[*s.discussion_constraints, *s.steering_messages],
            model=s.model if s.model_pinned else None,
            on_hop=lambda hop: emit(hop_event(hop)),
            auth_wait=auth_waiter(emit),
            ledger=live.model_ledger,
        )

    def _start_result(self, live: LiveSession) -> StartResult:
        s = live.session
        return StartResult(
            session_id=s.id,
            state=s.state,
            engine=s.engine,
            requested_engine=s.requested_engine,
            engine_ran=s.engine_ran,
            worktree=s.worktree,
            base=s.base,
            contract=s.contract,
            baseline=s.baseline,
            baseline_gates_nothing=s.baseline_gates_nothing,
            journal_path=str(self._registry.journal_path(s.id)),
        )


def _named_tests_unreadable(contract: OutcomeContract, baseline: list[CheckResult]) -> str:
    """Why a check's named tests (`must_pass`) cannot be held to, or "": its
    runner ran on the untouched tree and reported no per-test outcomes."""
    results = {r.name: r for r in baseline}
    for check in contract.checks:
        result = results.get(check.name)
        if not check.must_pass or result is None or result.cannot_run:
            continue
        if result.tests is None:
            return (
                f"the check {check.name} names tests that must pass, but its command reported "
                "no per-test outcomes on the untouched tree, so corral could not tell whether "
                "they ran: use a runner corral reads per test (pytest, unittest -v, node --test, "
                "go test, cargo test, jest/vitest --json --outputFile) or remove must_pass"
            )
    return ""
