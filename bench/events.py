"""Benchmark of the per-session event log (supervisor/session/journal.py).

(a) Throughput: `EventLog.append` with the JSONL journal enabled, fanned out to
    10 subscribers that drain concurrently (`async for`), 100,000 events per
    run, median of 5 runs. Each event's payload is built (and validated) inside
    the timed loop, fresh per event with its own content, as real producers
    build them: a tool call with its arguments, its result, a narration line,
    in turn. Budget: >= 100,000 events/s.
    Compared, in the same run, with the naive way: the same payloads built as
    plain dicts, each row `json.dumps`-ed to a file and put on 10
    `asyncio.Queue`s that 10 readers drain (no types, no sequence, no replay).
(b) Replay: the time for a new subscriber to receive 10,000 buffered events
    (`subscribe(0)` plus draining the mailbox), median of 5 runs.

Run: .venv/bin/python bench/events.py [--events N] [--runs N] [--subscribers N]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from corral.supervisor.events import EventData, PlanTextData, ToolCallData, ToolResultData
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


def payload(i: int) -> EventData:
    """Event `i`'s payload, built as a producer builds it: fresh, its own content."""
    turn = i % 3
    if turn == 0:
        return ToolCallData.with_args("shell", {"command": f"pytest -q tests/test_{i}.py"})
    if turn == 1:
        return ToolResultData(tool="shell", result=f"exit {i % 2}: {i} passed", ok=i % 2 == 0)
    return PlanTextData(text=f"narration line {i}: reading, thinking, editing")


def naive_payload(i: int) -> dict[str, object]:
    """The same content as `payload(i)`, as a plain dict."""
    turn = i % 3
    if turn == 0:
        return {"tool": "shell", "command": f"pytest -q tests/test_{i}.py"}
    if turn == 1:
        return {"tool": "shell", "result": f"exit {i % 2}: {i} passed", "ok": i % 2 == 0}
    return {"text": f"narration line {i}: reading, thinking, editing"}


async def fanout_run(events: int, subscribers: int, journal_dir: Path, run: int) -> float:
    """One run; returns events/s for append + fan-out + every reader draining."""
    path = journal_dir / f"run{run}.events.jsonl"
    journal = Journal(path)
    log = EventLog("bench", cap=2000, journal=journal, backlog=4096)
    subs = [log.subscribe(0)[0] for _ in range(subscribers)]
    readers = [asyncio.create_task(_drain(s, events)) for s in subs]
    await asyncio.sleep(0)
    start = time.perf_counter()
    for i in range(events):
        log.append(payload(i))
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


async def _drain_queue(queue: asyncio.Queue[dict[str, object]], total: int) -> int:
    for _ in range(total):
        await queue.get()
    return total


async def naive_run(events: int, subscribers: int, journal_dir: Path, run: int) -> float:
    """The naive way, same payload content and yield cadence: events/s."""
    path = journal_dir / f"naive{run}.jsonl"
    queues: list[asyncio.Queue[dict[str, object]]] = [asyncio.Queue() for _ in range(subscribers)]
    readers = [asyncio.create_task(_drain_queue(q, events)) for q in queues]
    await asyncio.sleep(0)
    start = time.perf_counter()
    with open(path, "w") as out:
        for i in range(events):
            row = {"seq": i, "ts": time.time(), "data": naive_payload(i)}
            out.write(json.dumps(row) + "\n")
            for queue in queues:
                queue.put_nowait(row)
            if i % YIELD_EVERY == YIELD_EVERY - 1:
                await asyncio.sleep(0)
        counts = await asyncio.gather(*readers)
    elapsed = time.perf_counter() - start
    assert all(c == events for c in counts)
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
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="corral-bench-") as tmp:
        await fanout_run(args.events // 10, args.subscribers, Path(tmp), -1)  # warm-up
        await naive_run(args.events // 10, args.subscribers, Path(tmp), -1)
        rates, naive = [], []
        for run in range(args.runs):  # interleaved: both share the machine's state
            gc.collect()  # each run starts from the same heap, not the last run's garbage
            rates.append(await fanout_run(args.events, args.subscribers, Path(tmp), run))
            gc.collect()
            naive.append(await naive_run(args.events, args.subscribers, Path(tmp), run))
    replay_run(args.replay)  # warm-up
    replays = []
    for _ in range(args.runs):
        gc.collect()
        replays.append(replay_run(args.replay))

    median_rate = statistics.median(rates)
    median_naive = statistics.median(naive)
    median_replay = statistics.median(replays)
    ok = median_rate >= BUDGET_EVENTS_PER_SEC
    print(
        f"fan-out: {args.events:,} events x {args.subscribers} subscribers, journal on, "
        f"{args.runs} runs, a fresh payload built per event (tool call, result, narration)"
    )
    print(
        "  EventLog (typed, sequenced, journaled) events/s: "
        + ", ".join(f"{r:,.0f}" for r in rates)
    )
    print(
        "  naive (dicts, json.dumps, asyncio.Queue) events/s: "
        + ", ".join(f"{r:,.0f}" for r in naive)
    )
    print(
        f"  median: {median_rate:,.0f} events/s, {median_rate / median_naive:.2f}× the naive "
        f"{median_naive:,.0f} (budget >= {BUDGET_EVENTS_PER_SEC:,} events/s: "
        f"{'OK' if ok else 'OVER BUDGET'})"
    )
    print(f"replay: {args.replay:,} events to a new subscriber, {args.runs} runs")
    print("  runs (ms): " + ", ".join(f"{r:.2f}" for r in replays))
    print(f"  median: {median_replay:.2f} ms")
    return 0 if ok else 1


if __name__ == "__main__":
    from load import run_with_load  # bench/load.py: --load N busy loops

    sys.exit(run_with_load(lambda: asyncio.run(main())))
