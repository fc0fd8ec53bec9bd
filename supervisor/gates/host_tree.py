"""The verifier's view of a session's worktree on another host: snapshots,
the checks and the comparison of two snapshots all run there (one round
trip each, over the host's connection), and a verified tree comes home as a
commit fetched into the local repository, which the home copy of the
worktree then shows. Tree ids are content addresses, so a tree verified on
the host is the very tree reviewed and delivered here."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import TYPE_CHECKING

from ..contracts.checks import run_contract
from ..errors import CorralError
from ..git.run import git
from ..hosts.connection import HostUnreachable
from ..models import CheckResult, CoderSession, OutcomeContract

if TYPE_CHECKING:
    from ..hosts.place import HostPlace, Hosts

SETUP_ON_HOST = (
    "this contract has setup commands, which corral does not run on host {host} yet: "
    "remove the setup (or put it in a check), or run the session on this machine"
)


def _reachable(exc: HostUnreachable) -> CorralError:
    return CorralError(f"verification on host {exc.host} stopped: {exc}")


class HostTree:
    """One session's worktree on its host, for the verifier."""

    def __init__(self, place: HostPlace, session: CoderSession) -> None:
        assert session.remote_worktree is not None and session.start_commit is not None
        self.place = place
        self.session = session
        self.path = Path(session.remote_worktree)
        self._commits: dict[str, str] = {}  # tree -> a commit of it on the host

    @classmethod
    def of(cls, hosts: Hosts | None, session: CoderSession) -> HostTree | None:
        """The session's worktree on its host; None for a session run here."""
        if not session.host or hosts is None or not session.remote_worktree:
            return None
        return cls(hosts.get(session.host), session)

    @property
    def on(self) -> str:
        sandbox = "in bubblewrap" if self.place.facts().bwrap else "unconfined: no bubblewrap there"
        return f"on host {self.place.name} in {self.path} ({sandbox})"

    def refuse_setup(self, contract: OutcomeContract) -> None:
        if contract.setup:
            raise CorralError(SETUP_ON_HOST.format(host=self.place.name))

    async def runner(
        self, command: str, timeout: float, network: bool
    ) -> tuple[int | None, str, bool]:
        try:
            return await asyncio.to_thread(
                self.place.run_check, command, str(self.path), timeout, network=network
            )
        except HostUnreachable as exc:
            raise _reachable(exc) from exc

    async def snapshot(self) -> str:
        s = self.session
        assert s.start_commit is not None
        try:
            tree, commit = await asyncio.to_thread(
                self.place.snapshot, str(self.path), s.start_commit, s.id
            )
        except HostUnreachable as exc:
            raise _reachable(exc) from exc
        self._commits[tree] = commit
        return tree

    async def changed(self, a: str, b: str) -> list[str]:
        try:
            return await asyncio.to_thread(self.place.changed, str(self.path), a, b)
        except HostUnreachable as exc:
            raise _reachable(exc) from exc

    async def bring_home(self, tree: str, home: Path) -> None:
        """Fetch the commit of `tree` into the local repository, and make the
        home copy of the worktree show exactly that tree."""
        s = self.session
        mirror = self.place.mirror_path(Path(s.repo))
        try:
            await asyncio.to_thread(
                self.place.bring_home, mirror, self._commits[tree], Path(s.repo)
            )
        except HostUnreachable as exc:
            raise _reachable(exc) from exc
        await asyncio.to_thread(git, home, "read-tree", "-u", "--reset", tree)

    def brought_home(self, tree: str) -> str:
        commit = self._commits[tree]
        return (
            f"The verified result ({commit[:12]}) was fetched from host {self.place.name} into "
            f"{self.session.repo}; review and delivery read it here."
        )


async def host_baseline(
    place: HostPlace, session: CoderSession, contract: OutcomeContract, ceiling: float | None
) -> list[CheckResult]:
    """Every check once on the untouched tree, in a disposable worktree on the host."""
    assert session.start_commit is not None
    if contract.setup:
        raise CorralError(SETUP_ON_HOST.format(host=place.name))
    try:
        mirror, path = await asyncio.to_thread(
            place.scratch, Path(session.repo), session.start_commit, session.id
        )
    except HostUnreachable as exc:
        raise _reachable(exc) from exc

    async def run(command: str, timeout: float, network: bool) -> tuple[int | None, str, bool]:
        try:
            return await asyncio.to_thread(place.run_check, command, path, timeout, network=network)
        except HostUnreachable as exc:
            raise _reachable(exc) from exc

    try:
        return await run_contract(contract, Path(path), timeout_ceiling=ceiling, runner=run)
    finally:
        with contextlib.suppress(CorralError, HostUnreachable):
            await asyncio.shield(asyncio.to_thread(place.remove, mirror, path))
