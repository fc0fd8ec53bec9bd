"""Benchmark of `corral status --tmux`, the tmux status-line segment
(tui/cli/status.py), which tmux runs every `status-interval` seconds (5 in
the README's example): it must cost a small fraction of that.

Measured as tmux runs it (a new process each time), median wall time of
`--runs` runs, in three cases: a state dir with no store yet; the same with
an owner (`corral serve`) answering on the control socket; and, to compare,
a bare `python -c pass` (the interpreter's own start, which nothing here can
save; an editable install adds its import finder to every start). Exits
non-zero when a case's median is more than `--budget` seconds over that start.

Run: .venv/bin/python bench/status_line.py [--runs N] [--budget SECS]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORRAL = ROOT / ".venv" / "bin" / "corral"


def median_secs(argv: list[str], env: dict[str, str], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--budget", type=float, default=0.5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="corral-status-bench-") as tmp:
        home = Path(tmp) / "home"
        env = {
            **os.environ,
            "CORRAL_HOME": str(home),
            "CORRAL_CONFIG": str(Path(tmp) / "none.toml"),
        }
        status = [str(CORRAL), "status", "--tmux"]
        results = {"python -c pass": median_secs([sys.executable, "-c", "pass"], env, args.runs)}
        results["no store"] = median_secs(status, env, args.runs)
        serve = subprocess.Popen(
            [str(CORRAL), "serve"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        try:
            deadline = time.monotonic() + 60
            while not (home / "control.sock").exists():
                if time.monotonic() > deadline or serve.poll() is not None:
                    print("corral serve did not start", file=sys.stderr)
                    return 2
                time.sleep(0.1)
            median_secs(status, env, 3)  # the owner finishes starting (MCP, sweeps)
            results["owner answering"] = median_secs(status, env, args.runs)
        finally:
            serve.terminate()
            serve.wait(30)
    over = False
    start = results["python -c pass"]
    for name, secs in results.items():
        extra = "" if secs is start else f" ({(secs - start) * 1000:+.0f} ms over python's start)"
        if secs is not start:
            late = secs - start > args.budget
            over = over or late
            extra += f"  {'OVER' if late else 'within'} the {args.budget:.2f} s budget"
        print(f"{name:>18}: median {secs * 1000:6.0f} ms over {args.runs} runs{extra}")
    return 1 if over else 0


if __name__ == "__main__":
    from load import run_with_load  # bench/load.py: --load N busy loops

    sys.exit(run_with_load(lambda: main()))
