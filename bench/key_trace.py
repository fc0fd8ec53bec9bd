"""Where a slow key's time goes (`bench/status.py --acp-console --trace`).

The child (the console) notes, on the same clock as the bench
(CLOCK_MONOTONIC: `time.monotonic` there, `time.perf_counter` here), when a
key reached Textual's input thread, when the app's loop handled it, every
frame it composed (start, end) and every ACP batch it applied (start, end,
items). The bench notes when it sent each key, when the chunk that showed it
was read, and how long its own terminal emulator (pyte) parsed meanwhile.
`report` lines them up for the slowest keys: input thread → loop → frame →
read, and what the loop did in between (frames, batches), so a tail key is
put down to the console's loop, its threads' turns, or the bench's own
parsing, not guessed."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

TRACE_ENV = "CORRAL_BENCH_ACP_TRACE"  # the child writes its notes here at the end

NOTES: dict[str, list[Any]] = {"in": [], "loop": [], "frames": [], "batches": []}
# bench side: (sent, its repaint arrived, seen after the bench's parsing, parse secs)
SENT: list[tuple[float, float, float, float]] = []


def instrument_child() -> None:
    """Patch Textual and the ACP courier's delivery in the console's process."""
    from textual import events
    from textual.app import App
    from textual.driver import Driver
    from textual.screen import Screen

    from corral.supervisor.acp import loop as acp_loop

    process_message = Driver.process_message

    def noted_message(self: Driver, message: Any) -> None:
        if isinstance(message, events.Key):
            NOTES["in"].append(time.monotonic())
        process_message(self, message)

    on_event = App.on_event

    async def noted_event(self: App[Any], event: events.Event) -> None:
        if isinstance(event, events.Key):
            NOTES["loop"].append(time.monotonic())
        await on_event(self, event)

    compositor_refresh = Screen._compositor_refresh

    def noted_frame(self: Screen[Any]) -> None:
        t = time.monotonic()
        compositor_refresh(self)
        NOTES["frames"].append((t, time.monotonic()))

    deliver = acp_loop._deliver

    def noted_deliver(batch: list[Any]) -> None:
        t = time.monotonic()
        deliver(batch)
        NOTES["batches"].append((t, time.monotonic(), len(batch)))

    Driver.process_message = noted_message  # type: ignore[method-assign]
    App.on_event = noted_event  # type: ignore[method-assign]
    Screen._compositor_refresh = noted_frame  # type: ignore[method-assign]
    acp_loop._deliver = noted_deliver


def write_child(path: str) -> None:
    Path(path).write_text(json.dumps(NOTES))


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))] if ordered else 0.0


def report(child_path: Path, worst: int = 6) -> list[str]:
    """Lines: the loop's blocked time per batch and per frame, then the slowest
    keys split into their hops."""
    notes = json.loads(child_path.read_text())
    frames = [(a, b) for a, b in notes["frames"]]
    batches = [(a, b, n) for a, b, n in notes["batches"]]
    lines = []
    if batches:
        ms = [(b - a) * 1000 for a, b, _ in batches]
        items = [n for _, _, n in batches]
        lines.append(
            f"ACP batches applied on the console's loop: {len(ms)}, median {_pct(ms, 50):.1f} ms, "
            f"p95 {_pct(ms, 95):.1f} ms, max {max(ms):.1f} ms ({_pct(items, 50):.0f} items median)"
        )
    if frames:
        ms = [(b - a) * 1000 for a, b in frames]
        lines.append(
            f"frames composed: {len(ms)}, median {_pct(ms, 50):.1f} ms, p95 {_pct(ms, 95):.1f} ms,"
            f" max {max(ms):.1f} ms"
        )
    ins, loops = notes["in"], notes["loop"]
    keyed = []
    for sent, arrived, _seen, parse in SENT:
        t_in = next((t for t in ins if t >= sent - 0.0005), None)
        t_loop = next((t for t in loops if t_in is not None and t >= t_in), None)
        t_frame = next((b for a, b in frames if t_loop is not None and a >= t_loop), None)
        keyed.append((arrived - sent, sent, t_in, t_loop, t_frame, arrived, parse))
    keyed.sort(key=lambda k: -k[0])
    for gap, sent, t_in, t_loop, t_frame, arrived, parse in keyed[:worst]:
        if t_in is None or t_loop is None or t_frame is None:
            lines.append(f"key {gap * 1000:.1f} ms: not traced in the child")
            continue
        if gap >= 1.0:  # its repaint never seen within the second: no arrival to split
            arrived = float("nan")
        busy = [
            (min(b, t_frame) - max(a, t_in)) * 1000 for a, b in frames if b > t_in and a < t_frame
        ]
        applied = [
            (min(b, t_frame) - max(a, t_in)) * 1000
            for a, b, _n in batches
            if b > t_in and a < t_frame
        ]
        lines.append(
            f"key {gap * 1000:6.1f} ms: pty→input thread {(t_in - sent) * 1000:5.1f}, →loop "
            f"{(t_loop - t_in) * 1000:5.1f}, →its frame composed {(t_frame - t_loop) * 1000:5.1f}, "
            f"→at the pty {(arrived - t_frame) * 1000:5.1f} (bench parsing meanwhile "
            f"{parse * 1000:.1f}); the loop in frames {sum(busy):.1f} ({len(busy)}), "
            f"in ACP batches {sum(applied):.1f} ({len(applied)})"
        )
    return lines
