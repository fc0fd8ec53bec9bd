"""The corpus table: for each real project (tests/corpus/projects.toml), the
setup's time cold (fresh environment) and cached (a second worktree of the same
repository), and the baseline verdict of its drafted contract.

Projects run one at a time so the timings are honest; downloads are cached in
~/.cache/corral-corpus and packages in pip's / npm's own caches (warm them
with one run first).

Run (from the repo root): .venv/bin/python bench/corpus.py [--only NAME ...]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.corpus.runner import run_all  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="project names to run")
    args = parser.parse_args()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="corral-corpus-") as tmp:
        outcomes = run_all(Path(tmp) / "work", Path(tmp) / "state", args.only)
    rows = [("project", "shape", "setup cold", "setup cached", "baseline")]
    for o in outcomes:
        if o.cold is None:
            cold = cached = "no setup"
        else:
            cold = f"{o.cold_secs:.1f}s"
            reused = "reused" if o.cached is not None and o.cached.cached else "own env"
            took = (
                f"{o.cached_secs:.1f}s" if o.cached_secs >= 1 else f"{o.cached_secs * 1000:.1f}ms"
            )
            cached = f"{took} ({reused})"
        rows.append((o.project.id, o.project.shape[:44], cold, cached, o.verdict()[:70]))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    print(f"\n{len(outcomes)} projects in {time.monotonic() - started:.0f}s")


if __name__ == "__main__":
    main()
