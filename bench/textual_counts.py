"""How much work a Textual app does, counted from inside it (bench/tui.py's
children): full layouts (the compositor reflowing every widget), scroll-only
reflows, frames written, widgets that asked for a layout (by class, the
suspects), widgets that asked for a repaint, and the board's rows rendered
into strips (each a row's cells turned into text again).

`instrument(path)` patches Textual's methods in the child before the app
runs; on SIGUSR1 the child writes its counts so far to `path` (JSON, written
whole then renamed), so the bench reads them before and after a phase and
prints the difference. The counts cost a dict increment each: nothing the
timings would see.
"""

from __future__ import annotations

import json
import os
import signal
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

COUNTS: Counter[str] = Counter()


def instrument(path: Path) -> None:
    from textual.screen import Screen
    from textual.widget import Widget

    refresh_layout = Screen._refresh_layout
    compositor_refresh = Screen._compositor_refresh
    widget_refresh = Widget.refresh

    def counted_layout(self: Screen, size: Any = None, scroll: bool = False) -> None:
        full = not scroll or bool(self._layout_widgets)
        COUNTS["layouts" if full else "scroll reflows"] += 1
        refresh_layout(self, size, scroll)

    def counted_frame(self: Screen) -> None:
        COUNTS["frames"] += 1
        compositor_refresh(self)

    def counted_refresh(self: Widget, *regions: Any, **kw: Any) -> Any:
        if kw.get("layout") and not self._layout_required:
            COUNTS[f"layout asked by {type(self).__name__}"] += 1
        elif kw.get("repaint", True) and not regions:
            COUNTS[f"repaint of {type(self).__name__}"] += 1
        return widget_refresh(self, *regions, **kw)

    Screen._refresh_layout = counted_layout  # type: ignore[method-assign]
    Screen._compositor_refresh = counted_frame  # type: ignore[method-assign]
    Widget.refresh = counted_refresh  # type: ignore[method-assign]
    try:
        from corral.tui.widgets.board_table import BoardTable
    except ImportError:  # the floor app runs without corral's console
        pass
    else:
        line = BoardTable._line

        def counted_line(self: BoardTable, *args: Any) -> Any:
            COUNTS["board rows rendered"] += 1
            return line(self, *args)

        BoardTable._line = counted_line  # type: ignore[method-assign]

    def dump(_signum: int, _frame: object) -> None:
        part = path.with_suffix(".part")
        part.write_text(json.dumps(dict(COUNTS)))
        os.replace(part, path)

    signal.signal(signal.SIGUSR1, dump)

    profiling: list[Any] = []

    def toggle_profile(_signum: int, _frame: object) -> None:
        """SIGUSR2: start a cProfile of the app's thread; again: write it
        beside the counts (`<path>.pstats`), so a profile holds the measured
        windows only, not the start of 100 sessions."""
        import cProfile

        if profiling:
            profiler = profiling.pop()
            profiler.disable()
            part = path.with_suffix(".pstats-part")
            profiler.dump_stats(str(part))
            os.replace(part, path.with_suffix(".pstats"))  # whole, or not there
        else:
            profiler = cProfile.Profile()
            profiling.append(profiler)
            profiler.enable()

    signal.signal(signal.SIGUSR2, toggle_profile)


def read(
    pid: int, path: Path, wait: Callable[[float], object], timeout: float = 5.0
) -> Counter[str]:
    """Ask the child `pid` for its counts and wait for them, `wait(secs)`
    reading its terminal meanwhile (so its output never blocks it); empty
    when it does not answer in time."""
    import time

    path.unlink(missing_ok=True)
    os.kill(pid, signal.SIGUSR1)
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if path.exists():
            return Counter(json.loads(path.read_text()))
        wait(0.01)
    return Counter()


def table(
    background: Counter[str], secs: float, keyed: Counter[str], key_secs: float, keys: int
) -> list[str]:
    """Lines of `what: per second with no key, per key above that`, from the
    counts of a window of `secs` with no key and one of `key_secs` with `keys`
    keys in it."""
    lines = []
    for what in sorted(set(background) | set(keyed)):
        rate = background[what] / secs if secs else 0.0
        per_key = (keyed[what] - rate * key_secs) / keys if keys else 0.0
        lines.append(f"{what}: {rate:7.1f}/s with no key, {per_key:+6.2f} per key above that")
    return lines
