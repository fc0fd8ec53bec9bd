"""Git stats on the board: files and lines a live session changed since its
start, and commits its base gained since, refreshed every few seconds off the
event loop and pushed to the board only when they changed.

The worktree is read as a tree (the verifier's own snapshot, which keeps a
stat cache, so an unchanged worktree costs a few `stat` calls); the diff is
computed once per tree. Sessions on other hosts and finished ones are left
out: a finished row shows its verified diff's numbers (`summaries`)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from ..cancelling import cancel_and_wait
from ..git.errors import GitError
from ..git.stats import ChangeStats, GitStats, base_commit, change_stats, commits_behind
from ..git.trees import snapshot_tree
from .registry import SessionRegistry

log = logging.getLogger(__name__)

BEHIND_KEPT = 4096  # (start, base) counts remembered; past it they are counted afresh


class GitStatsWatch:
    def __init__(self, registry: SessionRegistry, interval: float) -> None:
        self._registry = registry
        self.interval = interval
        self._by_tree: dict[str, tuple[str, ChangeStats]] = {}  # session -> (tree, stats)
        # (repo, start commit, base commit) -> commits the base gained: a base
        # that did not move costs one `rev-parse` a sweep, not a count a session
        self._behind: dict[tuple[str, str, str], int | None] = {}
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait([self._task], what="the git stats watch")
            self._task = None

    async def _loop(self) -> None:
        while True:
            await self.refresh()
            await asyncio.sleep(self.interval)

    async def refresh(self) -> None:
        """Read every live session's stats once; the board hears of changes."""
        wanted = []
        for sid in self._registry.live_ids():
            live = self._registry.get_live(sid)
            if live is None:
                continue
            s = live.session
            if s.state.is_terminal or s.host or not (s.worktree and s.start_commit):
                continue
            wanted.append((sid, Path(s.worktree), s.start_commit, s.repo, s.base or "HEAD"))
        self._by_tree = {k: v for k, v in self._by_tree.items() if k in {w[0] for w in wanted}}
        bases: dict[tuple[str, str], str | None] = {}  # (repo, base) -> its commit, this sweep
        for sid, worktree, start, repo, base in wanted:
            try:
                if (repo, base) not in bases:
                    bases[repo, base] = await asyncio.to_thread(base_commit, repo, base)
                tip = bases[repo, base]
                stats = await asyncio.to_thread(self._read, sid, worktree, start, repo, tip)
            except (GitError, OSError) as exc:  # a worktree going away under us
                log.debug("git stats of %s: %s", sid, exc)
                continue
            live = self._registry.get_live(sid)
            if live is not None and live.git_stats != stats:
                live.git_stats = stats
                self._registry.notify(sid)

    def _read(self, sid: str, worktree: Path, start: str, repo: str, tip: str | None) -> GitStats:
        if not worktree.is_dir():
            raise OSError(f"{worktree} is gone")
        tree = snapshot_tree(worktree)
        kept = self._by_tree.get(sid)
        if kept is not None and kept[0] == tree:
            changes = kept[1]
        else:
            changes = change_stats(worktree, start, tree)
            self._by_tree[sid] = (tree, changes)
        behind = None  # the base does not resolve (a branch that was removed)
        if tip is not None:
            key = (repo, start, tip)
            if key not in self._behind:
                if len(self._behind) > BEHIND_KEPT:
                    self._behind.clear()
                self._behind[key] = commits_behind(repo, start, tip)
            behind = self._behind[key]
        return GitStats(changes.files, changes.added, changes.removed, behind)
