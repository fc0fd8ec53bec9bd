"""A discussion's event stream, typed: one payload model per event type;
monotonic seqs, a bounded replay buffer, subscribers.

An event is `{discussion_id, seq, ts, type, data}`. As for a session's events
(`corral.supervisor.events`):

- each type has its own event class (`DiscussUserMessageEvent`, ...) whose `type` is
  a `Literal` and whose `data` is that type's payload model (`DiscussUserMessageData`,
  ...); `DiscussEvent` is their union, discriminated on `type`, so a consumer
  narrows with `match` / `isinstance` and reads typed attributes;
- a producer hands the stream a payload (`stream.emit(DiscussUserMessageData(...))`);
  the payload knows its type, so the two can never disagree.

Discussion events are never written to disk: a saved discussion is its model
thread, transcript and prepared task (`Discussion.to_json`), and a resume
replays events from the thread. `to_dict()` is the flattened wire shape (the
payload's fields beside `type`, `seq`, `ts` and `discussion_id`), the same
keys as before the payloads were typed: a flag left at its default
(`replayed`, `cancelled`) or an unset error `kind` is left out, as the
producers used to leave it out. `parse_discuss_event` validates the nested
shape (`model_dump()`).
"""

from __future__ import annotations

import contextlib
import time
from collections import deque
from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import Annotated, Any, ClassVar, Literal, Union, get_args

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from ..session.journal import Subscription, SubscriptionDropped
from .common import (
    DISCUSS_EVENT_BUFFER_MAX,
    DISCUSS_SUBSCRIBER_QUEUE,
)

# --- payloads -----------------------------------------------------------------


class DiscussEventType(StrEnum):
    USER_MESSAGE = "user_message"
    ASSISTANT_DELTA = "assistant_delta"
    ASSISTANT_MESSAGE = "assistant_message"
    TOOL_CALL = "tool_call"
    TOOL_RESULT = "tool_result"
    REFUSAL = "refusal"
    TASK_PREPARED = "task_prepared"
    ERROR = "error"
    TURN_COMPLETE = "turn_complete"


T = DiscussEventType


class DiscussData(BaseModel):
    """The payload of one discussion event type. Unknown fields in parsed
    input are ignored."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    TYPE: ClassVar[DiscussEventType]


class DiscussUserMessageData(DiscussData):
    """The operator's message (or, `replayed`, one from the saved thread)."""

    TYPE = T.USER_MESSAGE
    text: str
    replayed: bool = False


class DiscussAssistantDeltaData(DiscussData):
    """A piece of the reply as it streams; replayed, the text the model wrote
    beside its tool calls."""

    TYPE = T.ASSISTANT_DELTA
    text: str
    replayed: bool = False


class DiscussAssistantMessageData(DiscussData):
    """The complete reply (after its deltas, if it streamed)."""

    TYPE = T.ASSISTANT_MESSAGE
    text: str
    replayed: bool = False


class DiscussToolCallData(DiscussData):
    TYPE = T.TOOL_CALL
    name: str
    args: dict[str, Any]  # shortened for the log: long texts become their size
    replayed: bool = False


class DiscussToolResultData(DiscussData):
    TYPE = T.TOOL_RESULT
    name: str
    ok: bool
    summary: str


class DiscussRefusalData(DiscussData):
    """A tool the discussion refused (read-only gate, policy, path)."""

    TYPE = T.REFUSAL
    tool: str
    reason: str


class DiscussTaskPreparedData(DiscussData):
    """A proposal to review: by the model, the operator's edit, `promote`, or
    the one saved with the discussion."""

    TYPE = T.TASK_PREPARED
    source: Literal["model", "operator", "promote", "saved"]
    intent: str
    constraints: list[str]
    replayed: bool = False


class DiscussErrorData(DiscussData):
    TYPE = T.ERROR
    message: str
    kind: str | None = None  # a model error's kind


class DiscussTurnCompleteData(DiscussData):
    """Exactly one ends every turn."""

    TYPE = T.TURN_COMPLETE
    cancelled: bool = False


# --- events -------------------------------------------------------------------


class DiscussEventBase(BaseModel):
    """What every discussion event has. `seq` counts from 0 per opened discussion."""

    model_config = ConfigDict(frozen=True)

    discussion_id: str
    seq: int
    ts: float

    def to_dict(self) -> dict[str, Any]:
        """The flattened wire shape: `type`, `seq`, `ts`, `discussion_id` and
        the payload's fields at the top level (defaults left out)."""
        data: DiscussData = getattr(self, "data")  # noqa: B009 (every subclass has one)
        return {
            **data.model_dump(exclude_defaults=True),
            "type": str(data.TYPE),
            "seq": self.seq,
            "ts": self.ts,
            "discussion_id": self.discussion_id,
        }


class DiscussUserMessageEvent(DiscussEventBase):
    type: Literal[T.USER_MESSAGE] = T.USER_MESSAGE
    data: DiscussUserMessageData


class DiscussAssistantDeltaEvent(DiscussEventBase):
    type: Literal[T.ASSISTANT_DELTA] = T.ASSISTANT_DELTA
    data: DiscussAssistantDeltaData


class DiscussAssistantMessageEvent(DiscussEventBase):
    type: Literal[T.ASSISTANT_MESSAGE] = T.ASSISTANT_MESSAGE
    data: DiscussAssistantMessageData


class DiscussToolCallEvent(DiscussEventBase):
    type: Literal[T.TOOL_CALL] = T.TOOL_CALL
    data: DiscussToolCallData


class DiscussToolResultEvent(DiscussEventBase):
    type: Literal[T.TOOL_RESULT] = T.TOOL_RESULT
    data: DiscussToolResultData


class DiscussRefusalEvent(DiscussEventBase):
    type: Literal[T.REFUSAL] = T.REFUSAL
    data: DiscussRefusalData


class DiscussTaskPreparedEvent(DiscussEventBase):
    type: Literal[T.TASK_PREPARED] = T.TASK_PREPARED
    data: DiscussTaskPreparedData


class DiscussErrorEvent(DiscussEventBase):
    type: Literal[T.ERROR] = T.ERROR
    data: DiscussErrorData


class DiscussTurnCompleteEvent(DiscussEventBase):
    type: Literal[T.TURN_COMPLETE] = T.TURN_COMPLETE
    data: DiscussTurnCompleteData


_DiscussEvents = Union[  # noqa: UP007 (the members are listed one per line, in type order)
    DiscussUserMessageEvent,
    DiscussAssistantDeltaEvent,
    DiscussAssistantMessageEvent,
    DiscussToolCallEvent,
    DiscussToolResultEvent,
    DiscussRefusalEvent,
    DiscussTaskPreparedEvent,
    DiscussErrorEvent,
    DiscussTurnCompleteEvent,
]

DiscussEvent = Annotated[_DiscussEvents, Field(discriminator="type")]
"""One entry of a discussion's event stream: any of the event classes above."""

DISCUSS_EVENT_ADAPTER: TypeAdapter[DiscussEvent] = TypeAdapter(DiscussEvent)


def parse_discuss_event(obj: Mapping[str, Any]) -> DiscussEvent:
    """Validate one event in its nested shape. Raises `ValidationError`."""
    return DISCUSS_EVENT_ADAPTER.validate_python(obj)


def _event_classes() -> dict[type[DiscussData], type[DiscussEventBase]]:
    """Payload class → its event class, checked: one event class per type,
    every payload's `TYPE` is its event's `type`, and every type has one."""
    table: dict[type[DiscussData], type[DiscussEventBase]] = {}
    for event_cls in get_args(_DiscussEvents):
        kind = event_cls.model_fields["type"].default
        payload = event_cls.model_fields["data"].annotation
        if payload.TYPE is not kind or payload in table:
            raise TypeError(f"{event_cls.__name__}: payload {payload.__name__} is not {kind}'s")
        table[payload] = event_cls
    if {p.TYPE for p in table} != set(DiscussEventType):
        raise TypeError("a discussion event type has no event class")
    return table


DISCUSS_EVENT_CLASSES: dict[type[DiscussData], type[DiscussEventBase]] = _event_classes()
"""Which event class carries each payload class (the stream's emit path)."""


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

    def emit(self, data: DiscussData, /) -> DiscussEvent:
        """Sequence one payload as the event of its type and fan it out."""
        cls = DISCUSS_EVENT_CLASSES[type(data)]
        fields = {"discussion_id": self.discussion_id, "seq": self.next_seq, "ts": self._clock()}
        event: DiscussEvent = cls.model_validate(  # type: ignore[assignment]  # one of the union's
            {**fields, "data": data}
        )
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

    def events(self, kind: DiscussEventType | str | None = None) -> list[DiscussEvent]:
        return [e for e in self.buffer if kind is None or e.type == kind]
