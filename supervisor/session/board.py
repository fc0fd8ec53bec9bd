"""The board feed: `watch` registrations and coalesced summary pushes.

Only attention-changing events mark a session dirty. One drain per event-loop
pass builds each dirty session's summary once and hands it to every watcher.
A watcher's mailbox holds at most one summary per session (the newest), so a
slow board costs memory bounded by the number of sessions; a board that has not
read anything for `shed_secs` while updates wait is dropped and told to
resync, so one stalled board never holds the others back.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable

from ..models import SessionSummary


class WatchDropped(Exception):
    """This board was shed for not reading; call `watch()` again to resync."""


class Watcher:
    _ids = itertools.count(1)

    def __init__(self, feed: BoardFeed, clock: Callable[[], float] = time.monotonic) -> None:
        self.id = next(self._ids)
        self._feed = feed
        self._clock = clock
        self._pending: dict[str, SessionSummary] = {}
        self._waiter: asyncio.Future[None] | None = None
        self.dropped = False
        self.drop_reason = "board fell behind and was dropped; call watch() to resync"
        self.closed = False
        self.last_read = clock()

    def _offer(self, summary: SessionSummary) -> None:
        self._pending.pop(summary.session_id, None)
        self._pending[summary.session_id] = summary
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def get_nowait(self) -> list[SessionSummary]:
        items = list(self._pending.values())
        self._pending.clear()
        self.last_read = self._clock()
        return items

    async def get(self) -> list[SessionSummary]:
        """Wait for at least one changed summary; returns all queued ones."""
        while not self._pending:
            if self.dropped:
                raise WatchDropped(self.drop_reason)
            if self.closed:
                raise WatchDropped("watch closed")
            self.last_read = self._clock()
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        return self.get_nowait()

    def close(self) -> None:
        self._feed.unregister(self)


class BoardFeed:
    def __init__(
        self,
        build_summary: Callable[[str], SessionSummary | None],
        *,
        shed_secs: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`clock`: how long a board has not read is measured on it (a test
        drives it instead of waiting)."""
        self._build = build_summary
        self._clock = clock
        self._watchers: dict[int, Watcher] = {}
        self._dirty: dict[str, None] = {}
        self._scheduled = False
        self.shed_secs = shed_secs

    def register(self) -> Watcher:
        watcher = Watcher(self, self._clock)
        self._watchers[watcher.id] = watcher
        return watcher

    def unregister(self, watcher: Watcher) -> bool:
        watcher.closed = True
        watcher._wake()
        return self._watchers.pop(watcher.id, None) is not None

    def is_registered(self, watcher: Watcher) -> bool:
        return watcher.id in self._watchers

    @property
    def watcher_count(self) -> int:
        return len(self._watchers)

    def resync(self) -> None:
        """A row left the board for good (a deleted session): no summary can
        say so, so every watcher is told to `watch()` again, from a snapshot."""
        for watcher in list(self._watchers.values()):
            watcher.dropped = True
            watcher.drop_reason = "a session left the board for good; call watch() to resync"
            watcher._pending.clear()  # the snapshot it will take supersedes them
            self._watchers.pop(watcher.id, None)
            watcher._wake()

    def notify(self, session_id: str) -> None:
        self._dirty[session_id] = None
        if self._scheduled:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.drain()
            return
        self._scheduled = True
        loop.call_soon(self.drain)

    def drain(self) -> None:
        self._scheduled = False
        if not self._dirty:
            return
        ids = list(self._dirty)
        self._dirty.clear()
        if not self._watchers:
            return
        summaries = [s for s in (self._build(i) for i in ids) if s is not None]
        now = self._clock()
        for watcher in list(self._watchers.values()):
            if watcher._pending and now - watcher.last_read > self.shed_secs:
                watcher.dropped = True
                self._watchers.pop(watcher.id, None)
                watcher._wake()
                continue
            for summary in summaries:
                watcher._offer(summary)
