"""The one verifier: the runtime runs the contract's checks itself (a model's
claim of success never counts), and nothing else in corral decides what was
verified.

It runs the checks on the untouched start commit (the baseline, in a
disposable worktree), on the session's worktree once the engine stops, and on
the start commit plus only the approved part of a change (partial approval).
It snapshots the worktree into a git tree, the review identity, so delivery
can compare the tree it is about to deliver with the one that was verified.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from ..config import SupervisorConfig
from ..contracts.checks import captures_from, run_contract
from ..events import CheckCompletedData, ContractEvaluatedData, PlanTextData
from ..git.delivery import review_identity
from ..git.run import git
from ..models import CheckResult, CoderSession, OutcomeContract
from ..session.live import LiveSession
from ..session.registry import SessionRegistry
from ..workspaces import Workspaces

T = TypeVar("T")


class Verifier:
    def __init__(
        self, registry: SessionRegistry, workspaces: Workspaces, config: SupervisorConfig
    ) -> None:
        self._registry = registry
        self._workspaces = workspaces
        self._timeout_ceiling = config.max_check_timeout_secs

    async def baseline(self, session: CoderSession, contract: OutcomeContract) -> list[CheckResult]:
        """Every check once on the untouched tree, in a disposable worktree so
        the task's own worktree is never changed by a check."""
        assert session.start_commit is not None
        return await self._in_scratch(
            session,
            lambda path: run_contract(contract, path, timeout_ceiling=self._timeout_ceiling),
        )

    async def verify(self, live: LiveSession) -> list[CheckResult]:
        """Every check on the worktree as it is now; the results are recorded
        on the session and announced as the runtime's evaluation."""
        registry = self._registry
        s = live.session
        assert s.contract is not None and s.worktree is not None
        registry.emit(
            live,
            PlanTextData(text="Runtime verification: re-running every contract check."),
        )
        results = await run_contract(
            s.contract,
            Path(s.worktree),
            captures=captures_from(s.contract, s.baseline),
            timeout_ceiling=self._timeout_ceiling,
            on_result=lambda r: registry.emit(live, CheckCompletedData(result=r)),
        )
        s.last_check_results = results
        registry.emit(
            live,
            ContractEvaluatedData(
                by="runtime", passed=all(r.passed for r in results), results=list(results)
            ),
        )
        registry.persist(live)
        return results

    async def snapshot(self, session: CoderSession) -> str:
        """The worktree's full content as a git tree id (ignored files excluded)."""
        assert session.worktree is not None
        return await asyncio.to_thread(review_identity, Path(session.worktree))

    async def verify_selection(self, live: LiveSession, patch: str) -> list[CheckResult]:
        """Every check on the start commit plus only the approved part (`patch`)."""
        registry = self._registry
        s = live.session
        assert s.contract is not None and s.start_commit is not None
        registry.emit(
            live,
            PlanTextData(text="Re-running the contract on the approved part only."),
        )
        contract, captures = s.contract, captures_from(s.contract, s.baseline)

        def apply_selection(path: Path) -> None:
            git(path, "apply", "--binary", "--whitespace=nowarn", "-", input_text=patch)

        results = await self._in_scratch(
            s,
            lambda path: run_contract(
                contract, path, captures=captures, timeout_ceiling=self._timeout_ceiling
            ),
            prepare=apply_selection,
        )
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

    async def unchanged(self, session: CoderSession) -> bool:
        """Whether the worktree is still exactly the tree that was verified."""
        return await self.snapshot(session) == session.review_tree

    async def _in_scratch(
        self,
        session: CoderSession,
        work: Callable[[Path], Awaitable[T]],
        prepare: Callable[[Path], None] | None = None,
    ) -> T:
        """Run `work` in a disposable worktree at the session's start commit
        (after the blocking `prepare`); the copy is always removed."""
        assert session.start_commit is not None
        cm = self._workspaces.scratch(Path(session.repo), session.start_commit, session.id)
        path = await asyncio.to_thread(cm.__enter__)
        try:
            if prepare is not None:
                await asyncio.to_thread(prepare, path)
            return await work(path)
        finally:
            await asyncio.shield(asyncio.to_thread(cm.__exit__, None, None, None))
