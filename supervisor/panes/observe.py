"""The worker thread's half of the pane sweep: list every pane, capture the
ones whose activity changed, and read each screen into `ScreenFacts`.

It runs off the event loop (the console paints from that loop) on snapshots
of the records (`Watch`), and returns what it found (`Seen`) for the loop to
fold into the trackers. Reading is incremental: a recaptured screen whose text
and cursor did not change keeps its reading, and dialogs are looked for only
for profiles that answer some.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

from ..agents.base import Dialog
from ..status import Clock, Markers, ScreenFacts, read_screen
from .base import PaneBackend, PaneHandle, PaneInfo, Screen


@dataclass(frozen=True)
class Watch:
    """What the sweep's worker needs to know about one pane: a snapshot taken
    on the loop, so the worker never reads a record the loop is changing."""

    session_id: str
    handle: PaneHandle
    alive: bool
    activity: float
    screen: Screen | None
    facts: ScreenFacts | None
    markers: Markers
    dialogs: tuple[Dialog, ...]


@dataclass
class Seen:
    """One pane as one sweep found it, folded into its record on the loop."""

    watch: Watch
    now: float  # when the sweep ran (the time a re-check of a cached screen counts for)
    gone: bool = False
    died: bool = False
    exit_status: int | None = None
    activity: float | None = None  # set when it changed
    screen: Screen | None = None  # a fresh capture
    facts: ScreenFacts | None = None
    dialog: bool = False  # a dialog the profile answers is on screen


def cursor_after(screen: Screen) -> bool | None:
    """Whether the cursor sits right after the last non-blank line's text
    (where a prompt leaves it); None when the screen has no lines."""
    row = len(screen.lines) - 1
    while row >= 0 and not screen.lines[row].strip():
        row -= 1
    if row < 0:
        return None
    return screen.cursor_y == row and screen.cursor_x >= len(screen.lines[row].rstrip())


def same_text(before: Screen | None, now: Screen) -> bool:
    return (
        before is not None
        and (before.cursor_x, before.cursor_y) == (now.cursor_x, now.cursor_y)
        and before.lines == now.lines
    )


def dialog_on(tail: tuple[str, ...], dialogs: tuple[Dialog, ...]) -> bool:
    if not dialogs:
        return False
    text = "\n".join(tail)
    return any(d.detect.search(text) for d in dialogs)


def observe(
    backend: PaneBackend, watches: list[Watch], clock: Clock = time.monotonic
) -> list[Seen]:
    """The worker's half of a sweep: one `list-panes -a`, one capture of
    the panes whose activity changed, and a reading of each screen, timed by
    `clock`. Blocking; never touches a record."""
    now = clock()
    infos = backend.sweep()
    seen: list[Seen] = []
    to_capture: list[Seen] = []
    for watch in watches:
        item = Seen(watch, now)
        seen.append(item)
        info: PaneInfo | None = infos.get(watch.handle.owner)
        if info is None or info.handle.pane_id != watch.handle.pane_id:
            item.gone = True
        elif not info.alive:
            item.died, item.exit_status = True, info.exit_status
            if watch.alive:
                to_capture.append(item)  # keep its last screen
        elif info.activity != watch.activity or watch.screen is None:
            item.activity = info.activity
            to_capture.append(item)
        elif watch.facts is not None:
            # no output since the last capture: the cached reading holds now
            item.facts = watch.facts
            item.dialog = dialog_on(watch.facts.tail, watch.dialogs)
    if to_capture:
        at = clock()
        screens = backend.capture([i.watch.handle for i in to_capture])
        for item in to_capture:
            time.sleep(0)  # let the loop's thread take the GIL between screens
            screen = screens.get(item.watch.handle.owner)
            if screen is None:
                continue
            item.screen = screen
            previous, before = item.watch.facts, item.watch.screen
            if previous is not None and same_text(before, screen):
                item.facts = replace(previous, at=at)  # recaptured, unchanged: no reading
            else:
                item.facts = read_screen(
                    screen.lines,
                    item.watch.markers,
                    at,
                    cursor_after=cursor_after(screen),
                    previous=previous,
                )
            item.dialog = dialog_on(item.facts.tail, item.watch.dialogs)
    return seen
