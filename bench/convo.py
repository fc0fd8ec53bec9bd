"""Benchmark: the ACP conversation view of a 5,000-event session opens in
≤ 200 ms (issue 45).

In process, under Textual's pilot at 200×50 (no pty: what is timed is the
console's own work, not a terminal's): a session of --events typed
conversation events (a prompt, then turns of two thought pieces, a
markdown message, a tool call and its update with output, and a plan every
tenth turn, as the ACP client journals them) is served by a stand-in owner
through a real `Subscription`. The clock runs from pushing the
conversation screen until its view is mounted at the tail with a
screenful of blocks and the frame after that is painted (Textual's
`call_after_refresh`; the pilot's idle waits, ~200 ms of sleeping, are not
timed). Median and worst over --runs runs; each run a fresh app; the
process's CPU time beside the wall clock (on a shared machine the wall
clock says as much about the other processes as about the view).
The floor, each run, under the same load: a bare screen of what any
screen with a prompt has (a `Static`, a `TextArea`, a `Footer`) pushed and
painted the same way; the ratio is printed (on a shared, loaded machine the
absolute figure says more about the load than about the view).

    .venv/bin/python bench/convo.py [--events 5000] [--runs 5] [--load N]
"""

from __future__ import annotations

import argparse
import asyncio
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


async def one_run(events: list[Any], floor: bool = False) -> tuple[float, float]:
    """Milliseconds from the push to the first frame painted with the view
    at the tail, wall clock and this process's CPU."""
    app = _Host(ConvoOwner(events))
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause()
        painted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        cpu, start = time.process_time(), time.perf_counter()
        app.push_screen(_Floor() if floor else ConversationScreen(SID))
        while not floor:  # the view mounted at the tail, a screenful of blocks in it
            views = app.screen.query(ConversationView)
            view = views.first() if views else None
            if (
                view is not None
                and view.views
                and view.at_the_end
                and (view.max_scroll_y > 0 or view.first_mounted == 0)
            ):
                break
            await asyncio.sleep(0.001)
        # the frame after that (Textual calls it back once the screen was painted)
        app.screen.call_after_refresh(lambda: painted.set_result(None))
        await painted
        return (time.perf_counter() - start) * 1000, (time.process_time() - cpu) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    events = session(args.events)
    times, cpus, floors, floor_cpus = [], [], [], []
    for _ in range(args.runs):
        wall, cpu = asyncio.run(one_run(events))
        times.append(wall)
        cpus.append(cpu)
        wall, cpu = asyncio.run(one_run([], floor=True))
        floors.append(wall)
        floor_cpus.append(cpu)
    median, floor = statistics.median(times), statistics.median(floors)
    verdict = "within" if median <= BUDGET_MS else "OVER"
    print(
        f"conversation view, {args.events} events: open median {median:.0f} ms, "
        f"worst {max(times):.0f} ms over {args.runs} runs ({verdict} the {BUDGET_MS:.0f} ms "
        f"budget), CPU median {statistics.median(cpus):.0f} ms; floor (bare prompt screen) "
        f"{floor:.0f} ms (CPU {statistics.median(floor_cpus):.0f} ms), ratio "
        f"{median / floor:.1f}× (CPU {statistics.median(cpus) / statistics.median(floor_cpus):.1f}×)"
    )
    return 0 if median <= BUDGET_MS else 1


if __name__ == "__main__":
    from load import run_with_load  # bench/load.py: --load N busy loops

    sys.exit(run_with_load(main))
