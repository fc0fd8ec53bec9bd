"""`--load N` for every bench: N busy loops (one process each) run for the
bench's whole duration, so a figure can be read under a stated load (the
budgets in ARCHITECTURE.md hold under a load of twice the cores)."""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
from collections.abc import Callable, Iterator

BUSY = "while True: pass"


def add_load_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--load",
        type=int,
        default=0,
        metavar="N",
        help="run N busy loops beside the bench (e.g. twice the cores)",
    )


@contextlib.contextmanager
def busy_loops(n: int) -> Iterator[None]:
    """N processes spinning on a core each until the block ends."""
    procs = [
        subprocess.Popen([sys.executable, "-c", BUSY], stdin=subprocess.DEVNULL)
        for _ in range(max(0, n))
    ]
    try:
        yield
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait()


def stated(n: int) -> str:
    """How loaded the machine was, for the printed figures."""
    return (
        f"{n} busy loop(s) added, load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )


def run_with_load(main: Callable[[], int | None]) -> int:
    """Run a bench's `main` with `--load N` taken off the command line (the
    bench's own options stay its own), then say how loaded the machine was."""
    pre = argparse.ArgumentParser(add_help=False)
    add_load_option(pre)
    known, rest = pre.parse_known_args()
    sys.argv[1:] = rest
    with busy_loops(known.load):
        code = main()
        print(stated(known.load))
    return code or 0
