"""Live panes of live sessions: one sweep loop, one hooks watcher, one
status tracker per pane.

- One batched sweep per interval (`list-panes -a`) gives liveness and
  activity for every pane; only panes whose activity changed are captured,
  all in one call. Idle debounce is re-evaluated on the cached screen, so no
  capture is needed for it.
- The sweep, the captures and reading the screens (cleaning, classifying,
  looking for a known dialog) run in one worker thread, never on the event
  loop the console paints from: with 100 agents streaming, reading screens
  on the loop made the sweep fall behind until busy agents looked idle. The
  worker hands back `ScreenFacts` stamped with their capture time; the loop
  only folds them into each tracker. A screen whose cleaned tail did not
  change is not classified again.
- Hook files (`<state>/agents/<session>/hooks.jsonl`, appended by
  `corral hook`) are watched with watchfiles: no polling for them.
- First-run dialogs a profile knows (trust, API key) are answered by picking
  the option whose text matches — never a blind Enter.
- Listeners (the external engine, the console's terminal view) wait on a
  per-pane change counter.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from ..agents.base import AgentProfile
from ..cancelling import cancel_and_wait
from ..status import (
    AgentStatus,
    Clock,
    Question,
    ScreenFacts,
    StatusReading,
    StatusTracker,
    clean_lines,
    find_question,
)
from .answering import Landing, MenuAnswer
from .base import (
    HostDown,
    PaneBackend,
    PaneError,
    PaneGone,
    PaneHandle,
    PaneSpec,
    Screen,
    incarnation_of,
)
from .observe import Seen, Watch, observe
from .outage import HOST_WAIT, After, PasteUncertain, host_answers, judge
from .stop_mark import stopped_on_purpose

log = logging.getLogger("corral.panes")

UNTRACKED_STOP_SECS = 1.0  # SIGTERM grace for a pane made after its start was cancelled

SCROLLBACK_LINES = 2000


@dataclass
class PaneRecord:
    session_id: str
    handle: PaneHandle
    profile: AgentProfile
    hooks_file: Path
    tracker: StatusTracker
    screen: Screen | None = None
    activity: float = -1.0
    alive: bool = True
    exit_status: int | None = None
    version: int = 0  # bumped on every status or screen change (what a view repaints on)
    # bumped only when what a turn loop decides on moved (`meaning_of`): a
    # streaming screen bumps `version` every sweep, and waking every session's
    # turn loop for it was ~200 wake-ups a second with 100 panes streaming
    status_version: int = 0
    meaning: tuple[object, ...] = ()  # the `meaning_of` last announced
    waiters: list[asyncio.Future[None]] = field(default_factory=list)
    hooks_offset: int = 0
    answered_dialogs: dict[str, tuple[float, int]] = field(default_factory=dict)
    facts: ScreenFacts | None = None  # the last reading of `screen`
    unreachable: str = ""  # why its host does not answer now ("" when it does)
    stale_hooks: int = 0  # hook lines from an earlier incarnation, dropped
    backend_name: str = ""  # the backend it runs on ("": the manager's own)

    @property
    def incarnation(self) -> int | None:
        return incarnation_of(self.handle.owner)

    @property
    def status(self) -> StatusReading:
        return self.tracker.current

    def bump(self) -> None:
        """Its screen or status changed: views repaint; turn loops wake only
        when its meaning changed too (`settle`)."""
        self.version += 1
        self.settle()

    def settle(self) -> None:
        """Wake the turn loops waiting on this pane when its meaning changed."""
        meaning = meaning_of(self)
        if meaning == self.meaning:
            return
        self.meaning = meaning
        self.status_version += 1
        self.wake()

    def wake(self) -> None:
        """Wake every waiter now (its pane changed meaning, was killed or replaced)."""
        waiters, self.waiters = self.waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)


def meaning_of(record: PaneRecord) -> tuple[object, ...]:
    """What the engines' turn loops decide on: liveness, the status and its
    question, turns ended, rate-limit refusals counted, and whether its host
    answers. A screen that only scrolled changes none of these."""
    tracker = record.tracker
    reading = tracker.current
    return (
        record.alive,
        record.exit_status,
        reading.status,
        reading.question,
        tracker.turn_ends,
        tracker.limits,
        tracker.turn_at,
        record.unreachable,
    )


def tracker_for(profile: AgentProfile, clock: Clock = time.monotonic) -> StatusTracker:
    """A profile's status tracker: the quiet rule only for agents without
    hooks; its dialogs known, so a hook's question is never paired with one."""
    return StatusTracker(
        markers=profile.markers,
        quiet_secs=None if profile.hooks else profile.quiet_secs,
        dialogs=tuple(d.detect for d in profile.dialogs),
        clock=clock,
    )


class PaneManager:
    def __init__(
        self,
        backend: PaneBackend,
        hooks_root: Path,
        *,
        interval: float = 0.5,
        on_status: Callable[[str, StatusReading], None] | None = None,
        on_hook: Callable[[str, dict[str, object]], None] | None = None,
        clock: Clock = time.monotonic,
    ) -> None:
        self.backend = backend
        # what time it is for the status pipeline (sweeps, trackers, dialogs,
        # when a prompt landed): tests drive it instead of sleeping
        self.clock = clock
        # other backends by name (a remote tmux per host, `ssh:<host>`); a
        # record says which one its pane is on
        self.backends: dict[str, PaneBackend] = {}
        self.hooks_root = hooks_root
        self.interval = interval
        self.on_status = on_status
        self.on_hook = on_hook  # every hook payload (the agent's identity rides on them)
        self.records: dict[str, PaneRecord] = {}
        self._tasks: list[asyncio.Task[None]] = []
        # stopping the panes made after their start was cancelled
        self._stopping: set[asyncio.Task[None]] = set()
        self._started = False
        self._hook_watch: asyncio.Task[None] | None = None
        self._worker: ThreadPoolExecutor | None = None
        # one more worker per other backend: hosts are swept side by side,
        # so a slow or dead host never holds up the panes here or elsewhere
        self._host_workers: dict[str, ThreadPoolExecutor] = {}
        self.sweep_count = 0
        self.host_wait = HOST_WAIT  # how long a paste waits for its pane's host
        # told the session id when a local pane is about to start or is taken
        # over (before its agent runs), and when it is stopped: the owner's
        # per-session agent sockets follow them
        self.on_track: list[Callable[[str], None]] = []
        self.on_untrack: list[Callable[[str], None]] = []

    # -- lifecycle ------------------------------------------------------------

    async def start(self) -> None:
        self.hooks_root.mkdir(parents=True, exist_ok=True)
        self._tasks = [asyncio.get_running_loop().create_task(self._sweep_loop())]
        self._started = True
        if self.records:
            self._watch_hooks_now()

    def _watch_hooks_now(self) -> None:
        """Watch the hooks files from the first tracked pane on: the watcher
        (watchfiles' native notifier, anyio and a thread) costs an idle owner
        memory while there is no hook to read."""
        if self._started and self._hook_watch is None:
            self._hook_watch = asyncio.get_running_loop().create_task(self._watch_hooks())
            self._tasks.append(self._hook_watch)

    async def stop(self) -> None:
        self._started = False
        await cancel_and_wait(self._tasks, what="the pane sweep")
        self._tasks = []
        self._hook_watch = None
        if self._worker is not None:
            self._worker.shutdown(wait=False, cancel_futures=True)
            self._worker = None
        for worker in self._host_workers.values():
            worker.shutdown(wait=False, cancel_futures=True)
        self._host_workers = {}
        await asyncio.to_thread(self.backend.close)
        for other in self.backends.values():
            await asyncio.to_thread(other.close)

    def add_backend(self, backend: PaneBackend) -> None:
        """Another place panes run (a host's remote tmux), by its name."""
        self.backends[backend.name] = backend

    def backend_named(self, name: str | None) -> PaneBackend:
        """The backend called `name` (None or unknown: the manager's own)."""
        return self.backends.get(name or "", self.backend)

    def backend_of(self, session_id: str) -> PaneBackend:
        """The backend the session's pane runs on."""
        record = self.records.get(session_id)
        return self.backend_named(record.backend_name if record else None)

    # -- panes ----------------------------------------------------------------

    def hooks_file(self, session_id: str) -> Path:
        return self.hooks_root / session_id / "hooks.jsonl"

    def stopped_on_purpose(self, session_id: str) -> bool:
        """Whether the session's pane was stopped by `corral panes stop` (not a crash)."""
        record = self.records.get(session_id)
        return record is not None and stopped_on_purpose(
            self.hooks_root, session_id, record.handle.owner
        )

    async def spawn(
        self, spec: PaneSpec, profile: AgentProfile, *, backend: str | None = None
    ) -> PaneRecord:
        """Start a pane, on the backend called `backend` (default: the manager's own)."""
        hooks = self.hooks_file(spec.session_id)
        hooks.parent.mkdir(parents=True, exist_ok=True)
        offset = hooks.stat().st_size if hooks.exists() else 0
        if backend not in self.backends:
            self._tell(self.on_track, spec.session_id)
        where = self.backend_named(backend)
        making = asyncio.ensure_future(asyncio.to_thread(where.spawn, spec))
        try:
            handle = await asyncio.shield(making)
        except asyncio.CancelledError:
            # the thread goes on and may still make the pane: nothing would
            # track it, so it is stopped once made (a cancelled start never
            # leaves an agent running for a session that is gone)
            making.add_done_callback(lambda made: self._stop_untracked(where, made))
            raise
        record = PaneRecord(
            spec.session_id,
            handle,
            profile,
            hooks,
            tracker_for(profile, self.clock),
            hooks_offset=offset,
            backend_name=backend if backend in self.backends else "",
        )
        self._replace(spec.session_id, record)
        self._mirror_hooks(record)
        self._watch_hooks_now()
        return record

    def _stop_untracked(self, where: PaneBackend, made: asyncio.Future[PaneHandle]) -> None:
        """Stop the pane a cancelled `spawn` made after all."""
        if made.cancelled() or made.exception() is not None:
            return
        handle = made.result()
        log.warning("stopping the pane %s, started after its start was cancelled", handle.owner)

        async def stop() -> None:
            try:
                await asyncio.to_thread(where.kill, handle, UNTRACKED_STOP_SECS)
            except Exception as exc:  # said, never silent: the pane may still run
                log.warning("could not stop the pane %s: %s", handle.owner, exc)

        task = asyncio.get_running_loop().create_task(stop())
        self._stopping.add(task)
        task.add_done_callback(self._stopping.discard)

    def _mirror_hooks(self, record: PaneRecord) -> None:
        """A backend on another host brings the agent's hooks file here with
        each sweep (`mirror_hooks`); the local copy is watched as any other."""
        mirror = getattr(self.backend_named(record.backend_name), "mirror_hooks", None)
        if mirror is not None:
            mirror(record.session_id, record.hooks_file)

    def adopt(
        self,
        session_id: str,
        handle: PaneHandle,
        profile: AgentProfile,
        *,
        backend: str | None = None,
    ) -> PaneRecord:
        """Track a pane found alive after a restart (owner marker matched)."""
        hooks = self.hooks_file(session_id)
        offset = hooks.stat().st_size if hooks.exists() else 0
        record = PaneRecord(
            session_id,
            handle,
            profile,
            hooks,
            tracker_for(profile, self.clock),
            hooks_offset=offset,
            backend_name=backend if backend in self.backends else "",
        )
        self._replace(session_id, record)
        self._mirror_hooks(record)
        self._watch_hooks_now()
        if not record.backend_name:
            self._tell(self.on_track, session_id)
        return record

    def _replace(self, session_id: str, record: PaneRecord) -> None:
        """Track `record` for the session; whoever waited on the pane it
        replaces wakes (that record will never change again)."""
        before = self.records.get(session_id)
        self.records[session_id] = record
        record.meaning = meaning_of(record)
        if before is not None and before is not record:
            before.status_version += 1
            before.wake()

    def _tell(self, listeners: list[Callable[[str], None]], session_id: str) -> None:
        for listener in listeners:
            try:
                listener(session_id)
            except Exception:
                log.exception("panes: a pane listener failed for %s", session_id)

    def local_roots(self) -> dict[int, str]:
        """{root pid of each live pane on this machine: its session id}: whoever
        descends from one is that session's agent."""
        return {
            record.handle.pid: sid
            for sid, record in self.records.items()
            if not record.backend_name and record.alive and record.handle.pid
        }

    def record(self, session_id: str) -> PaneRecord | None:
        return self.records.get(session_id)

    async def kill(self, session_id: str, timeout: float = 4.0) -> None:
        record = self.records.pop(session_id, None)
        if record is None:
            return
        if not record.backend_name:
            self._tell(self.on_untrack, session_id)
        backend = self.backend_named(record.backend_name)
        unmirror = getattr(backend, "unmirror", None)
        if unmirror is not None:
            unmirror(session_id)
        with contextlib.suppress(PaneGone):
            await asyncio.to_thread(backend.kill, record.handle, timeout)
        record.alive = False
        record.bump()

    async def stop_agent(
        self, session_id: str, pane: dict[str, object] | None = None, timeout: float = 4.0
    ) -> bool:
        """Stop a session's agent whoever started it: the pane this manager
        tracks, else the one its stored `pane` names (found by owner marker;
        a pane another corral started, or one left by a previous owner).
        Process group first, then the window. True when a pane was stopped."""
        if session_id in self.records:
            await self.kill(session_id, timeout)
            return True
        owner = (pane or {}).get("owner")
        if not isinstance(owner, str) or not owner:
            return False
        where = (pane or {}).get("backend")
        backend = self.backend_named(where if isinstance(where, str) else None)
        try:
            infos = await asyncio.to_thread(backend.sweep)
        except PaneError as exc:
            log.warning("cannot look for the pane of %s: %s", session_id, exc)
            return False
        info = infos.get(owner)
        if info is None:
            return False
        try:
            await asyncio.to_thread(backend.kill, info.handle, timeout)
        except PaneGone:
            return False
        except PaneError as exc:
            log.warning("cannot stop the pane of %s: %s", session_id, exc)
            return False
        return True

    async def send_text(
        self, session_id: str, text: str, *, incarnation: int | None = None
    ) -> None:
        """Paste `text` (confirmed on screen, then Enter). With `incarnation`,
        only into that pane: a delivery meant for a replaced agent is refused.
        A pane on a host that stops answering midway is waited for, then
        looked at before anything is sent again (see `outage`)."""
        record = self._require(session_id)
        if incarnation is not None and record.incarnation != incarnation:
            raise PaneGone(
                f"the pane of {session_id} was replaced (incarnation {record.incarnation}, "
                f"not {incarnation})"
            )
        backend = self.backend_of(session_id)
        if not record.backend_name:
            await asyncio.to_thread(backend.send_text, record.handle, text)
            return
        await self._send_to_host(record, backend, text)

    async def _send_to_host(self, record: PaneRecord, backend: PaneBackend, text: str) -> None:
        handle = record.handle
        before: Screen | None = None
        enter_only = False
        for _ in range(5):
            try:
                if enter_only:
                    await asyncio.to_thread(backend.send_keys, handle, ["Enter"])
                else:
                    before = None
                    screens = await asyncio.to_thread(backend.capture, [handle])
                    before = screens.get(handle.owner)
                    await asyncio.to_thread(backend.send_text, handle, text)
                return
            except HostDown as exc:
                log.info("the host of %s stopped answering during a paste: %s", handle.owner, exc)
                after = await host_answers(backend.capture, handle, str(exc), wait=self.host_wait)
            if before is None:
                continue  # nothing was sent yet
            verdict = judge(text, before, after)
            log.info("after the host of %s answered again, the paste: %s", handle.owner, verdict)
            if verdict is After.LANDED:
                return
            if verdict is After.PRESS_ENTER:
                enter_only = True
            elif verdict is not After.RESEND or enter_only:
                break
        raise PasteUncertain(
            f"the host of pane {handle.pane_id} stopped answering while the text was being "
            "pasted, and the pane does not show whether it landed, so it was not pasted again"
        )

    def prompted(self, session_id: str, at: float) -> None:
        """A prompt corral pasted landed at `at` (Enter pressed): the agent
        works on it from then, and only screens captured later can say its
        turn ended."""
        record = self.records.get(session_id)
        if record is not None and record.alive:
            self._status(record, record.tracker.on_prompt(at))

    async def send_keys(self, session_id: str, keys: list[str]) -> None:
        """Press `keys`. Keys cannot be seen on screen: when the pane's host
        stops answering meanwhile, it is waited for and the keys are reported
        uncertain, never pressed twice."""
        record = self._require(session_id)
        backend = self.backend_of(session_id)
        try:
            await asyncio.to_thread(backend.send_keys, record.handle, keys)
        except HostDown as exc:
            await host_answers(backend.capture, record.handle, str(exc), wait=self.host_wait)
            raise PasteUncertain(
                f"the host stopped answering while keys {' '.join(keys)} were sent; "
                "they were not sent again"
            ) from exc

    async def choose(self, session_id: str, question: Question, answer: str) -> Landing:
        """Answer an on-screen question and say whether the answer landed:
        an option (by number or text) is selected and checked on screen (see
        `answering`); free text goes to a "No, and tell …" option followed by
        the text, or straight to a question that has no options, and is
        checked the same way (the question must leave the screen). Words that
        match no option of a menu are not typed into it."""
        record = self._require(session_id)
        try:
            return await self._choose(record, question, answer)
        except (HostDown, PasteUncertain) as exc:
            if isinstance(exc, HostDown):
                backend = self.backend_of(session_id)
                await host_answers(backend.capture, record.handle, str(exc), wait=self.host_wait)
            await self._fresh_sweep()  # the question's state as the host shows it now
            return Landing(
                False,
                f"its host stopped answering while the answer was sent ({exc}); it is not "
                "sent again unless the question is still on the screen",
            )

    async def _fresh_sweep(self, timeout: float = 10.0) -> None:
        """Until a sweep that started after now has finished."""
        deadline = time.monotonic() + timeout
        start = self.sweep_count
        while self.sweep_count < start + 2 and time.monotonic() < deadline:
            await asyncio.sleep(self.interval / 2)

    async def _choose(self, record: PaneRecord, question: Question, answer: str) -> Landing:
        session_id = record.session_id
        options = list(question.options)
        index = match_option(options, answer)
        if index is not None:
            answering = MenuAnswer(
                self.backend_of(session_id), record.handle, record.profile.markers
            )
            lines = clean_lines(record.screen.lines) if record.screen else []
            menu = record.profile.markers.menu
            if menu is not None and menu.find(lines) is not None:
                # one row of options, no digits: the selection is only a colour
                at = menu.selected(record.screen.ansi) if record.screen else None
                await self.send_keys(session_id, menu.keys(index, at or 1))
                return await answering.confirm(question, f"option {index}: {options[index - 1]}")
            return await answering.select(question, index)
        tell = next((i for i, o in enumerate(options, 1) if o.lower().startswith("no, and")), None)
        if options and tell is None:
            listed = ", ".join(f"{i}. {o}" for i, o in enumerate(options, 1))
            return Landing(False, f"{answer!r} is not one of the options ({listed})")
        answering = MenuAnswer(self.backend_of(session_id), record.handle, record.profile.markers)
        return await answering.words(question, answer, tell)

    def _require(self, session_id: str) -> PaneRecord:
        record = self.records.get(session_id)
        if record is None:
            raise PaneGone(f"no live pane for session {session_id}")
        return record

    async def wait_change(self, session_id: str, version: int, timeout: float | None) -> int:
        """Wait until the pane's meaning (`meaning_of`: liveness, status,
        question, turns, refusals, host) moves past `version`
        (`PaneRecord.status_version`), at most `timeout` seconds; returns the
        version now. A screen that only scrolled does not wake it. One future
        and one timer a wait (no task, no `wait_for`): a hundred turn loops
        wait here at once."""
        record = self._require(session_id)
        if record.status_version != version:
            return record.status_version
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        record.waiters.append(waiter)
        timer = None if timeout is None else loop.call_later(timeout, _time_up, waiter)
        try:
            await waiter
        finally:
            if timer is not None:
                timer.cancel()
            if waiter in record.waiters:
                record.waiters.remove(waiter)
        return record.status_version

    def screen(self, session_id: str) -> Screen | None:
        record = self.records.get(session_id)
        return None if record is None else record.screen

    async def scrollback(self, session_id: str, lines: int = SCROLLBACK_LINES) -> list[str]:
        record = self._require(session_id)
        return await asyncio.to_thread(self.backend_of(session_id).scrollback, record.handle, lines)

    # -- the sweep --------------------------------------------------------------

    async def sweep_once(self) -> None:
        """One sweep: everything blocking or costly runs in the worker
        (`observe.observe`); folding its findings into the trackers runs here."""
        if not self.records:
            return
        groups: dict[str, list[PaneRecord]] = {}
        for r in self.records.values():
            groups.setdefault(r.backend_name, []).append(r)
        if self._worker is None:
            self._worker = ThreadPoolExecutor(1, thread_name_prefix="corral-sweep")
        swept = await asyncio.gather(
            *(self._sweep_group(name, records) for name, records in groups.items())
        )
        if any(swept):
            self.sweep_count += 1

    def _worker_for(self, name: str) -> ThreadPoolExecutor:
        if not name:
            if self._worker is None:
                self._worker = ThreadPoolExecutor(1, thread_name_prefix="corral-sweep")
            return self._worker
        worker = self._host_workers.get(name)
        if worker is None:
            worker = ThreadPoolExecutor(1, thread_name_prefix=f"corral-sweep-{name}")
            self._host_workers[name] = worker
        return worker

    async def read_now(self, session_id: str) -> None:
        """Capture the pane's screen now, whatever its activity says, and fold
        it into its tracker. A turn's end told by a hook can come before the
        sweep read what the agent printed last (the 429 line a refused
        request left just before its Stop hook): the engine reads the screen
        once more before it settles the turn. It runs on the sweep's worker,
        after any sweep already under way there; a host that does not answer
        (or any failure to read) leaves the tracker as it was."""
        record = self.records.get(session_id)
        if record is None or not record.alive:
            return
        watch = Watch(
            record.session_id,
            record.handle,
            record.alive,
            record.activity,
            None,  # no screen known: the worker captures one
            record.facts,
            record.profile.markers,
            record.profile.dialogs,
        )
        loop = asyncio.get_running_loop()
        try:
            seen = await loop.run_in_executor(
                self._worker_for(record.backend_name),
                observe,
                self.backend_named(record.backend_name),
                [watch],
                self.clock,
            )
        except Exception as exc:  # a read that fails leaves the turn to the sweep's reading
            log.info("could not read the screen of %s now: %s", session_id, exc)
            return
        for item in seen:
            if self.records.get(session_id) is record and record.handle == item.watch.handle:
                await self._fold(record, item)

    async def _sweep_group(self, name: str, records: list[PaneRecord]) -> bool:
        """Sweep the panes of one backend; False when its host did not answer."""
        watches = [
            Watch(
                r.session_id,
                r.handle,
                r.alive,
                r.activity,
                r.screen,
                r.facts,
                r.profile.markers,
                r.profile.dialogs,
            )
            for r in records
        ]
        backend = self.backend_named(name)
        loop = asyncio.get_running_loop()
        try:
            seen = await loop.run_in_executor(
                self._worker_for(name), observe, backend, watches, self.clock
            )
        except HostDown as exc:
            # the panes may well run on: not an exit, and no reading at all (a
            # frozen screen must not turn into "idle" or "needs you")
            self._host_state(str(exc), records)
            return False
        self._host_state("", records)
        for item in seen:
            record = self.records.get(item.watch.session_id)
            if record is None or record.handle != item.watch.handle:
                continue  # killed or replaced while the worker looked
            await self._fold(record, item)
        return True

    def _host_state(self, reason: str, records: list[PaneRecord] | None = None) -> None:
        """Mark panes (default: every pane) as on an unreachable host (reason)
        or reachable (""). The board hears "unreachable" while it lasts, then
        the tracker's own reading again; the tracker itself is not touched
        (nothing was read)."""
        for record in self.records.values() if records is None else records:
            if record.unreachable == reason:
                continue
            record.unreachable = reason
            record.bump()
            if self.on_status is None:
                continue
            if reason:
                reading = StatusReading(AgentStatus.UNREACHABLE, reason, source="host")
            else:
                reading = record.tracker.current
            self.on_status(record.session_id, reading)

    def unreachable(self, session_id: str) -> str:
        """Why the session's host does not answer now; "" when it does."""
        record = self.records.get(session_id)
        return record.unreachable if record is not None else ""

    async def _fold(self, record: PaneRecord, item: Seen) -> None:
        """Apply one pane's sweep findings (on the loop: cheap state only)."""
        if item.gone:
            if record.alive:
                record.alive = False
                self._status(record, record.tracker.on_exit(None, item.now))
            return
        if item.died:
            if record.alive:
                record.alive, record.exit_status = False, item.exit_status
                if item.screen is not None:
                    record.screen, record.facts = item.screen, item.facts
                    record.bump()
                self._status(record, record.tracker.on_exit(item.exit_status, item.now))
            return
        if item.activity is not None:
            record.activity = item.activity
        if item.screen is not None:
            record.screen, record.facts = item.screen, item.facts
            record.bump()
        if item.facts is None or record.screen is None or not record.alive:
            return
        if item.dialog:
            await self._answer_dialogs(record, record.screen)
        # a fresh capture counts at its capture time, a cached one at the sweep's
        now = item.facts.at if item.screen is not None else item.now
        self._status(record, record.tracker.on_facts(item.facts, now))

    async def _sweep_loop(self) -> None:
        while True:
            try:
                await self.sweep_once()
            except asyncio.CancelledError:
                raise
            except Exception:  # a sweep must never die for good
                log.exception("pane sweep failed")
            await asyncio.sleep(self.interval)

    async def _answer_dialogs(self, record: PaneRecord, screen: Screen) -> None:
        """Answer a known first-run dialog by the option's text: a digit for
        numbered menus, else arrow keys from the cursor (❯/›) to the option,
        then Enter. Never a blind Enter."""
        tail = clean_lines(screen.lines)
        text = "\n".join(tail)
        now = self.clock()
        for dialog in record.profile.dialogs:
            if dialog.choose is None or not dialog.detect.search(text):
                continue
            # an answer sent before the program reads keys is lost: if the same
            # dialog is still up a little later, answer it again (a few times)
            last, tries = record.answered_dialogs.get(dialog.name, (0.0, 0))
            if tries >= 5 or now - last < 2.0:
                continue
            keys = menu_keys(tail, dialog.choose)
            if keys is None:
                continue
            record.answered_dialogs[dialog.name] = (now, tries + 1)
            with contextlib.suppress(PaneGone):
                await asyncio.to_thread(
                    self.backend_of(record.session_id).send_keys, record.handle, keys
                )
            log.info("answered the %s dialog of %s with %s", dialog.name, record.session_id, keys)
            break

    def _status(self, record: PaneRecord, changed: bool) -> None:
        if not changed:
            # no new reading, but a refusal counted or a prompt's turn begun
            # may still be news to a turn loop
            record.settle()
            return
        record.bump()
        if self.on_status is not None:
            self.on_status(record.session_id, record.status)

    # -- hooks ------------------------------------------------------------------

    def read_hooks(self, record: PaneRecord) -> list[dict[str, object]]:
        path = record.hooks_file
        if not path.exists():
            return []
        with open(path, "rb") as fh:
            fh.seek(record.hooks_offset)
            data = fh.read()
        complete = data.rfind(b"\n") + 1
        record.hooks_offset += complete
        events: list[dict[str, object]] = []
        for line in data[:complete].splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if isinstance(row, dict):
                sender = row.get("incarnation")
                if isinstance(sender, int) and sender != record.incarnation:
                    record.stale_hooks += 1  # meant for a pane that was replaced
                    log.info("dropped a hook line of %s from incarnation %s", path, sender)
                    continue
                payload = row.get("payload")
                event = dict(payload) if isinstance(payload, dict) else {}
                event.setdefault("hook_event_name", row.get("event", ""))
                events.append(event)
        return events

    def apply_hooks(self) -> None:
        for record in list(self.records.values()):
            for event in self.read_hooks(record):
                if self.on_hook is not None:
                    self.on_hook(record.session_id, event)
                self._status(record, record.tracker.on_hook(event))

    async def _watch_hooks(self) -> None:
        from watchfiles import awatch

        self.apply_hooks()
        async for _changes in awatch(self.hooks_root, debounce=50, step=20, force_polling=False):
            self.apply_hooks()


def _time_up(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def match_option(options: list[str], answer: str) -> int | None:
    """The 1-based option an answer names: its number, its exact text, or
    the start of its text (case-insensitive)."""
    wanted = answer.strip().lower()
    if wanted.isdigit() and 1 <= int(wanted) <= len(options):
        return int(wanted)
    if not wanted:
        return None
    for i, option in enumerate(options, 1):
        if option.lower() == wanted:
            return i
    for i, option in enumerate(options, 1):
        if option.lower().startswith(wanted):
            return i
    return None


def is_waiting(reading: StatusReading) -> bool:
    return reading.status is AgentStatus.WAITING


CURSOR = ("❯", "›", ">", "●")  # ● is Gemini CLI's


def menu_keys(lines: list[str], choose: re.Pattern[str]) -> list[str] | None:
    """Keys that select the option matching `choose` in the menu on screen:
    arrows from the cursor (❯/›) to the option, then Enter — which every CLI
    accepts; a digit only when no cursor is drawn. Never a blind Enter."""
    target = cursor = None
    for i, line in enumerate(lines):
        stripped = line.strip()
        marked = stripped[:1] in CURSOR
        text = stripped[1:].strip() if marked else stripped
        text = re.sub(r"^\d{1,2}[.)]\s+", "", text)
        if marked:
            cursor = i
        if choose.search(text):
            target = i
    if target is not None and cursor is not None and abs(target - cursor) <= 8:
        step = "Down" if target > cursor else "Up"
        return [step] * abs(target - cursor) + ["Enter"]
    question = find_question(lines)
    if question is not None:
        for i, option in enumerate(question.options, 1):
            if choose.search(option):
                return [str(i)]
    return None
