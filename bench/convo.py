"""Benchmark: the ACP conversation view of a 5,000-event session opens in
≤ 200 ms (issue 45).

In process, under Textual's pilot at 200×50 (no pty: what is timed is the
console's own work, not a terminal's): a session of --events typed
conversation events (a prompt, then turns of two thought pieces, a
markdown message, a tool call and its update with output, and a plan every
tenth turn, as the ACP client journals them) is served by a stand-in owner
through a real `Subscription`. The clock runs from pushing the
conversation screen until its view is mounted, scrolled to the tail, and
the frame after that is painted (`pilot.wait_for_scheduled_animations` and
one refresh). Median and worst over --runs runs; each run a fresh app.
The floor, each run, under the same load: a bare screen of what any
screen with a prompt has (a `Static`, a `TextArea`, a `Footer`) pushed and
painted the same way; the ratio is printed (on a shared, loaded machine the
absolute figure says more about the load than about the view).

    .venv/bin/python bench/convo.py [--events 5000] [--runs 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `tests` (its stand-in owner)

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Footer, Static, TextArea

from corral.tui.screens.conversation import ConversationScreen
from corral.tui.widgets.conversation import ConversationView
from tests.tui.convo_owner import SID, ConvoApp, ConvoOwner, said

BUDGET_MS = 200.0


def session(events: int) -> list[Any]:
    parts: list[Any] = [said("prompt", "Fix the parser\n" + "the task, in words. " * 20)]
    turn = 0
    while len(parts) < events:
        parts += [
            said("thought", f"turn {turn}: I should look at parser.py first"),
            said("thought", f"turn {turn}: then change the loop"),
            said(
                "message",
                f"## Step {turn}\nI changed **parser.py**: the loop now stops at `end`.\n\n"
                "- one\n- two\n\n```python\nx = 1\n```",
            ),
            said(
                "tool_call",
                "$ pytest -q tests/test_parser.py",
                tool_call_id=f"t{turn}",
                title="Run the parser tests",
                tool_kind="execute",
                status="pending",
            ),
            said(
                "tool_update",
                tool_call_id=f"t{turn}",
                status="completed",
                output="....\n4 passed in 0.1s\n",
            ),
        ]
        if turn % 10 == 0:
            parts.append(said("plan", "[completed] read\n[in_progress] fix\n[pending] test"))
        turn += 1
    return parts[:events]


class _Host(ConvoApp):
    """The app without the screen pushed at mount: the bench pushes it."""

    def compose(self) -> ComposeResult:
        yield Static("board")

    def on_mount(self) -> None:
        pass


class _Floor(Screen[None]):
    def compose(self) -> ComposeResult:
        yield Static("floor")
        yield TextArea()
        yield Footer()


async def one_run(events: list[Any], floor: bool = False) -> float:
    app = _Host(ConvoOwner(events))
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause()
        start = time.perf_counter()
        app.push_screen(_Floor() if floor else ConversationScreen(SID))
        while not floor:
            views = app.screen.query(ConversationView)
            if views and views.first().views and views.first().is_vertical_scroll_end:
                break
            await asyncio.sleep(0.001)
        await pilot.wait_for_scheduled_animations()
        await pilot.pause()
        return (time.perf_counter() - start) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    events = session(args.events)
    times, floors = [], []
    for _ in range(args.runs):
        times.append(asyncio.run(one_run(events)))
        floors.append(asyncio.run(one_run([], floor=True)))
    median, floor = statistics.median(times), statistics.median(floors)
    verdict = "within" if median <= BUDGET_MS else "OVER"
    load = os.getloadavg()[0]
    print(
        f"conversation view, {args.events} events: open median {median:.0f} ms, "
        f"worst {max(times):.0f} ms over {args.runs} runs ({verdict} the {BUDGET_MS:.0f} ms "
        f"budget); floor (bare prompt screen) {floor:.0f} ms, ratio {median / floor:.1f}×; "
        f"load average {load:.1f} on {os.cpu_count()} cores"
    )


if __name__ == "__main__":
    main()
