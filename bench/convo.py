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

`--compare-tree DIR` times another checkout (e.g. main) in the same run:
a child process on that tree's own `.venv` (its editable install maps
`corral` to that tree) answers one run per round, alternating with this
tree's run and the floor, so the load is the same for all three.

    .venv/bin/python bench/convo.py [--events 5000] [--runs 5] [--load N]
                                    [--compare-tree /work/main]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
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
    """The app without the screen pushed at mount: the bench pushes it
    (Textual calls every class's `on_mount` in the MRO, so ConvoApp's push
    is skipped by a flag, not by overriding it)."""

    def compose(self) -> ComposeResult:
        yield Static("board")

    def push_screen(self, screen: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(screen, ConversationScreen) and not getattr(self, "timing", False):
            return None  # ConvoApp.on_mount's own push: not the one timed
        return super().push_screen(screen, *args, **kwargs)


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
        app.timing = True  # type: ignore[attr-defined]
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


def serve(events: list[Any]) -> None:
    """`--serve`: one run per line read, its wall and CPU printed as JSON
    (the parent's `--compare-tree` child)."""
    asyncio.run(one_run(events))  # the first run of a process pays its imports
    print("ready", flush=True)
    for _ in sys.stdin:
        print(json.dumps(asyncio.run(one_run(events))), flush=True)


class _Compared:
    """Another tree's bench, answering one run per round."""

    def __init__(self, tree: Path, events: int) -> None:
        python = tree / ".venv" / "bin" / "python"
        self.tree = tree
        self.proc = subprocess.Popen(
            [str(python), str(Path(__file__).resolve()), "--serve", "--events", str(events)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=tree,
        )
        assert self.proc.stdout is not None
        if self.proc.stdout.readline().strip() != "ready":
            raise SystemExit(f"{tree}: its bench did not start (see above)")

    def run(self) -> tuple[float, float]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        wall, cpu = json.loads(self.proc.stdout.readline())
        return float(wall), float(cpu)

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=30)


def _figures(
    name: str, walls: list[float], cpus: list[float], floor: float, floor_cpu: float
) -> str:
    median, cpu = statistics.median(walls), statistics.median(cpus)
    return (
        f"{name}: open median {median:.0f} ms, worst {max(walls):.0f} ms, CPU median "
        f"{cpu:.0f} ms (CPU {min(cpus):.0f}–{max(cpus):.0f}), ratio to the floor "
        f"{median / floor:.1f}× (CPU {cpu / floor_cpu:.1f}×)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--compare-tree", type=Path, default=None, metavar="DIR")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    events = session(args.events)
    if args.serve:
        serve(events)
        return 0
    other = _Compared(args.compare_tree, args.events) if args.compare_tree else None
    asyncio.run(one_run(events))  # warm-up: the first run of a process pays its imports
    times, cpus, floors, floor_cpus = [], [], [], []
    other_times, other_cpus = [], []
    for _ in range(args.runs):
        wall, cpu = asyncio.run(one_run(events))
        times.append(wall)
        cpus.append(cpu)
        wall, cpu = asyncio.run(one_run([], floor=True))
        floors.append(wall)
        floor_cpus.append(cpu)
        if other is not None:
            wall, cpu = other.run()
            other_times.append(wall)
            other_cpus.append(cpu)
    if other is not None:
        other.close()
    median, floor = statistics.median(times), statistics.median(floors)
    floor_cpu = statistics.median(floor_cpus)
    verdict = "within" if median <= BUDGET_MS else "OVER"
    print(
        f"conversation view, {args.events} events, {args.runs} runs at 200x50 "
        f"({verdict} the {BUDGET_MS:.0f} ms budget):"
    )
    print("  " + _figures("this tree", times, cpus, floor, floor_cpu))
    if other is not None:
        print("  " + _figures(str(args.compare_tree), other_times, other_cpus, floor, floor_cpu))
    print(
        f"  floor (bare prompt screen): {floor:.0f} ms, CPU {floor_cpu:.0f} ms "
        f"(CPU {min(floor_cpus):.0f}–{max(floor_cpus):.0f})"
    )
    return 0 if median <= BUDGET_MS else 1


if __name__ == "__main__":
    from load import run_with_load  # bench/load.py: --load N busy loops

    sys.exit(main() if "--serve" in sys.argv else run_with_load(main))
