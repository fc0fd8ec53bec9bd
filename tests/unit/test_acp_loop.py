"""The ACP loop's outbox (`supervisor/acp/loop.py`): what an ACP run tells
the owner arrives on the owner's loop, in order, one hop per tick; pieces of
speech in a row join, nothing else does, and no text is lost."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Any

from corral.supervisor.acp import loop as acp_loop
from corral.supervisor.acp.loop import Outbox, on_acp_loop
from corral.supervisor.events import ConversationData, EventData, PlanTextData

HELD_AT_MOST = 32  # items of a batch the owner's loop may be held for (about 1 ms of work)


def said(part: str, text: str) -> ConversationData:
    return ConversationData(part=part, text=text)  # type: ignore[arg-type]


async def test_pieces_in_a_row_join_in_order_and_reach_the_owners_loop() -> None:
    owner_thread = threading.current_thread()
    got: list[tuple[EventData, threading.Thread]] = []
    notes: list[str] = []
    outbox = Outbox(
        asyncio.get_running_loop(), lambda d: got.append((d, threading.current_thread()))
    )

    async def run_there() -> None:
        assert threading.current_thread() is not owner_thread
        outbox.emit(said("message", "one"))
        outbox.emit(said("message", "two"))
        outbox.emit(said("thought", "hm"))  # a thought ends the message
        outbox.emit(said("message", "three"))
        outbox.post(notes.append, "status")  # a note between: no join across it
        outbox.emit(said("message", "four"))
        outbox.emit(ConversationData(part="tool_call", tool_call_id="c1", text="x"))
        outbox.emit(PlanTextData(text="plan"))
        outbox.emit(said("message", "five"))
        outbox.emit(said("message", "six"))
        outbox.ship()

    await on_acp_loop(run_there())
    for _ in range(50):
        if len(got) == 7:
            break
        await asyncio.sleep(0.01)
    assert {t for _d, t in got} == {owner_thread}
    texts = [(getattr(d, "part", "plan"), d.text) for d, _t in got]  # type: ignore[attr-defined]
    assert texts == [
        ("message", "one\ntwo"),
        ("thought", "hm"),
        ("message", "three"),
        ("message", "four"),
        ("tool_call", "x"),
        ("plan", "plan"),
        ("message", "five\nsix"),
    ]
    assert notes == ["status"]


async def test_a_tick_ships_without_being_asked(monkeypatch: Any) -> None:
    monkeypatch.setattr(acp_loop, "TICK_SECS", 0.02)
    got: list[EventData] = []
    outbox = Outbox(asyncio.get_running_loop(), got.append)

    async def say() -> None:
        outbox.emit(said("message", "later"))

    await on_acp_loop(say())
    for _ in range(200):
        if got:
            break
        await asyncio.sleep(0.01)
    assert [d.text for d in got] == ["later"]  # type: ignore[attr-defined]


async def test_cancelling_the_caller_waits_for_the_run_to_clean_up() -> None:
    cleaned = threading.Event()
    started = threading.Event()

    async def run_there() -> None:
        started.set()
        try:
            await asyncio.sleep(60)
        finally:
            await asyncio.sleep(0.05)  # its own cleanup takes a while
            cleaned.set()

    task = asyncio.ensure_future(on_acp_loop(run_there()))
    while not started.is_set():
        await asyncio.sleep(0.01)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert cleaned.is_set(), "the caller went on before the run on the ACP loop had stopped"


async def test_a_big_batch_lets_the_owners_loop_run_between_slices_and_keeps_its_order() -> None:
    """A tick of 50 streaming sessions is one batch: applied whole, a key
    that reached the owner's loop meanwhile waited for all of it. Work the
    loop was given after the batch began (here: by its first item) runs
    after a slice (`SLICE_ITEMS`), and every item still lands once, in
    order, a later batch after it."""
    loop = asyncio.get_running_loop()
    got: list[object] = []

    def first(i: int) -> None:
        got.append(i)
        loop.call_soon(got.append, "key")  # what the loop was given meanwhile

    outbox = Outbox(loop, lambda d: got.append(d.text))  # type: ignore[attr-defined]

    async def burst() -> None:
        outbox.post(first, 0)
        for i in range(1, 400):
            outbox.post(got.append, i)
        outbox.ship()
        outbox.emit(PlanTextData(text="the next batch"))
        outbox.ship()

    await on_acp_loop(burst())
    for _ in range(200):
        if "the next batch" in got:
            break
        await asyncio.sleep(0.01)
    assert [x for x in got if x != "key"] == [*range(400), "the next batch"]
    held = got.index("key")  # items applied before the loop ran anything else
    assert held <= HELD_AT_MOST, f"the owner's loop ran nothing else for {held} items of a batch"


async def test_what_the_acp_loop_asks_of_the_owner_runs_after_everything_shipped_before() -> None:
    """Sliced, a batch must still be whole before a question to the owner:
    the guidance taken, a permission asked, see every event sent before."""
    loop = asyncio.get_running_loop()
    got: list[int] = []
    outbox = Outbox(loop, lambda _d: None)

    async def seen_by_owner() -> int:
        return len(got)

    async def ask() -> tuple[int, int]:
        for i in range(300):
            outbox.post(got.append, i)
        outbox.ship()
        called = acp_loop.call_owner(loop, lambda: len(got))
        for i in range(300, 600):
            outbox.post(got.append, i)
        outbox.ship()
        awaited = await acp_loop.on_owner(loop, seen_by_owner())
        return called, awaited

    assert await on_acp_loop(ask()) == (300, 600)
    assert got == list(range(600))
