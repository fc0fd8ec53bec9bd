"""Per-session sequenced event log: replay buffer, subscribers, JSONL journal.

Invariants:
- `seq` is monotonic per session; `next_seq` is set right after the push and
  never rewinds, even when the buffer drops its head.
- `subscribe(from_seq)` replays and registers with no await in between, so a
  subscriber sees every event exactly once, in order: no gap, no duplicate.
- The attention fold runs before fan-out, so a board reacting to event N
  already sees the post-N summary.
- A subscriber whose backlog overflows is dropped and told to resync; the
  producer never waits for anyone.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from pydantic_core import to_json

from ..events import EVENT_CLASSES, CoderEvent, EventBase, EventData, PlanTextData, parse_event

log = logging.getLogger("corral.supervisor")

_new = object.__new__
_setattr = object.__setattr__
_EVENT_FIELDS = ("session_id", "seq", "ts", "kind", "data")


def _construct_event(
    cls: type[EventBase], session_id: str, seq: int, ts: float, data: EventData
) -> CoderEvent:
    """`cls.model_construct` without its per-field alias and default lookups
    (every field is given; none has an alias): the append hot path. The payload
    is typed and the producer trusted, so nothing is validated here; parsing
    (`parse_event`) validates. `_fast_construct_ok` checks it against
    `model_construct` at import."""
    event = _new(cls)
    _setattr(
        event,
        "__dict__",
        {"session_id": session_id, "seq": seq, "ts": ts, "kind": data.KIND, "data": data},
    )
    _setattr(event, "__pydantic_fields_set__", set(_EVENT_FIELDS))
    _setattr(event, "__pydantic_extra__", None)
    _setattr(event, "__pydantic_private__", None)
    return event  # type: ignore[return-value]  # cls is one of CoderEvent's members


def _fast_construct_ok() -> bool:
    for cls in set(EVENT_CLASSES.values()):
        fields = cls.model_fields
        if cls.__pydantic_post_init__ or any(
            f.alias or f.validation_alias for f in fields.values()
        ):
            return False
        if tuple(fields) != _EVENT_FIELDS:
            return False
    data = PlanTextData(text="probe")
    cls = EVENT_CLASSES[PlanTextData]
    try:
        fast = _construct_event(cls, "s", 1, 2.0, data)
        slow = cls.model_construct(session_id="s", seq=1, ts=2.0, kind=data.KIND, data=data)
        return (
            fast == slow
            and fast.__pydantic_fields_set__ == slow.__pydantic_fields_set__
            and fast.model_dump_json() == slow.model_dump_json()
        )
    except Exception as exc:
        log.info("the fast event reader could not be checked, the slow one is used: %s", exc)
        return False


def _model_construct_event(
    cls: type[EventBase], session_id: str, seq: int, ts: float, data: EventData
) -> CoderEvent:
    event = cls.model_construct(session_id=session_id, seq=seq, ts=ts, kind=data.KIND, data=data)
    return event  # type: ignore[return-value]  # cls is one of CoderEvent's members


if not _fast_construct_ok():  # a pydantic whose internals differ: take the slow path
    _construct_event = _model_construct_event


class Sequenced(Protocol):
    """What a subscription hands out: anything with a `seq`."""

    @property
    def seq(self) -> int: ...


E = TypeVar("E", bound=Sequenced)


class _Source(Protocol):
    def unsubscribe(self, sub: Any) -> None: ...


class SubscriptionDropped(Exception):
    """The subscriber fell behind and was dropped: resubscribe from its cursor."""


class SubscriptionClosed(Exception):
    """The subscription was closed (unsubscribed, or the session left memory)."""


class Subscription(Generic[E]):
    """A bounded mailbox of events for one reader. Iterate it with `async for`.
    Session events and discussion events share it."""

    __slots__ = ("_items", "_limit", "_log", "_waiter", "closed", "dropped", "last_seq")

    def __init__(self, log: _Source | None, limit: int) -> None:
        self._items: deque[E] = deque()
        self._limit = limit
        self._log = log
        self._waiter: asyncio.Future[None] | None = None
        self.dropped = False
        self.closed = False
        self.last_seq = -1  # the last seq handed to the reader

    def offer(self, event: E) -> bool:
        """Queue one event; False (and the reader told to resync) when full."""
        if len(self._items) >= self._limit:
            self.dropped = True
            self._wake()
            return False
        self._items.append(event)
        self._wake()
        return True

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def pending(self) -> int:
        return len(self._items)

    def get_nowait(self) -> list[E]:
        """Everything queued now (possibly empty)."""
        items = list(self._items)
        self._items.clear()
        if items:
            self.last_seq = items[-1].seq
        return items

    async def get(self) -> E:
        while not self._items:
            if self.dropped:
                raise SubscriptionDropped(
                    f"subscriber fell behind after seq {self.last_seq}; resubscribe from "
                    f"{self.last_seq + 1}"
                )
            if self.closed:
                raise SubscriptionClosed("subscription closed")
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        event = self._items.popleft()
        self.last_seq = event.seq
        return event

    def __aiter__(self) -> Subscription[E]:
        return self

    async def __anext__(self) -> E:
        if self._items:  # fast path: no wait, no extra coroutine
            event = self._items.popleft()
            self.last_seq = event.seq
            return event
        try:
            return await self.get()
        except SubscriptionClosed:
            raise StopAsyncIteration from None

    def close(self) -> None:
        if self._log is not None:
            self._log.unsubscribe(self)
        self.closed = True
        self._wake()


class Journal:
    """Append-only JSONL file of a session's events. Opened lazily; each row is
    serialized when its event is appended, and the rows are written and flushed
    once per event-loop pass, so bursts stay cheap."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: Any = None
        self._pending: list[bytes] = []
        self._flush_scheduled = False

    def write(self, event: CoderEvent) -> None:
        # `_value_`, not `.value`: the enum property costs more than the row
        row = {"seq": event.seq, "ts": event.ts, "kind": event.kind._value_, "data": event.data}
        # Serialized now, in the shape journals always had (the payload model
        # writes the same keys the dict did); non-JSON values in a payload's
        # open part become str.
        self._pending.append(to_json(row, fallback=str))
        if not self._flush_scheduled:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                self.flush()
                return
            self._flush_scheduled = True
            loop.call_soon(self.flush)

    def flush(self) -> None:
        self._flush_scheduled = False
        if not self._pending:
            return
        rows, self._pending = self._pending, []
        with contextlib.suppress(OSError):
            if self._file is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._file = open(self.path, "ab")  # noqa: SIM115
                if not _ends_a_line(self.path):
                    # a row torn by a crash: end it, so it loses only itself
                    # and the first row written now stays a line of its own
                    self._file.write(b"\n")
            self._file.write(b"\n".join(rows) + b"\n")
            self._file.flush()

    def close(self) -> None:
        self.flush()
        if self._file is not None:
            self._file.close()
            self._file = None


def _ends_a_line(path: Path) -> bool:
    """Whether the file is empty or its last byte ends a line."""
    try:
        with open(path, "rb") as fh:
            if fh.seek(0, 2) == 0:
                return True
            fh.seek(-1, 2)
            return fh.read(1) == b"\n"
    except OSError:
        return True


def read_journal(
    path: Path, kind: str | None = None, *, session_id: str | None = None
) -> list[CoderEvent]:
    """The events of a journal (optionally of one kind), typed and validated.

    A journal row has no `session_id`; it is `session_id`, or else the file's
    name (`<session>.events.jsonl`). A line that is not JSON or not a valid
    event (a torn last write, a kind or shape this version does not know) is
    skipped with a warning naming the file and line; the lines after it still
    load, and the file is never rewritten."""
    events: list[CoderEvent] = []
    if not path.exists():
        return events
    sid = session_id if session_id is not None else path.name.removesuffix(".events.jsonl")
    with open(path, encoding="utf-8", errors="replace") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                if kind is not None and isinstance(row, dict) and row.get("kind") != kind:
                    continue
                if not isinstance(row, dict):
                    raise ValueError("not a JSON object")
                event = parse_event({**row, "session_id": sid})
            except ValueError as exc:  # JSONDecodeError and ValidationError are ValueErrors
                reason = " ".join(str(exc).split())[:300]
                log.warning("skipped line %d of the journal %s: %s", number, path, reason)
                continue
            events.append(event)
    return events


def last_journal_seq(path: Path, block: int = 65536) -> int | None:
    """The `seq` of the journal's last complete row, read from the end (a row
    cut short by a crash is skipped); None for an empty or missing journal."""
    try:
        fh = open(path, "rb")  # noqa: SIM115
    except OSError:
        return None
    with fh:
        end = fh.seek(0, 2)
        tail = b""
        while end > 0:
            start = max(0, end - block)
            fh.seek(start)
            tail = fh.read(end - start) + tail
            end = start
            lines = tail.split(b"\n")
            # the first piece may be a partial line unless the file start was reached
            complete = lines if end == 0 else lines[1:]
            for line in reversed(complete):
                try:
                    row = json.loads(line)
                except ValueError:
                    continue
                if isinstance(row, dict) and isinstance(row.get("seq"), int):
                    return int(row["seq"])
            tail = lines[0] if end > 0 else b""
    return None


class EventLog:
    """The event stream of one live session."""

    def __init__(
        self,
        session_id: str,
        *,
        cap: int = 2000,
        journal: Journal | None = None,
        start_seq: int = 0,
        observer: Callable[[CoderEvent], None] | None = None,
        backlog: int = 4096,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.session_id = session_id
        self.cap = cap
        self.journal = journal
        self.next_seq = start_seq
        self.observer = observer
        self.backlog = backlog
        self.clock = clock
        self._buffer: deque[CoderEvent] = deque()
        self._subscribers: list[Subscription[CoderEvent]] = []

    def append(self, data: EventData) -> CoderEvent:
        """Sequence one event and hand it to the journal, the observer and every
        subscriber; never waits for any of them."""
        event = _construct_event(
            EVENT_CLASSES[data.__class__], self.session_id, self.next_seq, self.clock(), data
        )
        buffer = self._buffer
        buffer.append(event)
        if self.cap and len(buffer) > self.cap:
            buffer.popleft()
        self.next_seq = event.seq + 1
        if self.journal is not None:
            self.journal.write(event)
        if self.observer is not None:
            self.observer(event)
        dropped: list[Subscription[CoderEvent]] | None = None
        for sub in self._subscribers:
            # `sub.offer(event)`, inlined: this runs once per subscriber per event
            items = sub._items
            if len(items) < sub._limit:
                items.append(event)
                waiter = sub._waiter
                if waiter is not None:
                    sub._waiter = None  # woken once; later offers skip this
                    if not waiter.done():
                        waiter.set_result(None)
            else:
                sub.dropped = True
                sub._wake()
                dropped = dropped or []
                dropped.append(sub)
        if dropped:
            for sub in dropped:
                self._subscribers.remove(sub)
        return event

    @property
    def first_buffered_seq(self) -> int:
        return self._buffer[0].seq if self._buffer else self.next_seq

    def buffered(self) -> list[CoderEvent]:
        return list(self._buffer)

    def subscribe(self, from_seq: int = 0) -> tuple[Subscription[CoderEvent], int, int]:
        """Replay `seq >= from_seq` and register, atomically.

        Returns the subscription, how many events were replayed, and how many
        requested events were already trimmed from the buffer (`events_skipped`).
        """
        from_seq = max(0, from_seq)
        skipped = max(0, self.first_buffered_seq - from_seq)
        replay = [e for e in self._buffer if e.seq >= from_seq]
        sub: Subscription[CoderEvent] = Subscription(self, self.backlog + len(replay))
        sub._items.extend(replay)  # within its limit by construction; nobody waits yet
        self._subscribers.append(sub)
        return sub, len(replay), skipped

    def unsubscribe(self, sub: Subscription[CoderEvent]) -> None:
        if sub in self._subscribers:
            self._subscribers.remove(sub)

    @property
    def subscriber_count(self) -> int:
        return len(self._subscribers)

    def close(self) -> None:
        for sub in list(self._subscribers):
            sub.closed = True
            sub._wake()
        self._subscribers.clear()
        if self.journal is not None:
            self.journal.close()
