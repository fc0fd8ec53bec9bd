"""Benchmark of the per-session event log (supervisor/events.py).

(a) Throughput: `EventLog.append` with the JSONL journal enabled, fanned out to
    10 subscribers that drain concurrently (`async for`), 100,000 events per
    run, median of 5 runs. Budget: >= 100,000 events/s.
(b) Replay: the time for a new subscriber to receive 10,000 buffered events
    (`subscribe(0)` plus draining the mailbox), median of 5 runs.

The producer appends one typed payload (a `tool_call` with its arguments) over
and over, as it reused one dict before events were typed. `--build-payloads`
builds (and validates) a fresh payload per event inside the timed loop, as
real producers do, to show that cost too.

Run: .venv/bin/python bench/events.py [--events N] [--runs N] [--subscribers N]
     [--build-payloads]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from corral.supervisor.events import PlanTextData, ToolCallData
from corral.supervisor.session.journal import EventLog, Journal, Subscription

BUDGET_EVENTS_PER_SEC = 100_000
YIELD_EVERY = 256  # the producer lets readers run this often (it never waits for them)


async def _drain(sub: Subscription, total: int) -> int:
    count = 0
    async for _event in sub:
        count += 1
        if count == total:
            break
    return count


async def fanout_run(
    events: int, subscribers: int, journal_dir: Path, run: int, build: bool = False
) -> float:
    """One run; returns events/s for append + fan-out + every reader draining."""
    path = journal_dir / f"run{run}.events.jsonl"
    journal = Journal(path)
    log = EventLog("bench", cap=2000, journal=journal, backlog=4096)
    subs = [log.subscribe(0)[0] for _ in range(subscribers)]
    readers = [asyncio.create_task(_drain(s, events)) for s in subs]
    await asyncio.sleep(0)
    args = {"command": "pytest -q"}
    data = ToolCallData.with_args("shell", args)
    start = time.perf_counter()
    for i in range(events):
        log.append(ToolCallData(tool="shell", result="exit 0", ok=True) if build else data)
        if i % YIELD_EVERY == YIELD_EVERY - 1:
            await asyncio.sleep(0)
    counts = await asyncio.gather(*readers)
    journal.close()  # the last rows reach the file inside the timed region
    elapsed = time.perf_counter() - start
    rows = path.read_bytes().count(b"\n")
    if rows != events:
        raise SystemExit(f"run {run}: the journal has {rows} rows, expected {events}")
    dropped = sum(s.dropped for s in subs)
    if dropped or any(c != events for c in counts):
        raise SystemExit(f"run {run}: {dropped} subscriber(s) dropped; counts {counts}")
    return events / elapsed


def replay_run(events: int) -> float:
    """Milliseconds to replay `events` buffered events to a new subscriber."""
    log = EventLog("bench", cap=events)
    data = PlanTextData(text="narration")
    for _ in range(events):
        log.append(data)
    start = time.perf_counter()
    sub, replayed, skipped = log.subscribe(0)
    got = sub.get_nowait()
    elapsed = time.perf_counter() - start
    assert replayed == events and skipped == 0 and len(got) == events
    return elapsed * 1000


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--subscribers", type=int, default=10)
    parser.add_argument("--replay", type=int, default=10_000)
    parser.add_argument("--build-payloads", action="store_true")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="corral-bench-") as tmp:
        await fanout_run(args.events // 10, args.subscribers, Path(tmp), -1)  # warm-up
        rates = []
        for run in range(args.runs):
            gc.collect()  # each run starts from the same heap, not the last run's garbage
            rates.append(
                await fanout_run(args.events, args.subscribers, Path(tmp), run, args.build_payloads)
            )
    replay_run(args.replay)  # warm-up
    replays = []
    for _ in range(args.runs):
        gc.collect()
        replays.append(replay_run(args.replay))

    median_rate = statistics.median(rates)
    median_replay = statistics.median(replays)
    ok = median_rate >= BUDGET_EVENTS_PER_SEC
    print(
        f"fan-out: {args.events:,} events x {args.subscribers} subscribers, journal on, "
        f"{args.runs} runs" + (", a payload built per event" if args.build_payloads else "")
    )
    print("  runs (events/s): " + ", ".join(f"{r:,.0f}" for r in rates))
    print(
        f"  median: {median_rate:,.0f} events/s "
        f"(budget >= {BUDGET_EVENTS_PER_SEC:,} events/s: {'OK' if ok else 'MISSED'})"
    )
    print(f"replay: {args.replay:,} events to a new subscriber, {args.runs} runs")
    print("  runs (ms): " + ", ".join(f"{r:.2f}" for r in replays))
    print(f"  median: {median_replay:.2f} ms")
    return 0 if ok else 1


if __name__ == "__main__":
    from load import run_with_load  # bench/load.py: --load N busy loops

    sys.exit(run_with_load(lambda: asyncio.run(main())))
