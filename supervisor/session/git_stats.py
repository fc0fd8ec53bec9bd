"""Git stats on the board: files and lines a live session changed since its
start, and commits its base gained since, refreshed every few seconds off the
event loop and pushed to the board only when they changed.

The worktree is read as a tree (the verifier's own snapshot, which keeps a
stat cache, so an unchanged worktree costs a few `stat` calls); the diff is
computed once per tree. Sessions on other hosts and finished ones are left
out: a finished row shows its verified diff's numbers (`summaries`).

Reading a session costs git processes (listing the worktree), so a sweep
reads only the sessions that may have changed: those with activity since
their last read (an event, or their agent's screen changed), whose base
moved, or that were not read for QUIET_REREAD_SWEEPS sweeps (an agent can
write without a word). A session whose activity was seen is read once more
after it falls quiet: a write can land just after the read its event
caused. Of those due, at most READS_PER_SWEEP are read, those read longest
ago first: 100 live sessions read every few seconds kept the owner's (and
the console's) process busy enough to delay a keystroke's repaint under
load, and 50 quiet ones cost the console a few per cent of a core for
nothing."""

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
READS_PER_SWEEP = 20  # sessions read in one sweep, those read longest ago first
QUIET_REREAD_SWEEPS = 12  # a session without activity is read again after this many sweeps

# What a read is keyed on: (events so far, agent screen version), base commit.
Mark = tuple[tuple[int, int], str | None]


class GitStatsWatch:
    def __init__(self, registry: SessionRegistry, interval: float) -> None:
        self._registry = registry
        self.interval = interval
        self._by_tree: dict[str, tuple[str, ChangeStats]] = {}  # session -> (tree, stats)
        # (repo, start commit, base commit) -> commits the base gained: a base
        # that did not move costs one `rev-parse` a sweep, not a count a session
        self._behind: dict[tuple[str, str, str], int | None] = {}
        self._task: asyncio.Task[None] | None = None
        self._sweeps = 0
        self._read_at: dict[str, int] = {}  # session -> the sweep that last read it
        # session -> (its mark when last read: activity and base commit,
        # whether the read before found the same mark: it has settled)
        self._seen: dict[str, tuple[Mark, bool]] = {}

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
        """Read the live sessions that may have changed, those read longest
        ago first (READS_PER_SWEEP of them); the board hears of changes."""
        wanted = []
        for sid in self._registry.live_ids():
            live = self._registry.get_live(sid)
            if live is None:
                continue
            s = live.session
            if s.state.is_terminal or s.host or not (s.worktree and s.start_commit):
                continue
            wanted.append((sid, Path(s.worktree), s.start_commit, s.repo, s.base or "HEAD"))
        live_now = {w[0] for w in wanted}
        self._by_tree = {k: v for k, v in self._by_tree.items() if k in live_now}
        self._read_at = {k: v for k, v in self._read_at.items() if k in live_now}
        self._seen = {k: v for k, v in self._seen.items() if k in live_now}
        self._sweeps += 1
        bases: dict[tuple[str, str], str | None] = {}  # (repo, base) -> its commit, this sweep
        due = []
        for sid, worktree, start, repo, base in wanted:
            if (repo, base) not in bases:
                try:
                    bases[repo, base] = await asyncio.to_thread(base_commit, repo, base)
                except (GitError, OSError) as exc:  # a repository going away under us
                    log.debug("git stats: the base of %s: %s", sid, exc)
                    bases[repo, base] = None
            mark = (self._activity(sid), bases[repo, base])
            if self._is_due(sid, mark):
                due.append((sid, worktree, start, repo, mark))
        due.sort(key=lambda w: self._read_at.get(w[0], 0))  # never read, or longest ago
        for sid, worktree, start, repo, mark in due[:READS_PER_SWEEP]:
            self._read_at[sid] = self._sweeps
            try:
                stats = await asyncio.to_thread(self._read, sid, worktree, start, repo, mark[1])
            except (GitError, OSError) as exc:  # a worktree going away under us
                log.debug("git stats of %s: %s", sid, exc)
                self._seen.pop(sid, None)  # not read: due again next sweep
                continue
            before = self._seen.get(sid)
            self._seen[sid] = (mark, before is not None and before[0] == mark)
            live = self._registry.get_live(sid)
            if live is not None and live.git_stats != stats:
                live.git_stats = stats
                self._registry.notify(sid)

    def _activity(self, sid: str) -> tuple[int, int]:
        """What moves when a session does something: its events, its agent's screen."""
        live = self._registry.get_live(sid)
        events = live.log.next_seq if live is not None else 0
        panes = self._registry.panes
        record = panes.record(sid) if panes is not None else None
        return events, record.version if record is not None else -1

    def _is_due(self, sid: str, mark: Mark) -> bool:
        seen = self._seen.get(sid)
        if seen is None or self._sweeps - self._read_at.get(sid, 0) >= QUIET_REREAD_SWEEPS:
            return True
        last, settled = seen
        return last != mark or not settled  # active since its last read, or just before it

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
