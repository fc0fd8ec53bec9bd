"""The ACP loop: every ACP connection of this process runs on one event loop
of its own, on a daemon thread, never on the owner's loop.

An ACP agent streams: each line it writes is parsed by the SDK (a task per
message), handed to corral's client and turned into an event. On the owner's
loop (the console's, when the console owns the state dir) 50 agents
streaming took most of that loop, and every keystroke waited behind them.
Here the agents' processes, the SDK's connections, the files and terminals
they are served and the engine's turn logic run on this loop; what they tell
the owner crosses in batches (`Courier`): one hop per tick for every
session, a status at once. The owner never waits on this loop while holding
its own: it awaits futures (`on_acp_loop`); this loop asks the owner only
for what the owner keeps (a question to the operator, the guidance queued
for the next prompt).

Coalescing: consecutive pieces of what the agent says (a `message`, a
`thought`) in one tick become one event, their texts joined by a newline,
exactly as the conversation view joins consecutive pieces, so the journal
holds every piece's text, in order, in fewer appends.

Slicing: on the owner's loop a batch is applied `SLICE_ITEMS` items per
pass (`Inbox`), the rest after whatever else waits there (a key, a frame),
never reordered; what the ACP loop asks of the owner (`call_owner`,
`on_owner`) joins the same line, so it still runs after everything shipped
before it. A tick's batch of 50 streaming sessions (about 80 items) took the
owner's loop for 1 ms at the median but 17 ms at its 95th percentile and
159 ms at worst under load (`bench/status.py --acp-console --trace`): a key
that arrived meanwhile waited for all of it."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import sys
import threading
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from ..events import ConversationData, EventData

log = logging.getLogger("corral.supervisor.acp.loop")

T = TypeVar("T")

# What the agents said reaches the owner at most this late (a status, a
# question, a run's end at once): the preview repaints four times a second,
# so a quarter second is as fresh as anything shows it, and a stream of
# lines becomes one event per tick, not one per line.
TICK_SECS = 0.25
OWNER_CALL_TIMEOUT_SECS = 30.0  # a question to the owner's loop that gets no answer
# How long a thread that wants the GIL waits before the holder is asked to
# let go (Python's default is 5 ms). A key the console handles while this
# loop parses would wait that long at each of its hand-offs (input thread,
# loop, writer thread); the interval only matters while threads contend.
SWITCH_INTERVAL_SECS = 0.001
COALESCED = ("message", "thought")
# Items of a batch applied in one pass of the owner's loop (an event's
# journaling and board note is some 30 µs there): a key waits behind at most
# this many, not behind a whole tick of 50 sessions.
SLICE_ITEMS = 16

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None


def acp_loop() -> asyncio.AbstractEventLoop:
    """The ACP loop, started on its thread the first time it is asked for."""
    global _loop, _thread
    with _lock:
        if _loop is None or _thread is None or not _thread.is_alive():
            loop = asyncio.new_event_loop()
            started = threading.Event()

            def serve() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(started.set)
                loop.run_forever()

            sys.setswitchinterval(min(sys.getswitchinterval(), SWITCH_INTERVAL_SECS))
            thread = threading.Thread(target=serve, name="corral-acp", daemon=True)
            thread.start()
            started.wait()
            _loop, _thread = loop, thread
        return _loop


def on_the_acp_loop() -> bool:
    """Whether the caller runs on the ACP loop's thread."""
    return _thread is threading.current_thread()


async def on_acp_loop(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` on the ACP loop and await its result from the caller's loop.

    Cancelling the caller cancels it there and waits until it has finished
    (its own cleanup, e.g. `session/cancel` and stopping the agent, runs
    to its end as it would in the caller's loop); a second cancel stops
    waiting."""
    loop = acp_loop()
    done: concurrent.futures.Future[T] = concurrent.futures.Future()
    tasks: list[asyncio.Task[T]] = []

    def settle(task: asyncio.Task[T]) -> None:
        if task.cancelled():
            done.set_exception(asyncio.CancelledError())
        elif (exc := task.exception()) is not None:
            done.set_exception(exc)
        else:
            done.set_result(task.result())

    def start() -> None:
        if not done.set_running_or_notify_cancel():
            coro.close()
            return
        task = loop.create_task(coro)
        tasks.append(task)
        task.add_done_callback(settle)

    loop.call_soon_threadsafe(start)
    waiter = asyncio.wrap_future(done)
    try:
        return await asyncio.shield(waiter)
    except asyncio.CancelledError:
        if not waiter.done():
            loop.call_soon_threadsafe(lambda: [t.cancel() for t in tasks])
            try:
                await waiter
            except BaseException as exc:  # the work's own end once cancelled: the cancel goes on
                log.debug("ACP loop work ended so after its cancel: %r", exc)
        raise


async def on_owner(owner: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, T]) -> T:
    """From the ACP loop: run `coro` on the owner's loop, started after
    everything shipped to it before, and await it here (cancelling here
    cancels it there)."""
    started: concurrent.futures.Future[concurrent.futures.Future[T]] = concurrent.futures.Future()

    def start() -> None:
        if started.set_running_or_notify_cancel():
            started.set_result(asyncio.run_coroutine_threadsafe(coro, owner))
        else:  # given up before its turn came
            coro.close()

    Courier.of(owner).inbox.hand([(start, ())])
    running = await asyncio.wrap_future(started)
    return await asyncio.wrap_future(running)


def call_owner(owner: asyncio.AbstractEventLoop, fn: Callable[..., T], *args: Any) -> T:
    """From the ACP loop: call `fn` on the owner's loop and wait for its
    value (for what the owner keeps and hands out once, e.g. the guidance
    queued for the next prompt). It blocks this loop for one pass of the
    owner's, never the other way round: the owner never waits on this loop."""
    answer: concurrent.futures.Future[T] = concurrent.futures.Future()

    def run() -> None:
        try:
            answer.set_result(fn(*args))
        except BaseException as exc:  # handed to the caller as it was raised
            answer.set_exception(exc)

    Courier.of(owner).inbox.hand([(run, ())])  # after everything shipped before it
    return answer.result(OWNER_CALL_TIMEOUT_SECS)


Item = tuple[Callable[..., Any], tuple[Any, ...]]


class Outbox:
    """What one session's ACP run tells the owner, in order: its events
    (pieces of speech coalesced) and its notes (status, offers, …). Filled
    on the ACP loop, delivered on the owner's loop by its `Courier`."""

    def __init__(self, owner: asyncio.AbstractEventLoop, emit: Callable[[EventData], None]) -> None:
        self.owner = owner
        self._emit = emit
        self.items: list[Item] = []
        self.courier = Courier.of(owner)

    def emit(self, data: EventData) -> None:
        """One event of the session; a piece of speech right after another
        of the same part (nothing between them) joins it."""
        if not on_the_acp_loop():  # a caller on another loop: kept in order all the same
            acp_loop().call_soon_threadsafe(self.emit, data)
            return
        items = self.items
        if (
            items
            and isinstance(data, ConversationData)
            and data.part in COALESCED
            and items[-1][0] is self._emit
        ):
            last = items[-1][1][0]
            if _joinable(last, data):
                items[-1] = (
                    self._emit,
                    (last.model_copy(update={"text": f"{last.text}\n{data.text}"}),),
                )
                return
        items.append((self._emit, (data,)))
        self.courier.due(self)

    def post(self, fn: Callable[..., Any], *args: Any, now: bool = False) -> None:
        """Call `fn(*args)` on the owner's loop after everything before it;
        `now`: send it (and all that waits) without waiting for the tick."""
        if not on_the_acp_loop():
            acp_loop().call_soon_threadsafe(lambda: self.post(fn, *args, now=now))
            return
        self.items.append((fn, args))
        self.courier.due(self)
        if now:
            self.courier.ship()

    def ship(self) -> None:
        """Send everything waiting now (before a question to the owner, at a
        run's end)."""
        if on_the_acp_loop():
            self.courier.ship()


def _joinable(last: Any, data: ConversationData) -> bool:
    return (
        isinstance(last, ConversationData)
        and last.part == data.part
        and last.tool_call_id is None
        and data.tool_call_id is None
        and bool(last.text)
    )


class Courier:
    """Carries the outboxes of one owner's loop across, one hop per tick.
    Lives on the ACP loop; one per owner loop."""

    _couriers: dict[asyncio.AbstractEventLoop, Courier] = {}

    @classmethod
    def of(cls, owner: asyncio.AbstractEventLoop) -> Courier:
        with _lock:
            courier = cls._couriers.get(owner)
            if courier is None or courier.owner is not owner:
                for loop in [lp for lp in cls._couriers if lp.is_closed()]:
                    del cls._couriers[loop]
                courier = cls._couriers[owner] = Courier(owner)
            return courier

    def __init__(self, owner: asyncio.AbstractEventLoop) -> None:
        self.owner = owner
        self.inbox = Inbox(owner)
        self._due: dict[int, Outbox] = {}
        self._timer: asyncio.TimerHandle | None = None

    def due(self, outbox: Outbox) -> None:
        self._due[id(outbox)] = outbox
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(TICK_SECS, self.ship)

    def ship(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        batch: list[Item] = []
        for outbox in self._due.values():
            batch.extend(outbox.items)
            outbox.items = []
        self._due.clear()
        if batch:
            self.inbox.hand(batch)


class Inbox:
    """The owner's side of a `Courier`: what was shipped, applied on the
    owner's loop in order, `SLICE_ITEMS` per pass; between passes the loop
    runs whatever else waits (a key, a frame)."""

    def __init__(self, owner: asyncio.AbstractEventLoop) -> None:
        self.owner = owner
        self._items: deque[Item] = deque()
        self._lock = threading.Lock()  # filled on the ACP loop's thread, emptied on the owner's
        self._scheduled = False

    def hand(self, items: list[Item]) -> None:
        """From any thread: `items` after everything handed before."""
        with self._lock:
            self._items.extend(items)
            if self._scheduled:
                return
            self._scheduled = True
        try:
            self.owner.call_soon_threadsafe(self._apply)
        except RuntimeError:  # the owner's loop is closed: nobody is left to tell
            with self._lock:
                dropped, self._scheduled = len(self._items), False
                self._items.clear()
            log.debug("dropped %d ACP updates for a closed owner loop", dropped)

    def _apply(self) -> None:
        with self._lock:
            count = min(SLICE_ITEMS, len(self._items))
            part = [self._items.popleft() for _ in range(count)]
        _deliver(part)
        with self._lock:
            if not self._items:
                self._scheduled = False
                return
        self.owner.call_soon(self._apply)  # the rest after what waits on the loop now


def _deliver(items: list[Item]) -> None:
    """On the owner's loop: each item in order; one that fails is logged and
    the rest still land."""
    for fn, args in items:
        try:
            fn(*args)
        except Exception:
            log.exception("an ACP update could not be applied")
