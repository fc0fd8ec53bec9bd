"""First setup vs cached setup for real projects, in the same run: the
conventions lane drafts the contract of a corpus project, its setup builds
the environment in one worktree, then a second worktree of the same
repository asks for it again. Default projects: packaging (a venv, shared
since the start), markupsafe (a C extension built in place) and concat-map
(npm filling node_modules) — the last two are per-worktree kinds, rebuilt in
every checkout before their environments were keyed by what decides them.
Prints both times, their ratio and whether the second was reused, as medians
of `--runs` fresh state dirs.

Exits 1 when a second worktree rebuilt its environment instead of reusing
it (the promise the cache makes).

Run (from the repo root): .venv/bin/python bench/setup.py [--project NAME ...] [--runs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from corral.supervisor.contracts.conventions import draft_contract  # noqa: E402
from corral.supervisor.contracts.environment import Environments  # noqa: E402
from tests.corpus.runner import as_repo, git, projects  # noqa: E402


async def once(name: str) -> tuple[float, float, bool]:
    project = next(p for p in projects() if p.name == name)
    with tempfile.TemporaryDirectory(prefix="corral-setup-") as tmp:
        base = Path(tmp)
        repo = as_repo(project, base)
        contract = draft_contract(repo, "bench")
        envs = Environments(base / "state")
        times: list[float] = []
        reused = False
        for n in (1, 2):
            worktree = base / f"wt{n}"
            git(repo, "worktree", "add", "-q", "--detach", str(worktree))
            started = time.monotonic()
            run = await envs.prepare(contract, worktree)
            times.append(time.monotonic() - started)
            assert run is not None and run.outcome.ok, run and run.outcome.output_tail
            reused = run.outcome.cached
        return times[0], times[1], reused


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--project", nargs="*", default=["packaging", "markupsafe", "concat-map"])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    rebuilt = []
    for name in args.project:
        results = [asyncio.run(once(name)) for _ in range(args.runs)]
        first = statistics.median(r[0] for r in results)
        cached = statistics.median(r[1] for r in results)
        how = "reused" if all(r[2] for r in results) else "REBUILT"
        if how == "REBUILT":
            rebuilt.append(name)
        print(
            f"{name}: first setup {first:.2f}s, second worktree {cached * 1000:.1f}ms ({how}), "
            f"{first / max(cached, 1e-6):.0f}x faster (median of {args.runs} runs)"
        )
    if rebuilt:
        print(f"REBUILT in a second worktree (must be reused): {', '.join(rebuilt)}")
        return 1
    return 0


if __name__ == "__main__":
    from load import run_with_load  # bench/load.py: --load N busy loops

    sys.exit(run_with_load(lambda: main()))
