"""The verifier's view of a session's worktree on another host: snapshots,
the checks and the comparison of two snapshots all run there (one round
trip each, over the host's connection), and a verified tree comes home as a
commit fetched into the local repository, which the home copy of the
worktree then shows. Tree ids are content addresses, so a tree verified on
the host is the very tree reviewed and delivered here. A tree made here (the
operator's exam of a snapshot, an approved part) is sent to the host's mirror
first (`send`). Hidden checks run in a checkout of their own there, their
files written in from the state dir here only for as long as they run."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypeVar

from ..contracts.checks import CommandRunner, run_contract
from ..contracts.environment import OUTPUT_TAIL_CHARS, setup_reason
from ..contracts.hidden import HiddenStore, as_hidden, hidden_contract, not_placed
from ..contracts.verdicts import setup_failed
from ..errors import CorralError
from ..git.run import git
from ..git.trees import commit_tree
from ..hosts.unreachable import HostUnreachable
from ..models import CheckResult, CoderSession, OutcomeContract, SetupOutcome

if TYPE_CHECKING:
    from ..hosts.configured import Hosts
    from ..hosts.place import HostPlace


EXAM_MESSAGE = "corral: the operator's exam of a snapshot verified on a host"
HOST_WAIT = 300.0  # seconds a step waits for its host to answer again before it fails
T = TypeVar("T")


async def on_host(host: str, work: Callable[[], T], *, wait: float = HOST_WAIT) -> T:
    """Run blocking `work` against a host off the loop. A host that does not
    answer is waited for (its connection reconnects with backoff) and the
    step is run again, up to `wait` seconds; then it fails with a sentence.
    Every step here may run twice: checks, snapshots, fetches."""
    deadline = time.monotonic() + wait
    while True:
        try:
            return await asyncio.to_thread(work)
        except HostUnreachable as exc:
            if time.monotonic() >= deadline:
                raise CorralError(
                    f"host {host} did not answer for {wait:.0f} s, so this step stopped: {exc}"
                ) from exc
            await asyncio.sleep(1.0)


class HostTree:
    """One session's worktree on its host, for the verifier."""

    def __init__(self, place: HostPlace, session: CoderSession, *, wait: float = HOST_WAIT) -> None:
        assert session.remote_worktree is not None and session.start_commit is not None
        self.place = place
        self.session = session
        self.wait = wait  # how long a step waits for the host to answer again
        self.path = Path(session.remote_worktree)
        self._commits: dict[str, str] = {}  # tree -> a commit of it on the host
        self._sent: set[str] = set()  # trees made here and pushed there (`send`)

    @classmethod
    def of(cls, hosts: Hosts | None, session: CoderSession) -> HostTree | None:
        """The session's worktree on its host; None for a session run here."""
        if not session.host or hosts is None or not session.remote_worktree:
            return None
        return cls(hosts.get(session.host), session)

    async def on(self) -> str:
        """Where the checks run, and whether they are confined there."""
        facts = await on_host(self.place.name, self.place.facts)
        sandbox = "in bubblewrap" if facts.bwrap else "unconfined: no bubblewrap there"
        return f"on host {self.place.name} in {self.path} ({sandbox})"

    async def checks_on_tree(
        self,
        contract: OutcomeContract,
        ceiling: float | None,
        tree: str,
        *,
        captures: dict[str, str] | None = None,
        on_setup: Callable[[SetupOutcome], None] | None = None,
        on_result: Callable[[CheckResult], None] | None = None,
        baseline: list[CheckResult] | None = None,
        hidden: HiddenStore | None = None,
    ) -> list[CheckResult]:
        """The setup, then every check, in a fresh checkout of `tree` (a
        snapshot of this worktree, or an exam `send` put there) on the host,
        removed afterwards; judged test by test against `baseline` where the
        runner reports tests. With `hidden` (where their files are kept), the
        hidden checks then run in a checkout of their own."""
        visible = await in_host_scratch(
            self.place,
            self.session,
            contract,
            ceiling,
            snapshot=self._commits[tree],
            captures=captures,
            on_setup=on_setup,
            on_result=on_result,
            wait=self.wait,
            baseline=baseline,
        )
        if hidden is None:
            return visible
        return visible + await hidden_in_host_scratch(
            self.place,
            self.session,
            contract,
            ceiling,
            hidden,
            snapshot=self._commits[tree],
            on_result=on_result,
            wait=self.wait,
        )

    async def send(self, tree: str) -> None:
        """Put `tree`, made here (the operator's exam of a snapshot), in the
        host's mirror as a commit on the start commit, so checks can run on it there."""
        if tree in self._commits:
            return
        s, repo = self.session, Path(self.session.repo)
        assert s.start_commit is not None
        commit = await asyncio.to_thread(commit_tree, repo, tree, s.start_commit, EXAM_MESSAGE)
        ref = f"refs/corral/exam/{s.id}/{tree}"  # every tree sent keeps its commit there
        await on_host(self.place.name, lambda: self.place.push(repo, {commit: ref}), wait=self.wait)
        self._commits[tree] = commit
        self._sent.add(tree)

    async def snapshot(self) -> str:
        s = self.session
        start, path = s.start_commit, str(self.path)
        assert start is not None
        tree, commit = await on_host(
            self.place.name, lambda: self.place.snapshot(path, start, s.id), wait=self.wait
        )
        self._commits[tree] = commit
        return tree

    async def changed(self, a: str, b: str) -> list[str]:
        path = str(self.path)
        return await on_host(
            self.place.name, lambda: self.place.changed(path, a, b), wait=self.wait
        )

    async def fetch(self, tree: str) -> str:
        """Fetch the commit of `tree` into the local repository (a tree made
        here is here already); returns it."""
        repo = Path(self.session.repo)
        mirror, commit = self.place.mirror_path(repo), self._commits[tree]
        if tree in self._sent:
            return commit
        await on_host(
            self.place.name, lambda: self.place.bring_home(mirror, commit, repo), wait=self.wait
        )
        return commit

    async def bring_home(self, tree: str, home: Path) -> None:
        """Fetch the commit of `tree` into the local repository, and make the
        home copy of the worktree show exactly that tree."""
        await self.fetch(tree)
        await asyncio.to_thread(git, home, "read-tree", "-u", "--reset", tree)

    def brought_home(self, tree: str) -> str:
        commit = self._commits[tree]
        return (
            f"The verified result ({commit[:12]}) was fetched from host {self.place.name} into "
            f"{self.session.repo}; review and delivery read it here."
        )


async def host_setup(
    place: HostPlace,
    contract: OutcomeContract,
    worktree: str,
    ceiling: float | None,
    phase: Literal["baseline", "verification"],
) -> SetupOutcome | None:
    """Run the contract's setup in `worktree` on the host (as a local setup
    runs: with the network, `$CORRAL_ENV` writable, in bubblewrap there when
    it has it); None when the contract has no setup."""
    if not contract.setup:
        return None
    budget = float(contract.setup_timeout_secs)
    if ceiling is not None:
        budget = min(budget, ceiling)
    started = time.monotonic()
    commands = list(contract.setup)
    env, output, cached, code, failed, timed_out = await on_host(
        place.name, lambda: place.run_setup(commands, worktree, budget)
    )
    tail = output[-OUTPUT_TAIL_CHARS:]
    if timed_out:
        tail += f"\n[corral] setup timed out after {budget:.0f}s"
    return SetupOutcome(
        ok=code == 0,
        env_dir=env,
        cached=cached,
        shared=False,
        exit_code=code,
        timed_out=timed_out,
        duration_ms=int((time.monotonic() - started) * 1000),
        output_tail=tail,
        failed_command=failed,
        phase=phase,
    )


async def host_baseline(
    place: HostPlace,
    session: CoderSession,
    contract: OutcomeContract,
    ceiling: float | None,
    on_setup: Callable[[SetupOutcome], None] | None = None,
    hidden: HiddenStore | None = None,
) -> list[CheckResult]:
    """Every check once on the untouched tree, in a disposable worktree on
    the host; with `hidden`, the hidden checks in one of their own (gate 1
    shows their verdict on the untouched tree, as it does here)."""
    visible = await in_host_scratch(place, session, contract, ceiling, on_setup=on_setup)
    if hidden is None:
        return visible
    return visible + await hidden_in_host_scratch(place, session, contract, ceiling, hidden)


@dataclass(frozen=True)
class HostCheckout:
    """A disposable worktree on the host, its setup done: where the checks run."""

    path: str
    setup: SetupOutcome | None
    run: CommandRunner  # a command in it, inside the setup's environment when ready


@contextlib.asynccontextmanager
async def host_checkout(
    place: HostPlace,
    session: CoderSession,
    contract: OutcomeContract,
    ceiling: float | None,
    *,
    snapshot: str | None = None,
    on_setup: Callable[[SetupOutcome], None] | None = None,
    wait: float = HOST_WAIT,
) -> AsyncIterator[HostCheckout]:
    """A disposable worktree on the host, after the contract's setup there:
    at the start commit, or at `snapshot`, a commit the host's mirror already
    holds: a snapshot of the session's worktree there, or an exam or approved
    part `HostTree.send` put there (so the checks see exactly that tree: no
    ignored file or leftover of the agent's). Removed with its environment
    when the block ends."""
    start = session.start_commit
    assert start is not None
    repo = Path(session.repo)
    if snapshot is not None:
        at = snapshot
        mirror, path = await on_host(
            place.name, lambda: place.scratch_at(repo, at, session.id), wait=wait
        )
    else:
        mirror, path = await on_host(
            place.name, lambda: place.scratch(repo, start, session.id), wait=wait
        )
    env = ""

    async def run(command: str, timeout: float, network: bool) -> tuple[int | None, str, bool]:
        return await on_host(
            place.name,
            lambda: place.run_check(command, path, timeout, network=network, env_dir=env),
            wait=wait,
        )

    try:
        phase: Literal["baseline", "verification"] = (
            "baseline" if snapshot is None else "verification"
        )
        setup = await host_setup(place, contract, path, ceiling, phase)
        if setup is not None:
            env = setup.env_dir
            if on_setup is not None:
                on_setup(setup)
        yield HostCheckout(path, setup, run)
    finally:
        with contextlib.suppress(CorralError, HostUnreachable):
            await asyncio.shield(asyncio.to_thread(place.remove, mirror, path))
        if contract.setup:  # a disposable worktree's environment goes with it
            gone, _key = place.env_dir(path, list(contract.setup))
            with contextlib.suppress(CorralError, HostUnreachable):
                await asyncio.shield(asyncio.to_thread(place.remove_env, gone))


async def in_host_scratch(
    place: HostPlace,
    session: CoderSession,
    contract: OutcomeContract,
    ceiling: float | None,
    *,
    snapshot: str | None = None,
    captures: dict[str, str] | None = None,
    on_setup: Callable[[SetupOutcome], None] | None = None,
    on_result: Callable[[CheckResult], None] | None = None,
    wait: float = HOST_WAIT,
    baseline: list[CheckResult] | None = None,
) -> list[CheckResult]:
    """Every (visible) check in a disposable worktree on the host (`host_checkout`)."""
    untouched = snapshot is None  # the start commit as it was
    async with host_checkout(
        place,
        session,
        contract,
        ceiling,
        snapshot=snapshot,
        on_setup=on_setup,
        wait=wait,
    ) as there:
        if there.setup is not None and not there.setup.ok:
            why = setup_reason(there.setup)
            return [setup_failed(c.name, why) for c in contract.checks]
        return await run_contract(
            contract,
            Path(there.path),
            timeout_ceiling=ceiling,
            captures=captures,
            runner=there.run,
            on_result=on_result,
            untouched=untouched,
            baseline=None if untouched else baseline,
        )


async def hidden_in_host_scratch(
    place: HostPlace,
    session: CoderSession,
    contract: OutcomeContract,
    ceiling: float | None,
    store: HiddenStore,
    *,
    snapshot: str | None = None,
    on_result: Callable[[CheckResult], None] | None = None,
    wait: float = HOST_WAIT,
) -> list[CheckResult]:
    """The contract's hidden checks on the host, as they run here: in a
    disposable worktree of their own (at the start commit, or at
    `snapshot`), the setup first, their files — read from the operator's
    state dir here — written in only after it and taken out after them,
    then the worktree removed. Never in the agent's worktree there."""
    if not contract.hidden_checks:
        return []
    async with host_checkout(
        place, session, contract, ceiling, snapshot=snapshot, wait=wait
    ) as there:
        if there.setup is not None and not there.setup.ok:
            why = setup_reason(there.setup)
            return [
                setup_failed(h.name, why).model_copy(update={"hidden": True})
                for h in contract.hidden_checks
            ]
        path = there.path
        try:
            files: list[tuple[str, bytes | None]] = [
                (f.path, store.get(f.sha256)) for h in contract.hidden_checks for f in h.files
            ]
            await on_host(place.name, lambda: place.hidden_files(path, files), wait=wait)
        except (CorralError, OSError) as exc:
            return not_placed(contract, exc)
        gone: list[tuple[str, bytes | None]] = [(rel, None) for rel, _data in files]
        try:
            results = await run_contract(
                hidden_contract(contract),
                Path(path),
                timeout_ceiling=ceiling,
                runner=there.run,
                on_result=None if on_result is None else lambda r: on_result(as_hidden(r)),
            )
        finally:
            with contextlib.suppress(CorralError, HostUnreachable):
                await asyncio.shield(asyncio.to_thread(place.hidden_files, path, gone))
        return [as_hidden(r) for r in results]
