"""Live panes of live sessions: one sweep loop, one hooks watcher, one
status tracker per pane.

- One batched sweep per interval (`list-panes -a`) gives liveness and
  activity for every pane; only panes whose activity changed are captured,
  all in one call. Idle debounce is re-evaluated on the cached screen, so no
  capture is needed for it.
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
from dataclasses import dataclass, field
from pathlib import Path

from ..agents.base import AgentProfile
from ..status import AgentStatus, Question, StatusReading, StatusTracker, clean_lines, find_question
from .base import PaneBackend, PaneError, PaneGone, PaneHandle, PaneInfo, PaneSpec, Screen

log = logging.getLogger("corral.panes")

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
    version: int = 0  # bumped on every status or screen change
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    hooks_offset: int = 0
    answered_dialogs: dict[str, tuple[float, int]] = field(default_factory=dict)

    @property
    def status(self) -> StatusReading:
        return self.tracker.current

    def bump(self) -> None:
        self.version += 1
        self.changed.set()
        self.changed = asyncio.Event()


class PaneManager:
    def __init__(
        self,
        backend: PaneBackend,
        hooks_root: Path,
        *,
        interval: float = 0.5,
        on_status: Callable[[str, StatusReading], None] | None = None,
    ) -> None:
        self.backend = backend
        self.hooks_root = hooks_root
        self.interval = interval
        self.on_status = on_status
        self.records: dict[str, PaneRecord] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self.sweep_count = 0

    # -- lifecycle ------------------------------------------------------------

    async def start(self) -> None:
        self.hooks_root.mkdir(parents=True, exist_ok=True)
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._sweep_loop()), loop.create_task(self._watch_hooks())]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(BaseException):
                await task
        self._tasks = []
        await asyncio.to_thread(self.backend.close)

    # -- panes ----------------------------------------------------------------

    def hooks_file(self, session_id: str) -> Path:
        return self.hooks_root / session_id / "hooks.jsonl"

    async def spawn(self, spec: PaneSpec, profile: AgentProfile) -> PaneRecord:
        hooks = self.hooks_file(spec.session_id)
        hooks.parent.mkdir(parents=True, exist_ok=True)
        offset = hooks.stat().st_size if hooks.exists() else 0
        handle = await asyncio.to_thread(self.backend.spawn, spec)
        record = PaneRecord(
            spec.session_id,
            handle,
            profile,
            hooks,
            StatusTracker(markers=profile.markers),
            hooks_offset=offset,
        )
        self.records[spec.session_id] = record
        return record

    def adopt(self, session_id: str, handle: PaneHandle, profile: AgentProfile) -> PaneRecord:
        """Track a pane found alive after a restart (owner marker matched)."""
        hooks = self.hooks_file(session_id)
        offset = hooks.stat().st_size if hooks.exists() else 0
        record = PaneRecord(
            session_id,
            handle,
            profile,
            hooks,
            StatusTracker(markers=profile.markers),
            hooks_offset=offset,
        )
        self.records[session_id] = record
        return record

    def record(self, session_id: str) -> PaneRecord | None:
        return self.records.get(session_id)

    async def kill(self, session_id: str, timeout: float = 4.0) -> None:
        record = self.records.pop(session_id, None)
        if record is None:
            return
        with contextlib.suppress(PaneGone):
            await asyncio.to_thread(self.backend.kill, record.handle, timeout)
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
        try:
            infos = await asyncio.to_thread(self.backend.sweep)
        except PaneError as exc:
            log.warning("cannot look for the pane of %s: %s", session_id, exc)
            return False
        info = infos.get(owner)
        if info is None:
            return False
        try:
            await asyncio.to_thread(self.backend.kill, info.handle, timeout)
        except PaneGone:
            return False
        except PaneError as exc:
            log.warning("cannot stop the pane of %s: %s", session_id, exc)
            return False
        return True

    async def send_text(self, session_id: str, text: str) -> None:
        record = self._require(session_id)
        await asyncio.to_thread(self.backend.send_text, record.handle, text)

    async def send_keys(self, session_id: str, keys: list[str]) -> None:
        record = self._require(session_id)
        await asyncio.to_thread(self.backend.send_keys, record.handle, keys)

    async def choose(self, session_id: str, question: Question, answer: str) -> str:
        """Answer an on-screen question: pick the option matching `answer`
        (its number or text); free text goes to a "No, and tell …" option
        followed by the text. Returns what was done, for the event log."""
        options = list(question.options)
        wanted = answer.strip().lower()
        index = None
        if wanted.isdigit() and 1 <= int(wanted) <= len(options):
            index = int(wanted)
        else:
            for i, option in enumerate(options, 1):
                text = option.lower()
                if text == wanted or text.startswith(wanted):
                    index = i
                    break
        if index is not None:
            record = self._require(session_id)
            lines = clean_lines(record.screen.lines) if record.screen else []
            exact = re.compile("^" + re.escape(options[index - 1]) + "$")
            menu = record.profile.markers.menu
            if menu is not None and menu.find(lines) is not None:
                # one row of options, no digits: the selection is only a colour
                at = menu.selected(record.screen.ansi) if record.screen else None
                keys = menu.keys(index, at or 1)
            else:
                keys = menu_keys(lines, exact) or [str(index)]
            await self.send_keys(session_id, keys)
            return f"selected option {index}: {options[index - 1]}"
        tell = next((i for i, o in enumerate(options, 1) if o.lower().startswith("no, and")), None)
        if tell is not None:
            await self.send_keys(session_id, [str(tell)])
            await asyncio.sleep(0.3)
        await self.send_text(session_id, answer)
        return "answered in words" + (f" (after option {tell})" if tell else "")

    def _require(self, session_id: str) -> PaneRecord:
        record = self.records.get(session_id)
        if record is None:
            raise PaneGone(f"no live pane for session {session_id}")
        return record

    async def wait_change(self, session_id: str, version: int, timeout: float | None) -> int:
        """Wait until the pane's version moves past `version`; returns the new one."""
        record = self._require(session_id)
        if record.version != version:
            return record.version
        event = record.changed
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), timeout)
        return record.version

    def screen(self, session_id: str) -> Screen | None:
        record = self.records.get(session_id)
        return None if record is None else record.screen

    async def scrollback(self, session_id: str, lines: int = SCROLLBACK_LINES) -> list[str]:
        record = self._require(session_id)
        return await asyncio.to_thread(self.backend.scrollback, record.handle, lines)

    # -- the sweep --------------------------------------------------------------

    async def sweep_once(self) -> None:
        if not self.records:
            return
        infos = await asyncio.to_thread(self.backend.sweep)
        self.sweep_count += 1
        now = time.monotonic()
        to_capture: list[PaneRecord] = []
        for record in list(self.records.values()):
            info: PaneInfo | None = infos.get(record.handle.owner)
            if info is None or info.handle.pane_id != record.handle.pane_id:
                if record.alive:
                    record.alive = False
                    self._status(record, record.tracker.on_exit(None, now))
                continue
            if not info.alive:
                if record.alive:
                    record.alive, record.exit_status = False, info.exit_status
                    to_capture.append(record)  # keep its last screen
                    self._status(record, record.tracker.on_exit(info.exit_status, now))
                continue
            if info.activity != record.activity or record.screen is None:
                record.activity = info.activity
                to_capture.append(record)
            elif record.screen is not None:
                # unchanged screen: let the debounce/hold timers run on the cache
                if record.profile.dialogs:
                    await self._answer_dialogs(record, record.screen)
                self._status(record, record.tracker.on_screen(record.screen.lines, now))
        if to_capture:
            screens = await asyncio.to_thread(self.backend.capture, [r.handle for r in to_capture])
            for record in to_capture:
                screen = screens.get(record.handle.owner)
                if screen is None:
                    continue
                record.screen = screen
                record.bump()
                if record.alive:
                    await self._answer_dialogs(record, screen)
                    self._status(record, record.tracker.on_screen(screen.lines, now))

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
        now = time.monotonic()
        for dialog in record.profile.dialogs:
            if not dialog.detect.search(text):
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
                await asyncio.to_thread(self.backend.send_keys, record.handle, keys)
            log.info("answered the %s dialog of %s with %s", dialog.name, record.session_id, keys)
            break

    def _status(self, record: PaneRecord, changed: bool) -> None:
        if not changed:
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
                payload = row.get("payload")
                event = dict(payload) if isinstance(payload, dict) else {}
                event.setdefault("hook_event_name", row.get("event", ""))
                events.append(event)
        return events

    def apply_hooks(self) -> None:
        for record in list(self.records.values()):
            for event in self.read_hooks(record):
                self._status(record, record.tracker.on_hook(event))

    async def _watch_hooks(self) -> None:
        from watchfiles import awatch

        self.apply_hooks()
        async for _changes in awatch(self.hooks_root, debounce=50, step=20, force_polling=False):
            self.apply_hooks()


def is_waiting(reading: StatusReading) -> bool:
    return reading.status is AgentStatus.WAITING


CURSOR = ("❯", "›", ">")


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
