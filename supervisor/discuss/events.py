"""A discussion's event stream: monotonic seqs, a bounded replay buffer, subscribers."""

from __future__ import annotations

import contextlib
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..session.events import Subscription, SubscriptionDropped
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


# One reader's bounded mailbox is the same mechanism as a session's event
# subscription: no gap, no duplicate, dropped (and told so) when it falls behind.
DiscussSubscription = Subscription[DiscussEvent]
DiscussSubscriptionDropped = SubscriptionDropped


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
            if not sub.offer(event):
                self.unsubscribe(sub)
        return event

    def subscribe(self, from_seq: int = 0) -> DiscussSubscription:
        """Replay buffered events with `seq >= from_seq` (inclusive), then
        everything new, exactly once and in order."""
        sub = DiscussSubscription(self, DISCUSS_SUBSCRIBER_QUEUE)
        for event in self.buffer:
            if event.seq >= from_seq:
                sub.offer(event)
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
