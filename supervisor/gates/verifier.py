"""The one verifier: the runtime runs the contract's checks itself (a model's
claim of success never counts), and nothing else in corral decides what was
verified.

It runs the checks on the untouched start commit (the baseline), on the
session's change once the engine stops, on the start commit plus only the
approved part of a change (partial approval), and on the tree a chosen
delivery would write when that is not the tree already verified.

The checks run on exactly the tree that is delivered: a fresh checkout of a
tree object (`scratch_tree.materialized`), never the agent's worktree. The
worktree is captured as an immutable git tree (ignored files excluded) right
before the checks and again right after; the checks run on a fresh checkout
of the first capture, with the setup run in that checkout first, so an
ignored `.pyc`, a `node_modules` the agent left or a file a check writes can
neither pass a check nor be blamed on the agent. Only an unchanged worktree is
a result; when it moved, the checks run again (at most `STABILITY_ATTEMPTS`
times in all), then the result is refused with the paths that kept changing.
The verified tree is stored with the session (and anchored by a ref) and is
what the diff, partial approval, the review identity and delivery read —
never the live worktree. Later changes in the worktree are watched for and
shown as "changed since verification".

The checks decide on the operator's exam (`contracts.judge`): the tree with
every judge file recorded at gate 1 put back as it was. When the change
touched one, the checks also run on the tree as it is (the agent's versions),
both results are kept, and the session records its `judge_changes`: only a
person who saw them can approve it (`ApprovalGate.approve`). The hidden
checks run on the exam only. A session on another host gets the same exam:
its snapshot is fetched here, the exam built here and pushed to the host's
mirror, and the checks (hidden ones in checkouts of their own) run there.

The agent during verification: it is neither paused nor stopped. Pausing
cannot reach what it detached (a background writer in its own session), nor
the operator typing in its pane, and the repair rounds need the same pane
alive. Instead the live tree is not trusted: the before/after snapshots catch
a change while the checks run, and every later step reads the tree object.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypeVar

from ..config import SupervisorConfig
from ..contracts.checks import captures_from, run_contract
from ..contracts.environment import Environments, SetupRun, setup_reason
from ..contracts.failure_sites import IN_THE_TREE, said_changed
from ..contracts.hidden import (
    HiddenStore,
    as_hidden,
    hidden_contract,
    hidden_tally,
    materialized,
    not_placed,
)
from ..contracts.judge import HARNESS, Exam, build_exam, judge_sentence
from ..contracts.verdicts import change_broke_setup, setup_failed
from ..errors import CorralError
from ..events import (
    CheckCompletedData,
    ContractEvaluatedData,
    PlanTextData,
    SetupCompletedData,
    WorktreeChangedData,
)
from ..faults import fault_point
from ..git.repo import head_commit
from ..git.run import git
from ..git.trees import anchor_verified, changed_between, snapshot_tree
from ..models import (
    CheckResult,
    CoderSession,
    JudgeChange,
    OutcomeContract,
    SetupOutcome,
)
from ..session.live import LiveSession
from ..session.registry import SessionRegistry
from ..states import CoderState
from ..workspaces import Workspaces
from .scratch_tree import ScratchTrees

if TYPE_CHECKING:  # a host's tree loads with the first session run on a host
    from ..contracts.environment import CheckEnvironment
    from ..hosts.configured import Hosts
    from .host_tree import HostTree

T = TypeVar("T")

# said wherever the agent-version results are shown next to the exam's
HIDDEN_ON_EXAM_ONLY = "the hidden checks ran on the exam only"
STABILITY_ATTEMPTS = 3  # the first run plus up to two more while the tree moves
MAX_NAMED_PATHS = 20  # paths kept on a session / in an event; the rest are counted


@dataclass(frozen=True)
class Verification:
    """One runtime verification: the checks' results and the tree they ran on."""

    results: list[CheckResult]
    tree: str | None  # the snapshot the checks ran on; None when it never held still
    moved: list[str]  # paths that changed while the last attempt ran
    judge_changes: list[JudgeChange] = field(default_factory=list)
    agent_results: list[CheckResult] = field(default_factory=list)  # with the agent's judge files

    @property
    def stable(self) -> bool:
        return self.tree is not None

    @property
    def passed(self) -> bool:
        return self.stable and all(r.passed for r in self.results)


def _remove_all(paths: list[Path]) -> None:
    """Environments that belonged to a disposable worktree go with it."""
    for path in paths:
        shutil.rmtree(path, ignore_errors=True)


def _repository_of(worktree: Path) -> Path:
    """The repository a worktree belongs to (its common git dir's parent)."""
    common = git(worktree, "rev-parse", "--path-format=absolute", "--git-common-dir").strip()
    return Path(common).parent


async def _crash_in_changed_files(
    repo: Path, parent: str, tree: str, results: list[CheckResult]
) -> list[CheckResult]:
    """A test runner that died in a file of the tree checked: said as "a file
    this work changed" where the change (`parent`..`tree`) touched it."""
    if not any(IN_THE_TREE in r.reason for r in results):
        return results
    changed = set(await asyncio.to_thread(changed_between, repo, parent, tree))
    out: list[CheckResult] = []
    for r in results:
        said = said_changed(r.reason, changed)
        if said != r.reason:
            tail = r.output_tail.replace(r.reason, said)
            r = r.model_copy(update={"reason": said, "output_tail": tail})
        out.append(r)
    return out


@dataclass(frozen=True)
class ExamRun:
    """The checks on the operator's exam (these decide), what the change did
    to how it is judged, and the checks on the tree as it is (only when a
    judge file changed)."""

    results: list[CheckResult]
    changes: list[JudgeChange]
    agent_results: list[CheckResult]


def exam_summary(run: ExamRun | Verification) -> str:
    """The sentence verification says when the change touched how it is judged."""
    changes = run.changes if isinstance(run, ExamRun) else run.judge_changes
    agent = run.agent_results
    ours = "pass" if all(r.passed for r in run.results) else "fail"
    said = judge_sentence(changes)
    if not any(c.blocks for c in changes):
        return (
            f"{said}. The checks ran with those files as they were at gate 1 and as extended: "
            f"they {ours}."
        )
    if agent:
        theirs = "pass" if all(r.passed for r in agent) else "fail"
        said += (
            f". The checks {ours} with the judge files as they were at gate 1 (this decides) "
            f"and {theirs} with the agent's versions"
        )
        if any(r.hidden for r in run.results):
            said += f" ({HIDDEN_ON_EXAM_ONLY})"
    elif ours == "fail":
        said += ". The checks fail"
    if ours == "pass":
        return said + ". Only a person who has seen this can approve it."
    return said + "."


def name_paths(paths: list[str], limit: int = 5) -> str:
    """`a.txt, b.txt and 3 more`, for sentences."""
    shown = ", ".join(paths[:limit])
    return shown + (f" and {len(paths) - limit} more" if len(paths) > limit else "")


class Verifier:
    def __init__(
        self,
        registry: SessionRegistry,
        workspaces: Workspaces,
        config: SupervisorConfig,
        *,
        hosts: Hosts | None = None,
    ) -> None:
        self._registry = registry
        self._hosts = hosts  # sessions on other hosts are verified there
        self._workspaces = workspaces
        self._trees = ScratchTrees(workspaces)
        self._timeout_ceiling = config.max_check_timeout_secs
        self._watch_secs = config.verified_watch_secs
        self._verifying: set[str] = set()  # sessions whose checks are running now
        self._watching: dict[str, asyncio.Task[None]] = {}
        self.environments = Environments(registry.state_dir)

    async def _checks_after_setup(
        self,
        contract: OutcomeContract,
        path: Path,
        run: SetupRun | None,
        *,
        captures: dict[str, str] | None = None,
        on_result: Callable[[CheckResult], None] | None = None,
        untouched: bool = False,
        baseline: list[CheckResult] | None = None,
    ) -> list[CheckResult]:
        """The checks inside the setup's environment; when the setup failed,
        none of them runs and each says it cannot run, and why. `untouched`:
        the baseline run; `baseline`: its results, to judge test by test."""
        if run is not None and not run.outcome.ok:
            why = setup_reason(run.outcome)
            broke = change_broke_setup(run.outcome.output_tail, run.outcome.timed_out, baseline)
            return [
                setup_failed(c.name, why, by_the_change=broke, output=run.outcome.output_tail)
                for c in contract.checks
            ]
        environment = run.environment if run is not None else None
        return await run_contract(
            contract,
            path,
            timeout_ceiling=self._timeout_ceiling,
            environment=environment,
            captures=captures,
            on_result=on_result,
            untouched=untouched,
            baseline=baseline,
        )

    async def _hidden_apart(
        self,
        contract: OutcomeContract,
        checkout: Callable[[], contextlib.AbstractAsyncContextManager[Path]],
        *,
        phase: Literal["baseline", "verification"],
        on_result: Callable[[CheckResult], None] | None = None,
    ) -> list[CheckResult]:
        """The hidden checks in a checkout of their own (the same tree, the
        setup again, from its cache when it has one): no visible check ran
        the work's code there, so nothing it planted can touch them, and
        nothing the work's code copied out of a hidden file while they ran
        is left where a visible check (whose output the agent reads) could
        show it; the checkout is reset when they are done."""
        if not contract.hidden_checks:
            return []
        discard: list[Path] = []
        try:
            async with checkout() as path:
                setup = await self.environments.prepare(
                    contract, path, phase=phase, timeout_ceiling=self._timeout_ceiling
                )
                if setup is not None:
                    discard.extend(setup.discard)
                    if not setup.outcome.ok:
                        why = setup_reason(setup.outcome)
                        return [
                            setup_failed(h.name, why).model_copy(update={"hidden": True})
                            for h in contract.hidden_checks
                        ]
                environment = setup.environment if setup is not None else None
                return await self._hidden_checks(contract, path, environment, on_result=on_result)
        finally:
            await asyncio.to_thread(_remove_all, discard)

    async def _hidden_checks(
        self,
        contract: OutcomeContract,
        path: Path,
        environment: CheckEnvironment | None,
        *,
        on_result: Callable[[CheckResult], None] | None,
    ) -> list[CheckResult]:
        """The contract's hidden checks, their files written into this
        checkout (corral's, never the agent's) only while they run. Each is
        the operator's exam whole: judged on its own, never against the
        baseline (a hidden test red on the untouched tree is what the work
        must turn green, not a test "already failing"), see `strict`."""
        if not contract.hidden_checks:
            return []
        files = materialized(path, contract.hidden_checks, HiddenStore(self._registry.state_dir))
        try:
            await asyncio.to_thread(files.__enter__)
        except (CorralError, OSError) as exc:
            return not_placed(contract, exc)
        try:
            results = await run_contract(
                hidden_contract(contract),
                path,
                timeout_ceiling=self._timeout_ceiling,
                environment=environment,
                on_result=None if on_result is None else lambda r: on_result(as_hidden(r)),
            )
        finally:
            await asyncio.shield(asyncio.to_thread(files.__exit__, None, None, None))
        return [as_hidden(r) for r in results]

    async def baseline(
        self,
        session: CoderSession,
        contract: OutcomeContract,
        on_setup: Callable[[SetupOutcome], None] | None = None,
    ) -> list[CheckResult]:
        """Every check once on the untouched tree, in a disposable worktree so
        the task's own worktree is never changed by a check; the setup runs
        first (`on_setup` hears how it went)."""
        assert session.start_commit is not None
        if session.host and self._hosts is not None:
            from .host_tree import host_baseline

            return await host_baseline(
                self._hosts.get(session.host),
                session,
                contract,
                self._timeout_ceiling,
                on_setup,
                hidden=self._hidden_store(contract),
            )
        discard: list[Path] = []
        if contract.setup:  # environments of worktrees removed since go first
            await asyncio.to_thread(self.environments.prune)

        async def run(path: Path) -> list[CheckResult]:
            fault_point("baseline:before")
            setup = await self.environments.prepare(
                contract, path, phase="baseline", timeout_ceiling=self._timeout_ceiling
            )
            if setup is not None:
                discard.extend(setup.discard)
                if on_setup is not None:
                    on_setup(setup.outcome)
            results = await self._checks_after_setup(contract, path, setup, untouched=True)
            fault_point("baseline:after")
            return results

        try:
            visible = await self._in_scratch(session, run)
        finally:
            await asyncio.to_thread(_remove_all, discard)
        start = session.start_commit
        hidden = await self._hidden_apart(
            contract,
            lambda: self._trees.checkout(Path(session.repo), start, session.id),
            phase="baseline",
        )
        return visible + hidden

    def _hidden_store(self, contract: OutcomeContract) -> HiddenStore | None:
        """Where the contract's hidden checks' files are kept (None: it has none)."""
        return HiddenStore(self._registry.state_dir) if contract.hidden_checks else None

    def _host_tree(self, session: CoderSession) -> HostTree | None:
        """The session's worktree on its host; None for a session run here
        (the hosts' tree code loads only for a session on a host)."""
        if not session.host:
            return None
        from .host_tree import HostTree

        return HostTree.of(self._hosts, session)

    async def verify(self, live: LiveSession) -> Verification:
        """Every check on the worktree, between two snapshots of it; the
        results are recorded on the session and announced as the runtime's
        evaluation. A tree that moved under the checks is verified again, up
        to `STABILITY_ATTEMPTS` runs; the caller decides what a result means
        (`accept` makes a green, stable one the session's verified tree)."""
        registry = self._registry
        s = live.session
        assert s.contract is not None and s.worktree is not None
        worktree = Path(s.worktree)
        results: list[CheckResult] = []
        changes: list[JudgeChange] = []
        agent_results: list[CheckResult] = []
        tree: str | None = None
        moved: list[str] = []
        there = self._host_tree(s)  # None: the worktree is here
        self._verifying.add(s.id)
        try:
            registry.emit(
                live,
                PlanTextData(
                    text="Runtime verification: re-running every contract check"
                    + (f" {await there.on()}." if there else ".")
                ),
            )

            def on_setup(outcome: SetupOutcome) -> None:
                s.setup_outcome = outcome
                registry.emit(live, SetupCompletedData(outcome=outcome))

            for attempt in range(1, STABILITY_ATTEMPTS + 1):
                fault_point("verify:before-checks")
                before = await (there.snapshot() if there else self._snapshot(worktree))
                assert s.start_commit is not None
                exam = await self.exam_on_tree(
                    s.contract,
                    Path(s.repo),
                    before,
                    s.start_commit,
                    s.id,
                    captures=captures_from(s.contract, s.baseline),
                    on_result=lambda r: registry.emit(live, CheckCompletedData(result=r)),
                    on_setup=on_setup,
                    baseline=s.baseline,
                    there=there,
                )
                results, changes, agent_results = exam.results, exam.changes, exam.agent_results
                fault_point("verify:between-snapshots")
                after = await (there.snapshot() if there else self._snapshot(worktree))
                if before == after:
                    tree, moved = before, []
                    break
                if there is not None:
                    moved = await there.changed(before, after)
                else:
                    moved = await asyncio.to_thread(changed_between, worktree, before, after)
                registry.emit(
                    live,
                    WorktreeChangedData(
                        phase="during_verification",
                        files=moved[:MAX_NAMED_PATHS],
                        attempt=attempt,
                        of=STABILITY_ATTEMPTS,
                    ),
                )
                if attempt < STABILITY_ATTEMPTS:
                    registry.emit(
                        live,
                        PlanTextData(
                            text=(
                                f"The worktree changed while the checks ran ({name_paths(moved)}); "
                                "that result does not count. Verifying again "
                                f"(attempt {attempt + 1} of {STABILITY_ATTEMPTS})."
                            )
                        ),
                    )
            if there is not None and tree is not None and all(r.passed for r in results):
                # the verified tree comes home: the review, identity and
                # delivery read it here, and the home copy shows it
                await there.bring_home(tree, worktree)
                registry.emit(live, PlanTextData(text=there.brought_home(tree)))
        finally:
            self._verifying.discard(s.id)
        verification = Verification(results, tree, moved, changes, agent_results)
        s.last_check_results = results
        if tree is not None and s.review_tree is None:
            # kept for a session that never passed (a verified tree's own are set by `accept`)
            s.judge_changes, s.agent_exam_results = list(changes), list(agent_results)
        if tree is not None and changes:
            registry.emit(live, PlanTextData(text=exam_summary(verification)))
        registry.emit(
            live,
            ContractEvaluatedData(by="runtime", passed=verification.passed, results=list(results)),
        )
        tally = hidden_tally(results)
        if tally is not None:
            ran = sum(1 for r in results if r.hidden)
            registry.emit(
                live,
                PlanTextData(text=f"Hidden checks (held back from the agent): {ran} ran, {tally}."),
            )
        registry.persist(live)
        return verification

    async def verify_worktree(
        self, contract: OutcomeContract, worktree: Path, baseline: list[CheckResult]
    ) -> Verification:
        """`contract` on a worktree no session owns (a foreman's subtask),
        under the same rule as `verify`: setup first, then the checks between
        two snapshots, again while the tree moves. Nothing is announced."""
        repo = await asyncio.to_thread(_repository_of, worktree)
        parent = await asyncio.to_thread(head_commit, worktree)
        assert parent is not None
        results: list[CheckResult] = []
        moved: list[str] = []
        for _attempt in range(STABILITY_ATTEMPTS):
            before = await self._snapshot(worktree)
            exam = await self.exam_on_tree(
                contract,
                repo,
                before,
                parent,
                worktree.name,
                captures=captures_from(contract, baseline),
                baseline=baseline,
            )
            results = exam.results
            after = await self._snapshot(worktree)
            if before == after:
                return Verification(results, before, [], exam.changes, exam.agent_results)
            moved = await asyncio.to_thread(changed_between, worktree, before, after)
        return Verification(results, None, moved)

    async def checks_on_tree(
        self,
        contract: OutcomeContract,
        repo: Path,
        tree: str,
        parent: str,
        owner: str,
        *,
        captures: dict[str, str] | None = None,
        on_result: Callable[[CheckResult], None] | None = None,
        on_setup: Callable[[SetupOutcome], None] | None = None,
        baseline: list[CheckResult] | None = None,
        hidden: bool = True,
    ) -> list[CheckResult]:
        """The setup, then every check, in a fresh checkout of exactly `tree`
        (a commit on `parent`), removed afterwards with what they wrote;
        test-suite checks are judged against `baseline` test by test. The
        hidden checks too, unless `hidden` is False."""
        discard: list[Path] = []
        try:
            async with self._trees.materialized(repo, tree, parent, owner) as path:
                setup = await self.environments.prepare(
                    contract, path, phase="verification", timeout_ceiling=self._timeout_ceiling
                )
                if setup is not None:
                    discard.extend(setup.discard)
                    if on_setup is not None:
                        on_setup(setup.outcome)
                visible = await self._checks_after_setup(
                    contract, path, setup, captures=captures, on_result=on_result, baseline=baseline
                )
            visible = await _crash_in_changed_files(repo, parent, tree, visible)
        finally:
            await asyncio.to_thread(_remove_all, discard)
        if not hidden:
            return visible
        held_back = await self._hidden_apart(
            contract,
            lambda: self._trees.materialized(repo, tree, parent, owner),
            phase="verification",
            on_result=on_result,
        )
        return visible + held_back

    async def exam_on_tree(
        self,
        contract: OutcomeContract,
        repo: Path,
        tree: str,
        parent: str,
        owner: str,
        *,
        captures: dict[str, str] | None = None,
        on_result: Callable[[CheckResult], None] | None = None,
        on_setup: Callable[[SetupOutcome], None] | None = None,
        baseline: list[CheckResult] | None = None,
        there: HostTree | None = None,
    ) -> ExamRun:
        """`checks_on_tree` on the operator's exam of `tree`: the judge files
        as they are on `parent`. When the change touched one, the checks run
        once more on `tree` as it is (not announced), for the record; the
        hidden checks do not run again there: they are no judge file the
        agent could change, so the exam's run of them is the only one.

        `there`: `tree` is a snapshot of a worktree on another host. Its
        objects are fetched here, the exam is built here as for a worktree
        here, pushed to the host's mirror, and every check runs there."""
        if there is not None and contract.judge_files:
            await there.fetch(tree)  # its objects, to build the exam from
        exam: Exam = await asyncio.to_thread(build_exam, repo, parent, tree, contract)
        if there is not None and exam.tree != tree:
            await there.send(exam.tree)

        async def run(
            on: str,
            *,
            hidden: bool,
            on_result: Callable[[CheckResult], None] | None = None,
            on_setup: Callable[[SetupOutcome], None] | None = None,
        ) -> list[CheckResult]:
            if there is None:
                return await self.checks_on_tree(
                    contract,
                    repo,
                    on,
                    parent,
                    owner,
                    captures=captures,
                    on_result=on_result,
                    on_setup=on_setup,
                    baseline=baseline,
                    hidden=hidden,
                )
            return await there.checks_on_tree(
                contract,
                self._timeout_ceiling,
                on,
                captures=captures,
                on_setup=on_setup,
                on_result=on_result,
                baseline=baseline,
                hidden=self._hidden_store(contract) if hidden else None,
            )

        results = await run(exam.tree, hidden=True, on_result=on_result, on_setup=on_setup)
        if exam.rewritten:  # said to the agent (a repair) and to the person
            put_back = ", ".join(sorted({c.path for c in exam.changes if c.what != HARNESS})[:5])
            note = (
                "\n[corral] the checks ran with the files that judge the work as they were at "
                f"gate 1 ({put_back}); a change to them is not part of the exam"
            )
            results = [
                r if r.hidden else r.model_copy(update={"output_tail": r.output_tail + note})
                for r in results
            ]
        agent: list[CheckResult] = []
        if exam.tree != tree:
            agent = await run(tree, hidden=False)
        visible = [r for r in results if not r.hidden]
        if exam.only_extended and len(agent) == len(visible):
            # tests appended to a test file: the file as it was decides, and the
            # agent's added tests must pass too (a red one is the work's)
            merged = [
                a if e.passed and not a.passed else e for e, a in zip(visible, agent, strict=True)
            ]
            results = merged + [r for r in results if r.hidden]
        return ExamRun(results, exam.changes, agent)

    async def verify_tree(
        self, live: LiveSession, tree: str, parent: str, *, scope: str
    ) -> list[CheckResult]:
        """Every check on `tree` (the tree a delivery would write, when it is
        not the one verified), announced as the runtime's evaluation of `scope`."""
        s = live.session
        assert s.contract is not None
        registry = self._registry
        registry.emit(
            live,
            PlanTextData(text=f"Runtime verification of {scope} (tree {tree[:12]})."),
        )
        exam = await self.exam_on_tree(
            s.contract,
            Path(s.repo),
            tree,
            parent,
            s.id,
            captures=captures_from(s.contract, s.baseline),
            baseline=s.baseline,
        )
        results = exam.results
        if exam.changes:
            registry.emit(live, PlanTextData(text=f"{scope}: {exam_summary(exam)}"))
        registry.emit(
            live,
            ContractEvaluatedData(
                by="runtime",
                scope=scope,
                passed=all(r.passed for r in results),
                results=list(results),
            ),
        )
        return results

    async def verify_on_host(
        self, contract: OutcomeContract, there: HostTree, baseline: list[CheckResult]
    ) -> Verification:
        """`verify_worktree` for a worktree on another host (a foreman's subtask
        placed there): the checks and both snapshots run on the host, and a
        green, stable tree is fetched into the local repository. The checks
        run on the exam of each snapshot there, as they do here."""
        results: list[CheckResult] = []
        moved: list[str] = []
        start = there.session.start_commit
        assert start is not None
        for _attempt in range(STABILITY_ATTEMPTS):
            before = await there.snapshot()
            exam = await self.exam_on_tree(
                contract,
                Path(there.session.repo),
                before,
                start,
                there.session.id,
                captures=captures_from(contract, baseline),
                baseline=baseline,
                there=there,
            )
            results = exam.results
            after = await there.snapshot()
            if before == after:
                if all(r.passed for r in results):
                    await there.fetch(before)
                return Verification(results, before, [], exam.changes, exam.agent_results)
            moved = await there.changed(before, after)
        return Verification(results, None, moved)

    async def accept(self, live: LiveSession, verification: Verification) -> None:
        """Make a green, stable verification the session's verified tree: stored
        with the session (it survives a restart) and anchored by a ref."""
        s = live.session
        assert verification.passed and verification.tree is not None
        assert s.start_commit is not None
        await asyncio.to_thread(
            anchor_verified, Path(s.repo), s.id, s.start_commit, verification.tree
        )
        s.review_tree = verification.tree
        s.last_check_results = list(verification.results)
        # what the verified tree did to how it is judged belongs to that tree
        s.judge_changes = list(verification.judge_changes)
        s.agent_exam_results = list(verification.agent_results)
        s.changed_since_verification = []
        self._registry.persist(live)
        fault_point("verify:recorded")

    async def snapshot(self, session: CoderSession) -> str:
        """The worktree's full content as a git tree id (ignored files excluded)."""
        assert session.worktree is not None
        return await self._snapshot(Path(session.worktree))

    async def _snapshot(self, worktree: Path) -> str:
        return await asyncio.to_thread(snapshot_tree, worktree)

    async def verify_selection(self, live: LiveSession, tree: str) -> list[CheckResult]:
        """Every check on `tree`, the start commit plus only the approved part,
        on the host of a session placed there (as its checks ran), on its exam
        (`exam_on_tree`, hidden checks included); a session here verifies the
        approved part's tree with `verify_tree`."""
        registry = self._registry
        s = live.session
        assert s.contract is not None and s.start_commit is not None
        there = self._host_tree(s)
        assert there is not None
        registry.emit(
            live,
            PlanTextData(text="Re-running the contract on the approved part only."),
        )
        await there.send(tree)
        exam = await self.exam_on_tree(
            s.contract,
            Path(s.repo),
            tree,
            s.start_commit,
            s.id,
            captures=captures_from(s.contract, s.baseline),
            baseline=s.baseline,
            there=there,
        )
        results = exam.results
        if exam.changes:
            registry.emit(live, PlanTextData(text=f"approved subset: {exam_summary(exam)}"))
        registry.emit(
            live,
            ContractEvaluatedData(
                by="runtime",
                scope="approved subset",
                passed=all(r.passed for r in results),
                results=list(results),
            ),
        )
        return results

    async def changes_since_verification(self, session: CoderSession) -> list[str]:
        """Paths where the worktree now differs from the verified tree (empty:
        exactly as verified)."""
        assert session.review_tree is not None and session.worktree is not None
        now = await self.snapshot(session)
        if now == session.review_tree:
            return []
        return await asyncio.to_thread(
            changed_between, Path(session.worktree), session.review_tree, now
        )

    def note_changes(self, live: LiveSession, changed: list[str]) -> None:
        """Record what differs from the verified tree; a difference from what
        was last recorded is stored and announced (`worktree_changed`)."""
        s = live.session
        changed = changed[:MAX_NAMED_PATHS]
        if changed == s.changed_since_verification:
            return
        s.changed_since_verification = changed
        self._registry.persist(live)
        self._registry.emit(live, WorktreeChangedData(phase="since_verification", files=changed))
        self._registry.notify(s.id)

    def watch(self, live: LiveSession) -> None:
        """While a diff waits for approval, compare the worktree with its
        verified tree every `verified_watch_secs`, so a later change shows as
        "changed since verification" before anyone approves."""
        sid = live.id
        if sid in self._watching:
            return
        task = self._registry.spawn(live, self._watch(live))
        self._watching[sid] = task
        task.add_done_callback(lambda _t: self._watching.pop(sid, None))

    async def _watch(self, live: LiveSession) -> None:
        s = live.session

        def waiting() -> bool:
            return (
                s.state is CoderState.NEEDS_APPROVAL
                and s.no_change_finding is None
                and s.review_tree is not None
            )

        while waiting():
            await asyncio.sleep(self._watch_secs)
            if not waiting() or s.id in self._verifying:
                continue
            tree = s.review_tree
            with contextlib.suppress(CorralError):  # a vanished worktree: nothing to compare
                changed = await self.changes_since_verification(s)
                if waiting() and s.review_tree == tree and s.id not in self._verifying:
                    self.note_changes(live, changed)

    async def _in_scratch(self, session: CoderSession, work: Callable[[Path], Awaitable[T]]) -> T:
        """Run `work` in a fresh checkout of the session's start commit."""
        assert session.start_commit is not None
        async with self._trees.checkout(
            Path(session.repo), session.start_commit, session.id
        ) as path:
            return await work(path)

    def close(self) -> None:
        """Remove the checkouts kept ready for the next checks (blocking)."""
        self._trees.close()
