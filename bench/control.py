"""Benchmark of the control API (supervisor/control/): the owner runs in its
own process, as it does beside a console, and this process is its client.

(a) `get` round trip through the socket (blocking client, one call at a time),
    p50/p95 over many calls, beside `Supervisor.get` in the owner's process.
    Budget: p95 <= 5 ms through the socket.
(b) `subscribe` throughput through the socket: the owner appends events to a
    live session's log as fast as it can (yielding to its loop every 256, as
    the producer of bench/events.py does) and one socket client reads them
    all; events/s from the first append to the last event read, median of the
    runs, beside one in-process subscriber in the owner draining the same.
    The owner's subscriber backlog holds a whole run (the producer never
    waits for readers, so a default backlog would measure how soon a reader
    is dropped rather than what the socket carries).
    Budget: >= 20,000 events/s through the socket. A run where the owner had
    to drop the client (it fell behind) is reported, never hidden.
(c) `get` under a flood: the session's history is first grown to
    `--history` events (about 300 KB an answer), then one client writes
    `--flood` `history` requests and reads none of the answers, while the
    blocking client times `get` as in (a). The owner works on at most 32 of
    the flood's requests at once and stops reading it past that, so other
    clients stay answered and its memory stays bounded. Printed beside the
    quiet p95 of (a), with the owner's RSS growth over the flood.
    Budget: p95 <= 50 ms under flood, RSS growth <= 256 MiB.

Run: .venv/bin/python bench/control.py [--calls N] [--events N] [--runs N]
     [--flood N] [--history N]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import multiprocessing as mp
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from corral.supervisor.api import Supervisor
from corral.supervisor.config import SupervisorConfig
from corral.supervisor.events import ToolCallData
from corral.supervisor.interface import FixedDrafter, SubscriptionDropped
from corral.supervisor.models import ContractCheck, OutcomeContract
from corral.supervisor.remote import AsyncControlClient, ControlClient, OwnerServices
from corral.supervisor.session.registry import SessionRegistry

BUDGET_GET_P95_MS = 5.0
BUDGET_FLOOD_P95_MS = 50.0
BUDGET_FLOOD_RSS_MIB = 256
BUDGET_EVENTS_PER_SEC = 20_000
YIELD_EVERY = 256


class _NoEngines:
    """The bench never runs an agent: the session stays at gate 1."""

    def resolve(self, requested: str) -> tuple[str, str]:
        return "none", "bench"

    def get(self, name: str) -> Any:
        raise RuntimeError("the bench runs no engine")


def _repo(root: Path) -> Path:
    repo = root / "repo"
    repo.mkdir()
    for args in (["init", "-q", "-b", "main"], ["commit", "-q", "--allow-empty", "-m", "init"]):
        subprocess.run(
            ["git", *args],
            cwd=repo,
            check=True,
            env={"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b",
                 "GIT_COMMITTER_EMAIL": "b@b", "PATH": "/usr/bin:/bin"},
        )  # fmt: skip
    return repo


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _owner(state: Path, conn: Connection, backlog: int) -> None:
    contract = OutcomeContract(checks=[ContractCheck(name="t", command="false")])
    # the producer never waits for readers: a backlog that holds a whole run
    # measures what the socket carries, not how soon a reader is dropped
    config = SupervisorConfig(max_replay_events=2000, subscriber_backlog=backlog)
    # the bench appends to a session's log itself, so it hands in the registry
    registry = SessionRegistry(state, config=config, clock=time.time, panes=None)
    sup = Supervisor(
        state,
        drafter=FixedDrafter(contract),
        engines=_NoEngines(),  # type: ignore[arg-type]
        config=config,
        registry=registry,
    )
    await sup.open()
    services = OwnerServices(sup, mcp_http=False)
    await services.start()
    sid = (await sup.start("bench", _repo(state.parent))).session_id
    log = registry.live(sid).log
    data = ToolCallData.with_args("shell", {"command": "pytest -q"})
    loop = asyncio.get_running_loop()
    conn.send(("ready", sid))
    while True:
        command, arg = await loop.run_in_executor(None, conn.recv)
        if command == "stop":
            break
        if command == "rss":
            conn.send(_rss_mib())
            continue
        if command == "get_inproc":
            times = []
            for _ in range(arg):
                t0 = time.perf_counter()
                sup.get(sid)
                times.append((time.perf_counter() - t0) * 1000)
            conn.send(times)
        elif command == "produce":
            started = time.time()
            for i in range(arg):
                log.append(data)
                if i % YIELD_EVERY == YIELD_EVERY - 1:
                    await asyncio.sleep(0)
            conn.send(started)
        elif command == "inproc_stream":
            sub, _, _ = log.subscribe(log.next_seq)
            t0 = time.perf_counter()

            async def drain(sub: Any = sub, total: int = arg) -> int:
                count = 0
                async for _event in sub:
                    count += 1
                    if count == total:
                        break
                return count

            reader = asyncio.create_task(drain())
            for i in range(arg):
                log.append(data)
                if i % YIELD_EVERY == YIELD_EVERY - 1:
                    await asyncio.sleep(0)
            count = await reader
            elapsed = time.perf_counter() - t0
            sub.close()
            conn.send((count, arg / elapsed, sub.dropped))
    await services.close()
    await sup.close()


def _rss_mib() -> float:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _flood(state: Path, sid: str, requests: int) -> tuple[socket.socket, threading.Thread]:
    """A client that writes `requests` history requests and reads nothing."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(str(state / "control.sock"))
    line = json.dumps({"jsonrpc": "2.0", "method": "history", "params": {"session_id": sid}})
    payload = b"".join((line[:-1] + f',"id":{n}}}\n').encode() for n in range(requests))

    def write() -> None:
        with contextlib.suppress(OSError):
            sock.sendall(payload)  # blocks once the owner stops reading: it should

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    return sock, writer


def _owner_main(state: str, conn: Connection, backlog: int) -> None:
    asyncio.run(_owner(Path(state), conn, backlog))


async def _socket_stream(
    state: Path, sid: str, conn: Connection, events: int
) -> tuple[float, bool]:
    client = await AsyncControlClient.connect(state, backlog=1_000_000)
    try:
        detail = await client.get(sid)
        _, sub = await client.subscribe(sid, detail.next_seq or 0)
        assert sub is not None
        conn.send(("produce", events))
        count = 0
        try:
            async for _event in sub:
                count += 1
                if count == events:
                    break
        except SubscriptionDropped as exc:
            print(f"  dropped after {count:,} events: {exc}")
        done = time.time()
        started = conn.recv()
        client.unsubscribe(sub)
        return count / (done - started), sub.dropped
    finally:
        await client.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--flood", type=int, default=1500)
    parser.add_argument("--history", type=int, default=2000)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="cb", dir="/tmp") as tmp:
        state = Path(tmp) / "state"
        ours, theirs = mp.get_context("fork").Pipe()
        owner = mp.get_context("fork").Process(
            target=_owner_main, args=(str(state), theirs, args.events + 4096)
        )
        owner.start()
        try:
            ready, sid = ours.recv()
            assert ready == "ready"
            with ControlClient(state) as client:
                for _ in range(200):  # warm-up
                    client.call("get", session_id=sid)
                gc.collect()
                socket_times = []
                for _ in range(args.calls):
                    t0 = time.perf_counter()
                    client.call("get", session_id=sid)
                    socket_times.append((time.perf_counter() - t0) * 1000)
            ours.send(("get_inproc", args.calls))
            inproc_times: list[float] = ours.recv()

            ours.send(("produce", args.history))  # a history worth flooding for
            ours.recv()
            ours.send(("rss", None))
            rss_before: float = ours.recv()
            flood, writer = _flood(state, sid, args.flood)
            flood_times = []
            try:
                with ControlClient(state) as client:
                    for _ in range(args.calls // 4):
                        t0 = time.perf_counter()
                        client.call("get", session_id=sid)
                        flood_times.append((time.perf_counter() - t0) * 1000)
                ours.send(("rss", None))
                rss_during: float = ours.recv()
            finally:
                flood.close()
                writer.join(5)

            asyncio.run(_socket_stream(state, sid, ours, args.events // 10))  # warm-up
            rates, drops = [], 0
            for _ in range(args.runs):
                gc.collect()
                rate, dropped = asyncio.run(_socket_stream(state, sid, ours, args.events))
                rates.append(rate)
                drops += dropped
            inproc_rates = []
            for _ in range(args.runs):
                ours.send(("inproc_stream", args.events))
                _count, rate, _dropped = ours.recv()
                inproc_rates.append(rate)
            ours.send(("stop", None))
        finally:
            owner.join(30)
            if owner.is_alive():
                owner.kill()

    p50, p95 = percentile(socket_times, 0.5), percentile(socket_times, 0.95)
    ip50, ip95 = percentile(inproc_times, 0.5), percentile(inproc_times, 0.95)
    get_ok = p95 <= BUDGET_GET_P95_MS
    print(f"get: {args.calls:,} calls, one session at gate 1")
    print(
        f"  through the socket: p50 {p50:.3f} ms, p95 {p95:.3f} ms "
        f"(budget p95 <= {BUDGET_GET_P95_MS} ms: {'OK' if get_ok else 'MISSED'})"
    )
    print(f"  in-process:         p50 {ip50:.4f} ms, p95 {ip95:.4f} ms")
    f95 = percentile(flood_times, 0.95)
    grew = rss_during - rss_before
    flood_ok = f95 <= BUDGET_FLOOD_P95_MS and grew <= BUDGET_FLOOD_RSS_MIB
    print(
        f"get under flood: {len(flood_times):,} calls while one client sent {args.flood:,} "
        f"history requests ({args.history:,} events each) and read none"
    )
    print(
        f"  p95 {f95:.3f} ms (quiet p95 {p95:.3f} ms), owner RSS +{grew:.0f} MiB "
        f"(budget p95 <= {BUDGET_FLOOD_P95_MS:g} ms, RSS <= +{BUDGET_FLOOD_RSS_MIB} MiB: "
        f"{'OK' if flood_ok else 'MISSED'})"
    )
    median = statistics.median(rates)
    stream_ok = median >= BUDGET_EVENTS_PER_SEC and drops == 0
    print(f"subscribe: {args.events:,} events, 1 reader, {args.runs} runs")
    print("  through the socket (events/s): " + ", ".join(f"{r:,.0f}" for r in rates))
    print(
        f"  median: {median:,.0f} events/s, {drops} run(s) dropped "
        f"(budget >= {BUDGET_EVENTS_PER_SEC:,} events/s: {'OK' if stream_ok else 'MISSED'})"
    )
    print("  in-process (events/s):         " + ", ".join(f"{r:,.0f}" for r in inproc_rates))
    print(f"  median: {statistics.median(inproc_rates):,.0f} events/s")
    return 0 if get_ok and stream_ok and flood_ok else 1


if __name__ == "__main__":
    from load import run_with_load  # bench/load.py: --load N busy loops

    sys.exit(run_with_load(lambda: main()))
