"""Discussion events: one payload model per type, the stream emits the event
class of the payload it is given, the wire shape is the one from before."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from corral.supervisor.discuss import (
    DISCUSS_EVENT_CLASSES,
    DiscussAssistantDeltaEvent,
    DiscussErrorData,
    DiscussEventType,
    DiscussTaskPreparedData,
    DiscussTaskPreparedEvent,
    DiscussToolCallData,
    DiscussTurnCompleteData,
    DiscussTurnCompleteEvent,
    DiscussUserMessageData,
    EventStream,
    parse_discuss_event,
)


def test_every_type_has_one_payload_and_one_event_class() -> None:
    assert {payload.TYPE for payload in DISCUSS_EVENT_CLASSES} == set(DiscussEventType)
    for payload, event_cls in DISCUSS_EVENT_CLASSES.items():
        assert event_cls.model_fields["type"].default is payload.TYPE


def test_emit_builds_the_event_of_the_payload_type_in_seq_order() -> None:
    stream = EventStream("disc-x", clock=lambda: 5.0)
    sub = stream.subscribe()
    first = stream.emit(DiscussUserMessageData(text="hi"))
    last = stream.emit(DiscussTurnCompleteData())
    assert isinstance(last, DiscussTurnCompleteEvent) and last.data.cancelled is False
    assert (first.seq, last.seq, first.type, first.discussion_id) == (
        0,
        1,
        "user_message",
        "disc-x",
    )
    assert sub.get_nowait() == [first, last]
    assert [e.type for e in stream.events("turn_complete")] == ["turn_complete"]


def test_the_wire_shape_leaves_out_what_producers_used_to_leave_out() -> None:
    stream = EventStream("disc-x", clock=lambda: 5.0)
    assert stream.emit(DiscussTurnCompleteData()).to_dict() == {
        "type": "turn_complete",
        "seq": 0,
        "ts": 5.0,
        "discussion_id": "disc-x",
    }
    assert stream.emit(DiscussTurnCompleteData(cancelled=True)).to_dict()["cancelled"] is True
    error = stream.emit(DiscussErrorData(message="boom")).to_dict()
    assert "kind" not in error and error["message"] == "boom"
    saved = stream.emit(
        DiscussTaskPreparedData(source="saved", intent="Do X", constraints=[], replayed=True)
    ).to_dict()
    assert saved["replayed"] is True and saved["constraints"] == [] and saved["source"] == "saved"
    call = stream.emit(DiscussToolCallData(name="list_dir", args={"path": "."})).to_dict()
    assert "replayed" not in call and call["args"] == {"path": "."}


def test_parsing_round_trips_and_rejects_a_payload_of_another_type() -> None:
    stream = EventStream("disc-x", clock=lambda: 5.0)
    event = stream.emit(DiscussTaskPreparedData(source="model", intent="Do X", constraints=["c"]))
    again = parse_discuss_event(event.model_dump())
    assert isinstance(again, DiscussTaskPreparedEvent) and again == event
    assert isinstance(
        parse_discuss_event(
            {
                "discussion_id": "d",
                "seq": 1,
                "ts": 1.0,
                "type": "assistant_delta",
                "data": {"text": "x"},
            }
        ),
        DiscussAssistantDeltaEvent,
    )
    with pytest.raises(ValidationError):
        parse_discuss_event(
            {"discussion_id": "d", "seq": 1, "ts": 1.0, "type": "refusal", "data": {"text": "x"}}
        )
