"""Benchmark of the tmux pane backend (supervisor/panes/tmux.py).

On a private tmux server (socket in a temporary directory, killed at the end)
with 10, 50 and 100 live panes, each printing a line every second, the
medians over --reps repetitions of what it costs to read every pane's screen
once (every pane streams, so every pane changed since the last look):

(a) corral's way, one status tick: `TmuxBackend.sweep()` (one `list-panes -a`)
    plus `TmuxBackend.capture()` of every pane (one tmux invocation for all);
(b) the per-pane way the peers take: one `tmux capture-pane -p -e` subprocess
    per pane, one after the other, with the same flags as corral's capture,
    so both read the same screens (checked: same panes, same rows).

Budgets: (a) ≥ 20× cheaper than (b) for 100 live panes in the same run
(ARCHITECTURE.md), and the sweep alone of 100 live panes ≤ 10 ms median.

Then the idle cost: 50 idle panes, a loop that sweeps once per second (and
captures only panes whose activity changed, as the supervisor does) for 30 s
(5 s with --quick); CPU time of this process and of the tmux clients it ran,
as % of one core. Budget: ≤ 2 %.

Run: .venv/bin/python bench/panes.py [--quick] [--reps N]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from corral.supervisor.panes.base import PaneHandle, PaneSpec
from corral.supervisor.panes.tmux import TmuxBackend

SIZES = (10, 50, 100)
BUDGET_SWEEP_MS = 10.0
BUDGET_RATIO = 20.0
BUDGET_IDLE_PCT = 2.0
IDLE_PANES = 50

TICKER = 'i=0; while :; do i=$((i+1)); echo "tick $i"; sleep 1; done'


def median_ms(fn: Callable[[], object], reps: int) -> float:
    fn()  # warm up
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1000)
    return statistics.median(samples)


def spec(n: int, cwd: Path, argv: list[str]) -> PaneSpec:
    env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": str(cwd), "LANG": "C.UTF-8"}
    return PaneSpec(f"bench{n:03d}", 1, f"corral-bench{n:03d}", cwd, argv, env, 120, 40)


def server_cpu_seconds(pid: int | None) -> float:
    if pid is None:
        return 0.0
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = raw[raw.rfind(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def live_panes(
    backend: TmuxBackend, work: Path, reps: int
) -> dict[int, tuple[float, float, float]]:
    """{panes: (sweep ms, sweep + batched capture ms, per-pane capture ms)}."""
    tmux = backend.tmux_bin
    where = ["-S", str(backend.socket_path)]
    handles: list[PaneHandle] = []
    results: dict[int, tuple[float, float, float]] = {}
    print(
        f"{'panes':>5}  {'sweep':>9}  {'(a) sweep+capture':>17}  {'(b) per-pane':>12}"
        f"  {'(b)/(a)':>7}  screens read (rows, bytes) by (a) | (b)"
    )
    for size in SIZES:
        while len(handles) < size:
            handles.append(backend.spawn(spec(len(handles), work, ["sh", "-c", TICKER])))
        time.sleep(1.5)  # every pane has printed
        infos = backend.sweep()
        assert len(infos) == size, f"expected {size} panes, the sweep saw {len(infos)}"

        def corral_tick() -> dict[str, list[str]]:
            seen = backend.sweep()
            screens = backend.capture([info.handle for info in seen.values()])
            return {s: screen.ansi for s, screen in screens.items()}

        def per_pane() -> dict[str, list[str]]:
            screens = {}
            for h in handles:
                out = subprocess.run(
                    [tmux, *where, "capture-pane", "-p", "-e", "-t", h.pane_id],
                    capture_output=True,
                    check=True,
                    text=True,
                ).stdout
                screens[h.owner] = out.removesuffix("\n").split("\n")
            return screens

        ours, theirs = corral_tick(), per_pane()
        assert set(ours) == set(theirs) == {h.owner for h in handles}
        assert all(len(ours[o]) == len(theirs[o]) for o in ours), "the two read different rows"
        assert all("tick" in "".join(lines) for lines in ours.values())
        sweep_ms = median_ms(backend.sweep, reps)
        tick_ms = median_ms(corral_tick, reps)
        naive_ms = median_ms(per_pane, reps)
        results[size] = (sweep_ms, tick_ms, naive_ms)
        print(
            f"{size:>5}  {sweep_ms:>6.2f} ms  {tick_ms:>14.2f} ms  {naive_ms:>9.1f} ms"
            f"  {naive_ms / tick_ms:>6.1f}×  {footprint(ours)} | {footprint(theirs)}"
        )
    for h in handles:
        backend.kill(h, timeout=1.0)
    return results


def footprint(screens: dict[str, list[str]]) -> str:
    rows = sum(len(lines) for lines in screens.values())
    size = sum(len(line) + 1 for lines in screens.values() for line in lines)
    return f"{len(screens)} screens, {rows} rows, {size} B"


def idle_cpu(backend: TmuxBackend, work: Path, seconds: float) -> tuple[float, float, float]:
    handles = [backend.spawn(spec(i, work, ["cat"])) for i in range(IDLE_PANES)]
    time.sleep(1.0)
    seen: dict[str, float] = {}
    server = backend.server_pid()

    def tick() -> None:
        infos = backend.sweep()
        changed = [i.handle for o, i in infos.items() if seen.get(o) != i.activity]
        for o, i in infos.items():
            seen[o] = i.activity
        if changed:
            backend.capture(changed)

    tick()
    time.sleep(RECENT_SETTLE)  # let the start-up output age past the sweep's recency window
    tick()
    wall0, self0, kids0 = time.monotonic(), time.process_time(), children_cpu()
    srv0 = server_cpu_seconds(server)
    next_at = wall0
    while time.monotonic() - wall0 < seconds:
        next_at += 1.0
        tick()
        time.sleep(max(0.0, next_at - time.monotonic()))
    wall = time.monotonic() - wall0
    own = time.process_time() - self0
    kids = children_cpu() - kids0
    srv = server_cpu_seconds(server) - srv0
    for h in handles:
        backend.kill(h, timeout=1.0)
    return own / wall * 100, kids / wall * 100, srv / wall * 100


RECENT_SETTLE = 2.5


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="idle measurement over 5 s, not 30 s")
    parser.add_argument("--reps", type=int, default=20, help="repetitions per median (20)")
    args = parser.parse_args()
    if shutil.which("tmux") is None:
        print("tmux is not installed", file=sys.stderr)
        return 2
    version = subprocess.run(["tmux", "-V"], capture_output=True, text=True).stdout.strip()
    print(f"{version}, {os.cpu_count()} CPUs, medians of {args.reps} repetitions\n")
    tmp = Path(tempfile.mkdtemp(prefix="corral-bench-"))
    backend = TmuxBackend(socket_dir=tmp / "tmux")
    work = tmp / "work"
    work.mkdir()
    ok = True
    try:
        results = live_panes(backend, work, args.reps)
        sweep_ms, tick_ms, naive_ms = results[100]
        ratio = naive_ms / tick_ms
        print()
        good = sweep_ms <= BUDGET_SWEEP_MS
        ok &= good
        print(
            f"budget: sweep alone of 100 live panes ≤ {BUDGET_SWEEP_MS:g} ms median: "
            f"{sweep_ms:.2f} ms  {'PASS' if good else 'FAIL'}"
        )
        good = ratio >= BUDGET_RATIO
        ok &= good
        print(
            f"budget: reading 100 live panes' screens, (a) sweep + batched capture ≥ "
            f"{BUDGET_RATIO:g}× cheaper than (b) one capture-pane per pane: "
            f"{tick_ms:.1f} ms against {naive_ms:.1f} ms, {ratio:.1f}×  {'PASS' if good else 'FAIL'}"
        )
        seconds = 5.0 if args.quick else 30.0
        own, kids, srv = idle_cpu(backend, work, seconds)
        good = own + kids <= BUDGET_IDLE_PCT
        ok &= good
        print(
            f"budget: idle CPU, {IDLE_PANES} idle panes, one sweep per second for {seconds:g} s "
            f"≤ {BUDGET_IDLE_PCT:g} % of a core: {own + kids:.2f} %  {'PASS' if good else 'FAIL'}"
        )
        print(f"        (this process {own:.2f} %, its tmux clients {kids:.2f} %; ", end="")
        print(f"the tmux server, shared with the panes, {srv:.2f} %)")
    finally:
        backend.kill_server()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    from load import run_with_load  # bench/load.py: --load N busy loops

    sys.exit(run_with_load(lambda: main()))
