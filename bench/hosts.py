"""Benchmark of the sweep across hosts (supervisor/hosts/remote_tmux.py).

A real sshd on 127.0.0.1 (tests/fakes/sshd.py) stands for 3 hosts (3 host
entries, so 3 masters and 3 private tmux servers); each runs 30 panes that
print a line every second. In the same run, 90 panes on a local private tmux
server. One tick is what the supervisor does per interval: a sweep, then a
capture of the panes whose activity changed. Medians over --reps ticks of:

(a) 90 local panes: `TmuxBackend.sweep()` + `capture(changed)`;
(b) 3 hosts × 30 panes: the 3 remote sweeps in parallel threads, as the pane
    manager runs them (one worker per host; one ssh
    round trip each, captures of changed panes included) + `capture(changed)`
    (served from the sweep);
and the ssh round trips per tick (budget: exactly 1 per host), and one bare
round trip for scale: each runs the remote user's shell, whose rc files
(pyenv, nvm…) can dominate it.

Run: .venv/bin/python bench/hosts.py [--quick] [--reps N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from corral.supervisor.hosts.connection import HostConnection
from corral.supervisor.hosts.remote_tmux import RemoteTmuxBackend
from corral.supervisor.hosts.settings import HostSettings
from corral.supervisor.panes.base import PaneBackend, PaneSpec
from corral.supervisor.panes.tmux import TmuxBackend
from tests.fakes.sshd import sshd_missing, start_sshd

HOSTS = 3
PER_HOST = 30
LOCAL = HOSTS * PER_HOST
TICKER = 'i=0; while :; do i=$((i+1)); echo "tick $i"; sleep 1; done'


def spec(name: str, cwd: Path) -> PaneSpec:
    env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": str(cwd), "LANG": "C.UTF-8"}
    return PaneSpec(name, 1, f"corral-{name}", cwd, ["sh", "-c", TICKER], env, 120, 40)


def tick(backend: PaneBackend, seen: dict[str, float]) -> int:
    """One supervisor tick on one backend; returns the panes captured."""
    infos = backend.sweep()
    changed = [i.handle for o, i in infos.items() if seen.get(o) != i.activity]
    for owner, info in infos.items():
        seen[owner] = info.activity
    backend.capture(changed)
    return len(changed)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer ticks")
    parser.add_argument("--reps", type=int, default=0)
    args = parser.parse_args()
    reps = args.reps or (10 if args.quick else 30)
    missing = sshd_missing()
    if missing:
        print(missing, file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="corral-bench-hosts-") as tmp:
        work = Path(tmp)
        server = start_sshd(work / "sshd")
        local = TmuxBackend(socket_dir=work / "tmux")
        conns: list[HostConnection] = []
        remotes: list[RemoteTmuxBackend] = []
        try:
            for h in range(HOSTS):
                settings = HostSettings(
                    name=f"h{h}", destination=server.alias, ssh_options=server.ssh_options()
                )
                conn = HostConnection(settings, work / "state")
                conns.append(conn)
                remotes.append(RemoteTmuxBackend(conn, str(work / f"remote{h}")))
            t0 = time.perf_counter()
            for n in range(LOCAL):
                local.spawn(spec(f"local{n:03d}", work))
            t_local = time.perf_counter() - t0
            t0 = time.perf_counter()
            for h, remote in enumerate(remotes):
                for n in range(PER_HOST):
                    remote.spawn(spec(f"h{h}p{n:02d}", work))
            t_remote = time.perf_counter() - t0
            print(f"spawned {LOCAL} local panes in {t_local:.1f} s, ")
            print(f"        {HOSTS}×{PER_HOST} remote panes in {t_remote:.1f} s")
            time.sleep(1.5)
            local_seen: dict[str, float] = {}
            remote_seen = [dict[str, float]() for _ in remotes]
            local_ms, remote_ms, trips, captured = [], [], [], []
            pool = ThreadPoolExecutor(HOSTS)
            tick(local, local_seen)
            list(pool.map(tick, remotes, remote_seen))
            for _ in range(reps):
                time.sleep(0.5)
                t0 = time.perf_counter()
                tick(local, local_seen)
                local_ms.append((time.perf_counter() - t0) * 1000)
                before = sum(c.round_trips for c in conns)
                t0 = time.perf_counter()
                captured.append(sum(pool.map(tick, remotes, remote_seen)))
                remote_ms.append((time.perf_counter() - t0) * 1000)
                trips.append(sum(c.round_trips for c in conns) - before)
            pool.shutdown()
            bare = []
            for _ in range(5):
                t0 = time.perf_counter()
                conns[0].run(["true"])
                bare.append((time.perf_counter() - t0) * 1000)
            print(f"\nmedians of {reps} ticks (sweep + capture of the changed panes):")
            print(f"  (a) {LOCAL} local panes:           {statistics.median(local_ms):7.1f} ms")
            print(
                f"  (b) {HOSTS} hosts × {PER_HOST} panes (ssh): "
                f"{statistics.median(remote_ms):7.1f} ms, "
                f"{statistics.median(captured):.0f} panes captured per tick"
            )
            print(
                f"  one bare ssh round trip (`true`): {statistics.median(bare):7.1f} ms "
                "(the remote user's shell start-up, rc files included, is most of it)"
            )
            per_tick = max(trips)
            verdict = "ok" if per_tick == HOSTS else "OVER BUDGET"
            print(f"  ssh round trips per tick: at most {per_tick} for {HOSTS} hosts ({verdict})")
            return 0 if per_tick == HOSTS else 1
        finally:
            for remote in remotes:
                remote.kill_server()
            for conn in conns:
                conn.close()
            local.kill_server()
            server.stop()


if __name__ == "__main__":
    from load import run_with_load  # bench/load.py: --load N busy loops

    sys.exit(run_with_load(lambda: main()))
