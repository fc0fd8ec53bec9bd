"""The per-session event log: replay buffer, subscribers and journal; seqs
never rewind, subscribe replays and registers atomically, and a slow reader is
dropped rather than stalling the producer."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from corral.supervisor.events import (
    EVENT_ADAPTER,
    ErrorData,
    ExternalData,
    IterationStartedData,
    IterationStartedEvent,
    PaneAnswerData,
    PlanTextData,
    StateChangedData,
    ToolCallData,
    ToolDeniedData,
    ToolResultData,
    parse_event,
)
from corral.supervisor.models import EventKind
from corral.supervisor.session.journal import (
    EventLog,
    Journal,
    Subscription,
    SubscriptionClosed,
    SubscriptionDropped,
    last_journal_seq,
    read_journal,
)
from corral.supervisor.states import CoderState

DATA = Path(__file__).parent / "data"

DEFAULT_CAP = 2000  # SupervisorConfig.max_replay_events
NOTE = PlanTextData(text="narration")
CALL = ToolCallData(tool="shell")


def fill(log: EventLog, n: int) -> None:
    for i in range(n):
        log.append(PlanTextData(text=str(i)))


def seqs(events) -> list[int]:
    return [e.seq for e in events]


# --- buffer ---------------------------------------------------------------------


def test_replay_buffer_honors_the_cap() -> None:
    log = EventLog("s", cap=3)
    for i in range(5):
        event = log.append(PlanTextData(text=str(i)))
        assert event.seq == i
        assert log.next_seq == i + 1
    assert seqs(log.buffered()) == [2, 3, 4]
    assert log.first_buffered_seq == 2
    assert [e.data for e in log.buffered()] == [PlanTextData(text=str(i)) for i in (2, 3, 4)]


def test_cap_zero_keeps_everything() -> None:
    log = EventLog("s", cap=0)
    fill(log, 5000)
    assert len(log.buffered()) == 5000
    assert log.first_buffered_seq == 0
    assert log.next_seq == 5000


def test_empty_log_head_is_next_seq() -> None:
    log = EventLog("s", start_seq=42)
    assert log.first_buffered_seq == 42
    assert log.append(NOTE).seq == 42
    assert log.next_seq == 43


def test_long_session_replay_reports_the_trimmed_head() -> None:
    log = EventLog("s", cap=DEFAULT_CAP)
    fill(log, DEFAULT_CAP + 7)
    assert len(log.buffered()) == DEFAULT_CAP
    assert log.first_buffered_seq == 7
    assert log.next_seq == DEFAULT_CAP + 7  # trimming never rewinds the cursor

    sub, replayed, skipped = log.subscribe(0)
    assert (replayed, skipped) == (DEFAULT_CAP, 7)
    events = sub.get_nowait()
    assert events[0].seq == 7
    assert seqs(events) == list(range(7, DEFAULT_CAP + 7))
    assert json.loads(events[0].model_dump_json())["seq"] == 7

    # a cursor inside the buffer skips nothing
    _, replayed, skipped = log.subscribe(DEFAULT_CAP)
    assert (replayed, skipped) == (7, 0)
    # a cursor at the head replays nothing and skips nothing
    _, replayed, skipped = log.subscribe(log.next_seq)
    assert (replayed, skipped) == (0, 0)
    assert log.next_seq == DEFAULT_CAP + 7


async def test_subscribe_replays_then_goes_live_with_no_gap_or_duplicate() -> None:
    log = EventLog("s", cap=100)
    fill(log, 5)
    sub, replayed, skipped = log.subscribe(2)
    assert (replayed, skipped) == (3, 0)
    fill(log, 3)
    got = [await asyncio.wait_for(sub.get(), 1) for _ in range(6)]
    assert seqs(got) == [2, 3, 4, 5, 6, 7]
    assert sub.pending() == 0
    assert sub.last_seq == 7

    # a reader parked in get() is woken by the next append
    waiter = asyncio.create_task(sub.get())
    await asyncio.sleep(0)
    assert not waiter.done()
    log.append(CALL)
    assert (await asyncio.wait_for(waiter, 1)).seq == 8


async def test_async_iteration_ends_when_the_subscription_closes() -> None:
    log = EventLog("s")
    sub, _, _ = log.subscribe(0)
    fill(log, 3)

    async def read_all() -> list[int]:
        return [event.seq async for event in sub]

    reader = asyncio.create_task(read_all())
    await asyncio.sleep(0)
    sub.close()
    assert await asyncio.wait_for(reader, 1) == [0, 1, 2]
    assert log.subscriber_count == 0
    # closed subscribers get nothing more
    log.append(NOTE)
    assert sub.pending() == 0
    with pytest.raises(SubscriptionClosed):
        await asyncio.wait_for(sub.get(), 1)


async def test_closing_the_log_ends_every_subscription() -> None:
    log = EventLog("s")
    subs = [log.subscribe(0)[0] for _ in range(3)]
    readers = [asyncio.create_task(s.get()) for s in subs]
    await asyncio.sleep(0)
    log.close()
    for reader in readers:
        with pytest.raises(SubscriptionClosed):
            await asyncio.wait_for(reader, 1)
    assert log.subscriber_count == 0


async def test_a_slow_subscriber_is_dropped_and_the_others_continue() -> None:
    backlog = 8
    total = 200
    log = EventLog("s", cap=0, backlog=backlog)
    slow, _, _ = log.subscribe(0)
    fast, _, _ = log.subscribe(0)
    received: list[int] = []
    done = asyncio.Event()

    async def drain() -> None:
        async for event in fast:
            received.append(event.seq)
            if event.seq == total - 1:
                done.set()
                return

    reader = asyncio.create_task(drain())
    longest_append = 0.0
    for i in range(total):
        data = ToolCallData.with_args("shell", {"i": i})
        t0 = time.perf_counter()
        log.append(data)  # synchronous: never waits for a reader
        longest_append = max(longest_append, time.perf_counter() - t0)
        if i % 4 == 3:
            await asyncio.sleep(0)
    await asyncio.wait_for(done.wait(), 5)
    await reader

    assert received == list(range(total))  # the healthy reader saw everything, in order
    assert slow.dropped
    assert log.subscriber_count == 1  # the slow one was unregistered
    assert longest_append < 0.05

    # the slow reader still gets what it was handed, then is told to resync
    kept = [await slow.get() for _ in range(backlog)]
    assert seqs(kept) == list(range(backlog))
    with pytest.raises(SubscriptionDropped) as info:
        await asyncio.wait_for(slow.get(), 1)
    assert f"resubscribe from {backlog}" in str(info.value)

    # resubscribing from its cursor resumes with no gap
    again, replayed, skipped = log.subscribe(slow.last_seq + 1)
    assert (replayed, skipped) == (total - backlog, 0)
    assert seqs(again.get_nowait()) == list(range(backlog, total))


def test_replay_does_not_count_against_the_live_backlog() -> None:
    log = EventLog("s", cap=0, backlog=4)
    fill(log, 50)
    sub, replayed, _ = log.subscribe(0)
    assert replayed == 50 and not sub.dropped
    fill(log, 4)
    assert not sub.dropped
    log.append(NOTE)
    assert sub.dropped


def test_the_observer_runs_before_fanout() -> None:
    log = EventLog("s")
    sub, _, _ = log.subscribe(0)
    seen_pending: list[int] = []
    log.observer = lambda event: seen_pending.append(sub.pending())
    fill(log, 3)
    # when the observer saw event N, subscribers had not yet been handed it
    assert seen_pending == [0, 1, 2]


async def test_journal_writes_one_jsonl_row_per_event(tmp_path: Path) -> None:
    path = tmp_path / "journals" / "s.events.jsonl"
    log = EventLog("s", cap=2, journal=Journal(path), clock=lambda: 123.5)
    log.append(PlanTextData(text="héllo"))
    log.append(ToolCallData.with_args("shell", {"path": Path("/x")}))
    log.append(StateChangedData(from_=CoderState.RUNNING, to=CoderState.FAILED))
    await asyncio.sleep(0)  # the flush runs once per loop pass
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert rows == [
        {"seq": 0, "ts": 123.5, "kind": "plan_text", "data": {"text": "héllo"}},
        {"seq": 1, "ts": 123.5, "kind": "tool_call", "data": {"tool": "shell", "path": "/x"}},
        {
            "seq": 2,
            "ts": 123.5,
            "kind": "state_changed",
            "data": {"from": "running", "to": "failed"},
        },
    ]
    # read back typed, the session id taken from the file's name
    events = read_journal(path)
    assert [e.model_dump(mode="json") for e in events] == [{"session_id": "s", **r} for r in rows]
    assert events[2].kind is EventKind.STATE_CHANGED and events[2].data.to is CoderState.FAILED
    # the journal keeps what the capped buffer trimmed
    assert seqs(log.buffered()) == [1, 2]
    assert [e.seq for e in read_journal(path, "tool_call")] == [1]
    assert "héllo" in path.read_text(encoding="utf-8")  # not ascii-escaped

    log.close()
    # appending again (a restarted log continues the cursor) appends to the file
    log2 = EventLog("s", journal=Journal(path), start_seq=3)
    log2.append(ErrorData(message="x"))
    log2.close()
    assert seqs(read_journal(path)) == [0, 1, 2, 3]


def test_journal_outside_a_loop_flushes_immediately(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    journal = Journal(path)
    log = EventLog("s", journal=journal)
    log.append(PlanTextData(text="a"))
    assert [e.kind for e in read_journal(path)] == ["plan_text"]
    journal.close()


def test_a_torn_last_row_loses_only_itself_after_a_restart(tmp_path: Path) -> None:
    """A kill -9 mid-write leaves a row without its newline; the restarted
    log's first event is still a row of its own."""
    path = tmp_path / "j.jsonl"
    log = EventLog("s", journal=Journal(path))
    log.append(PlanTextData(text="before"))
    log.close()
    with open(path, "ab") as fh:
        fh.write(b'{"seq": 1, "ts": 1.0, "kind": "plan_te')  # the crash cut this row short
    start = last_journal_seq(path)
    assert start == 0
    restarted = EventLog("s", journal=Journal(path), start_seq=start + 1)
    restarted.append(PlanTextData(text="after the restart"))
    restarted.close()
    assert [e.data.text for e in read_journal(path)] == ["before", "after the restart"]


def test_the_last_journal_seq_is_read_from_the_end(tmp_path: Path) -> None:
    """A restart continues after it: rows longer than a read block, and a last
    row cut short by a crash, are both handled."""
    path = tmp_path / "j.jsonl"
    assert last_journal_seq(path) is None
    path.write_bytes(b"")
    assert last_journal_seq(path) is None
    big = "x" * 200_000
    rows = [
        {"seq": i, "kind": "plan_text", "data": {"text": big if i == 41 else ""}} for i in range(42)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert last_journal_seq(path, block=1024) == 41
    with open(path, "a") as fh:
        fh.write('{"seq": 42, "kind": "plan_te')  # the crash cut this row short
    assert last_journal_seq(path, block=1024) == 41


def test_read_journal_skips_bad_lines_with_a_warning_and_keeps_the_rest(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "abc.events.jsonl"
    path.write_text(
        '{"seq": 0, "ts": 1.0, "kind": "error", "data": {"message": "boom"}}\n'
        "not json\n"
        '{"seq": 1, "ts": 1.0, "kind": "from_a_newer_corral", "data": {}}\n'
        '{"seq": 2, "ts": 1.0, "kind": "iteration_started", "data": {"n": "three"}}\n'
        "\n"
        '{"seq": 3, "ts": 1.0, "kind": "plan_text", "data": {"text": "after"}}\n'
        '{"seq": 4, "ts": 1.0, "kind": "plan_te'  # a torn last write
    )
    with caplog.at_level(logging.WARNING, logger="corral.supervisor"):
        events = read_journal(path)
    assert seqs(events) == [0, 3]
    assert {e.session_id for e in events} == {"abc"}
    warned = [r.getMessage() for r in caplog.records]
    assert [m.split(" of the journal")[0] for m in warned] == [
        "skipped line 2",
        "skipped line 3",
        "skipped line 4",
        "skipped line 7",
    ]
    assert all(str(path) in m for m in warned)
    assert seqs(read_journal(path, "plan_text", session_id="other")) == [3]
    assert read_journal(tmp_path / "missing.jsonl") == []


def test_old_journals_load_and_round_trip() -> None:
    """Lines written by the corral before typed events, one per kind and payload
    shape (recorded from the suite's flows, plus the variants no flow journals,
    built with that version's producers): each loads as its typed event and
    writes back the same JSON, and prints the `corral run --json` line that
    version printed. (tests/tui/test_event_text.py checks the console lines.)"""
    lines = (DATA / "journal_v1.jsonl").read_text(encoding="utf-8").splitlines()
    printed_then = json.loads((DATA / "journal_v1.describe.json").read_text(encoding="utf-8"))
    events = read_journal(DATA / "journal_v1.jsonl", session_id="s")
    assert len(events) == len(lines) == len(printed_then)
    # every kind of that version is covered (worktree_changed and later came later)
    assert {e.kind for e in events} == set(EventKind) - {
        EventKind.WORKTREE_CHANGED,
        EventKind.SETUP_COMPLETED,
        EventKind.MESSAGE,
        EventKind.BOUNDARY,
        EventKind.CONVERSATION,
        EventKind.BLOCKED,
    }
    for line, event, then in zip(lines, events, printed_then, strict=True):
        row = json.loads(line)
        assert event.model_dump(mode="json") == {"session_id": "s", **row}
        assert json.loads(event.data.model_dump_json()) == row["data"]
        assert parse_event(json.loads(event.model_dump_json())) == event
        printed = json.dumps(event.model_dump(mode="json"), ensure_ascii=False)  # --json
        assert json.loads(printed) == json.loads(then["json"])
        if event.kind is not EventKind.TOOL_CALL:  # a tool call now lists `tool` first
            assert printed == then["json"]


def test_worktree_changed_round_trips_in_both_phases() -> None:
    """The kind added after the first journals: during verification it names the
    attempt; after verification it names only the files."""
    rows = [
        {"phase": "during_verification", "files": ["clock.txt"], "attempt": 1, "of": 3},
        {"phase": "since_verification", "files": ["hello.txt"]},
    ]
    for seq, data in enumerate(rows):
        row = {"session_id": "s", "seq": seq, "ts": 1.0, "kind": "worktree_changed", "data": data}
        event = parse_event(row)
        assert event.kind is EventKind.WORKTREE_CHANGED
        assert parse_event(json.loads(event.model_dump_json())) == event
        assert event.data.model_dump(exclude_none=True) == data


# --- the no-gap / no-duplicate property ------------------------------------------

Op = tuple[str, int]

ops_strategy = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 6)),
        # a cursor as a fraction of next_seq, so it can fall below the buffer head
        st.tuples(st.just("subscribe"), st.integers(0, 100)),
        st.tuples(st.just("unsubscribe"), st.integers(0, 50)),
        st.tuples(st.just("read"), st.integers(0, 50)),
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=ops_strategy, cap=st.integers(0, 8))
def test_every_live_subscriber_sees_each_event_exactly_once_in_order(
    ops: list[Op], cap: int
) -> None:
    log = EventLog("s", cap=cap, backlog=10_000)
    # per subscription: (sub, first expected seq, end seq or None while live, received)
    tracked: list[tuple[Subscription, int, list[int | None], list[int]]] = []

    def live() -> list[int]:
        return [i for i, (_, _, end, _) in enumerate(tracked) if end[0] is None]

    for op, arg in ops:
        if op == "append":
            for _ in range(arg):
                log.append(CALL)
        elif op == "subscribe":
            from_seq = log.next_seq * arg // 100
            head = log.first_buffered_seq
            sub, replayed, skipped = log.subscribe(from_seq)
            start = max(from_seq, head)
            assert skipped == max(0, head - from_seq)
            assert replayed == log.next_seq - start
            tracked.append((sub, start, [None], []))
        elif op == "unsubscribe" and live():
            idx = live()[arg % len(live())]
            sub, _, end, received = tracked[idx]
            received.extend(e.seq for e in sub.get_nowait())
            sub.close()
            end[0] = log.next_seq
        elif op == "read" and live():
            idx = live()[arg % len(live())]
            sub, _, _, received = tracked[idx]
            received.extend(e.seq for e in sub.get_nowait())

    for sub, start, end, received in tracked:
        if end[0] is None:
            received.extend(e.seq for e in sub.get_nowait())
            stop = log.next_seq
        else:
            stop = end[0]
            assert sub.get_nowait() == []  # nothing after unsubscribe
        assert received == list(range(start, stop))
        assert not sub.dropped
    assert log.subscriber_count == len(live())


# --- the append hot path --------------------------------------------------------


def test_appended_events_are_ordinary_typed_events() -> None:
    from corral.supervisor.session import journal

    assert journal._fast_construct_ok()  # the fast constructor is in use here
    log = EventLog("s", clock=lambda: 5.0)
    data = IterationStartedData(n=1, max=8)
    event = log.append(data)
    expected = IterationStartedEvent(
        session_id="s", seq=0, ts=5.0, kind=EventKind.ITERATION_STARTED, data=data
    )
    assert type(event) is IterationStartedEvent and event.kind is EventKind.ITERATION_STARTED
    assert event == expected
    assert event.model_dump() == expected.model_dump()
    assert event.model_dump_json() == expected.model_dump_json()
    assert event.model_fields_set == expected.model_fields_set
    assert EVENT_ADAPTER.validate_json(event.model_dump_json()) == event
    assert parse_event(json.loads(event.model_dump_json())) == event
    copy = event.model_copy(update={"seq": 9})
    assert (copy.seq, event.seq) == (9, 0)
    # events do not share mutable pydantic state
    other = log.append(NOTE)
    assert other.__pydantic_fields_set__ is not event.__pydantic_fields_set__


def test_events_and_payloads_are_frozen() -> None:
    event = EventLog("s").append(PlanTextData(text="a"))
    with pytest.raises(ValidationError):
        event.data.text = "b"  # type: ignore[misc]
    with pytest.raises(ValidationError):
        event.seq = 3  # type: ignore[misc]


def test_a_tool_calls_arguments_are_its_open_part() -> None:
    call = ToolCallData.with_args("shell", {"command": "ls", "tool": "spoof"})
    assert (call.tool, call.args) == ("shell", {"command": "ls"})
    assert call.model_dump() == {"tool": "shell", "command": "ls"}
    denied = ToolDeniedData.with_args("shell", {"command": "rm", "denied": "x"}, denied="no")
    assert denied.model_dump() == {"tool": "shell", "denied": "no", "command": "rm"}


@pytest.mark.parametrize(
    ("data", "shape"),
    [
        ({"command": "rm", "tool": "shell", "denied": "no"}, ToolDeniedData),
        ({"tool": "shell", "result": "exit 0", "ok": True}, ToolResultData),
        ({"tool": "answer", "question": "q?", "answer": "Yes", "action": "a"}, PaneAnswerData),
        ({"tool": "shell", "command": "ls"}, ToolCallData),
        ({"tool": "shell", "result": "mine", "path": "x"}, ToolCallData),  # an argument
        ({"tool": "write_file", "question": "q?", "answer": "a", "action": "b"}, ToolCallData),
    ],
)
def test_a_tool_call_parses_to_its_shape(data: dict[str, object], shape: type) -> None:
    event = parse_event({"session_id": "s", "seq": 0, "ts": 1.0, "kind": "tool_call", "data": data})
    assert type(event.data) is shape
    assert event.data.model_dump() == data


def test_an_external_event_of_another_shape_stays_open() -> None:
    event = parse_event(
        {"session_id": "s", "seq": 0, "ts": 1.0, "kind": "external_event", "data": {"hook": 1}}
    )
    assert event.kind is EventKind.EXTERNAL_EVENT
    assert isinstance(event.data, ExternalData) and event.data.fields == {"hook": 1}


async def test_journal_rows_serialize_non_json_values(tmp_path: Path) -> None:
    import datetime

    path = tmp_path / "j.jsonl"
    log = EventLog("s", journal=Journal(path))
    log.append(
        ExternalData.model_validate(
            {"path": Path("/a"), "when": datetime.date(2024, 1, 2), "obj": object, "n": [1, 2]}
        )
    )
    await asyncio.sleep(0)
    [event] = read_journal(path)
    assert isinstance(event.data, ExternalData)
    assert event.data.fields == {
        "path": "/a",
        "when": "2024-01-02",
        "obj": str(object),
        "n": [1, 2],
    }
    log.close()


async def test_journal_rows_keep_order_across_loop_passes(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    log = EventLog("s", journal=Journal(path))
    for burst in range(5):
        for _ in range(burst + 1):
            log.append(ToolCallData.with_args("shell", {"burst": burst}))
        await asyncio.sleep(0)
    assert seqs(read_journal(path)) == list(range(15))
    log.close()


async def test_an_unwritable_journal_never_breaks_append(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    log = EventLog("s", journal=Journal(blocker / "j.jsonl"))
    sub, _, _ = log.subscribe(0)
    log.append(PlanTextData(text="still delivered"))
    await asyncio.sleep(0)  # the flush fails quietly
    log.append(NOTE)
    log.close()
    assert seqs(sub.get_nowait()) == [0, 1]


async def test_a_parked_reader_is_woken_for_every_burst() -> None:
    log = EventLog("s")
    sub, _, _ = log.subscribe(0)
    got: list[int] = []

    async def read(n: int) -> None:
        async for event in sub:
            got.append(event.seq)
            if len(got) == n:
                return

    reader = asyncio.create_task(read(12))
    for _ in range(4):
        await asyncio.sleep(0)  # the reader parks
        for _ in range(3):
            log.append(CALL)  # one wake-up per burst
    await asyncio.wait_for(reader, 1)
    assert got == list(range(12))

    # appended and closed before the parked reader runs: it gets the event, then stops
    reader = asyncio.create_task(sub.get())
    await asyncio.sleep(0)
    log.append(CALL)
    sub.close()
    assert (await asyncio.wait_for(reader, 1)).seq == 12
    with pytest.raises(SubscriptionClosed):
        await sub.get()


def test_guidance_status_and_reason_round_trip_and_old_rows_still_load() -> None:
    """`reason` is written only when set; a row without `status` reads as queued."""
    base = {"session_id": "s", "seq": 1, "ts": 1.0, "kind": "operator_guidance"}
    old = parse_event({**base, "data": {"text": "x"}})
    assert old.kind is EventKind.OPERATOR_GUIDANCE
    assert (old.data.status, old.data.reason) == ("queued", None)
    assert json.loads(old.data.model_dump_json()) == {"text": "x", "status": "queued"}
    data = {"text": "x", "status": "not_delivered", "reason": "the run ended"}
    event = parse_event({**base, "data": data})
    assert json.loads(event.data.model_dump_json()) == data
    assert parse_event(json.loads(event.model_dump_json())) == event


def test_a_message_event_round_trips_and_reads_as_a_line() -> None:
    """The kind added with messages between sessions: how each ended, and why."""
    row = {
        "message_id": "ab12",
        "sender": "operator",
        "target": "s1",
        "text": "hold on",
        "status": "ambiguous",
        "reason": "the paste was not confirmed",
        "hops": 0,
    }
    event = parse_event({"seq": 1, "ts": 0.0, "session_id": "s1", "kind": "message", "data": row})
    assert event.kind is EventKind.MESSAGE
    assert json.loads(event.data.model_dump_json()) == row


def test_conversation_and_blocked_round_trip_leaving_unset_fields_out() -> None:
    """The ACP kinds: a tool call keeps its id, title, kind and status; a
    message has none of them in its JSON; a blocked request says by whom."""
    from corral.supervisor.events import BlockedData, ConversationData

    call = ConversationData(
        part="tool_call", tool_call_id="c1", title="Write a", tool_kind="edit", status="pending"
    )
    said = ConversationData(part="message", text="hello")
    blocked = BlockedData(what="fs/write_text_file /etc/x", why="outside", by="policy")
    assert json.loads(said.model_dump_json()) == {"part": "message", "text": "hello"}
    for kind, data in (("conversation", call), ("conversation", said), ("blocked", blocked)):
        event = parse_event(
            {"session_id": "s", "seq": 1, "ts": 0.0, "kind": kind, "data": data.model_dump()}
        )
        assert event.data == data
