"""Start-up of `corral demo`: spawn to first board paint, through a real pty.

`corral demo` (a generated demo repository, the demo agent) is spawned in a
120x40 pseudo-terminal with a fresh CORRAL_HOME; the clock runs from spawn
until the pty output shows the board's counts line ("N sessions"). Each run
then presses `q` and waits for the process to exit (its demo agents and tmux
server are its own to clean up).

Given `--compare OTHER_CORRAL`, both binaries run interleaved in the same
loop, so their medians and the ratio come from one machine state.

No budget of its own (ARCHITECTURE.md budgets the empty store's first paint,
bench/tui.py (d)): a figure, and a ratio with --compare.

Run (from the repo root): .venv/bin/python bench/demo_start.py [--runs 5] [--compare PATH]
"""

from __future__ import annotations

import argparse
import os
import re
import select
import statistics
import sys
import tempfile
import time
from pathlib import Path

from ptyprocess import PtyProcess

ROOT = Path(__file__).resolve().parents[1]
COUNTS_RE = re.compile(rb"(\d+) sessions")


def first_paint(corral: str, timeout: float = 30.0) -> float:
    """Seconds from spawn to the board's counts line."""
    with tempfile.TemporaryDirectory(prefix="corral-demo-bench-") as tmp:
        env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
        env.pop("CORRAL_LLM_PROVIDER", None)
        env.update(
            CORRAL_HOME=str(Path(tmp) / "home"),
            CORRAL_CONFIG=str(Path(tmp) / "none.toml"),
            CORRAL_TMUX_SOCKET_DIR=str(Path(tmp) / "tmux"),
            TMPDIR=tmp,
            TERM="xterm-256color",
        )
        start = time.monotonic()
        proc = PtyProcess.spawn([corral, "demo"], env=env, dimensions=(40, 120), cwd=tmp)
        seen = b""
        took = None
        try:
            while time.monotonic() - start < timeout:
                ready, _, _ = select.select([proc.fd], [], [], 0.05)
                if ready:
                    try:
                        seen += os.read(proc.fd, 65536)
                    except OSError:
                        break
                if COUNTS_RE.search(seen):
                    took = time.monotonic() - start
                    break
        finally:
            if proc.isalive():
                proc.write(b"q")
            end = time.monotonic() + 15
            while proc.isalive() and time.monotonic() < end:
                ready, _, _ = select.select([proc.fd], [], [], 0.1)
                if ready:
                    try:
                        os.read(proc.fd, 65536)
                    except OSError:
                        break
            if proc.isalive():
                proc.terminate(force=True)
        if took is None:
            raise SystemExit(f"{corral} demo: no board within {timeout:.0f} s")
        return took


def main() -> int:
    parser = argparse.ArgumentParser(description="corral demo: spawn to first paint")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--corral", default=str(ROOT / ".venv" / "bin" / "corral"))
    parser.add_argument("--compare", help="another corral binary, run interleaved")
    args = parser.parse_args()
    binaries = [args.corral] + ([args.compare] if args.compare else [])
    first_paint(binaries[0])  # warm the file cache once; not counted
    times: dict[str, list[float]] = {b: [] for b in binaries}
    for _ in range(args.runs):
        for binary in binaries:
            times[binary].append(first_paint(binary))
    medians = {b: statistics.median(t) for b, t in times.items()}
    for binary, samples in times.items():
        spread = ", ".join(f"{s * 1000:.0f}" for s in samples)
        print(f"{binary}: median {medians[binary] * 1000:.0f} ms over {args.runs} ({spread} ms)")
    if args.compare:
        print(
            f"ratio {args.corral} / {args.compare}: {medians[args.corral] / medians[args.compare]:.2f}"
        )
    return 0


if __name__ == "__main__":
    from load import run_with_load  # bench/load.py: --load N busy loops

    sys.exit(run_with_load(lambda: main()))
