"""A discussion's event stream: monotonic seqs, a bounded replay buffer, subscribers."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import CorralError
from .common import (
    DISCUSS_EVENT_BUFFER_MAX,
    DISCUSS_SUBSCRIBER_QUEUE,
)

# --- events -------------------------------------------------------------------


@dataclass(frozen=True)
class DiscussEvent:
    discussion_id: str
    seq: int
    ts: float
    type: str
    data: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        """The flattened wire shape: `type`, `seq`, `discussion_id` and the
        fields at the top level."""
        return {
            **self.data,
            "type": self.type,
            "seq": self.seq,
            "ts": self.ts,
            "discussion_id": self.discussion_id,
        }


class DiscussSubscriptionDropped(CorralError):
    """The reader fell behind; resubscribe from its cursor."""


class DiscussSubscription:
    """A bounded mailbox for one reader; iterate it with `async for`."""

    def __init__(self, stream: EventStream, limit: int) -> None:
        self._stream = stream
        self._items: deque[DiscussEvent] = deque()
        self._limit = limit
        self._waiter: asyncio.Future[None] | None = None
        self.dropped = False
        self.closed = False
        self.last_seq = -1

    def _offer(self, event: DiscussEvent) -> bool:
        if len(self._items) >= self._limit:
            self.dropped = True
            self._wake()
            return False
        self._items.append(event)
        self._wake()
        return True

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def get_nowait(self) -> list[DiscussEvent]:
        items = list(self._items)
        self._items.clear()
        if items:
            self.last_seq = items[-1].seq
        return items

    async def get(self) -> DiscussEvent:
        while not self._items:
            if self.dropped:
                raise DiscussSubscriptionDropped(
                    f"subscriber fell behind after seq {self.last_seq}; resubscribe from "
                    f"{self.last_seq + 1}"
                )
            if self.closed:
                raise StopAsyncIteration
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        event = self._items.popleft()
        self.last_seq = event.seq
        return event

    def __aiter__(self) -> DiscussSubscription:
        return self

    async def __anext__(self) -> DiscussEvent:
        return await self.get()

    def close(self) -> None:
        self._stream.unsubscribe(self)
        self.closed = True
        self._wake()


class EventStream:
    """Monotonic seqs from 0, a bounded replay buffer, and subscribers fed
    synchronously (no await between replay and registration)."""

    def __init__(
        self, discussion_id: str, *, clock: Callable[[], float] = time.time, limit: int = 0
    ) -> None:
        self.discussion_id = discussion_id
        self.buffer: deque[DiscussEvent] = deque(maxlen=limit or DISCUSS_EVENT_BUFFER_MAX)
        self.next_seq = 0
        self._clock = clock
        self._subs: list[DiscussSubscription] = []

    def emit(self, event_type: str, /, **data: Any) -> DiscussEvent:
        event = DiscussEvent(self.discussion_id, self.next_seq, self._clock(), event_type, data)
        self.next_seq += 1
        self.buffer.append(event)
        for sub in list(self._subs):
            if not sub._offer(event):
                self.unsubscribe(sub)
        return event

    def subscribe(self, from_seq: int = 0) -> DiscussSubscription:
        """Replay buffered events with `seq >= from_seq` (inclusive), then
        everything new, exactly once and in order."""
        sub = DiscussSubscription(self, DISCUSS_SUBSCRIBER_QUEUE)
        for event in self.buffer:
            if event.seq >= from_seq:
                sub._offer(event)
        self._subs.append(sub)
        return sub

    def unsubscribe(self, sub: DiscussSubscription) -> None:
        with contextlib.suppress(ValueError):
            self._subs.remove(sub)

    def close_all(self) -> None:
        for sub in list(self._subs):
            sub.close()

    def events(self, kind: str | None = None) -> list[DiscussEvent]:
        return [e for e in self.buffer if kind is None or e.type == kind]
