"""First setup vs cached setup for one real project, in the same run: the
conventions lane drafts the contract of a PyPI project (default: packaging,
a src-layout library with test requirements), its setup builds the
environment in one worktree, then a second worktree of the same repository
finds it ready. Prints both times and their ratio, as medians of `--runs`
fresh state dirs.

Run (from the repo root): .venv/bin/python bench/setup.py [--project packaging] [--runs 3]
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


async def once(name: str) -> tuple[float, float]:
    project = next(p for p in projects() if p.name == name)
    with tempfile.TemporaryDirectory(prefix="corral-setup-") as tmp:
        base = Path(tmp)
        repo = as_repo(project, base)
        contract = draft_contract(repo, "bench")
        envs = Environments(base / "state")
        times: list[float] = []
        for n in (1, 2):
            worktree = base / f"wt{n}"
            git(repo, "worktree", "add", "-q", "--detach", str(worktree))
            started = time.monotonic()
            run = await envs.prepare(contract, worktree)
            times.append(time.monotonic() - started)
            assert run is not None and run.outcome.ok, run and run.outcome.output_tail
            assert run.outcome.cached is (n == 2)
        return times[0], times[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--project", default="packaging")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    results = [asyncio.run(once(args.project)) for _ in range(args.runs)]
    first = statistics.median(r[0] for r in results)
    cached = statistics.median(r[1] for r in results)
    print(f"{args.project}: first setup {first:.2f}s, cached setup {cached * 1000:.1f}ms")
    print(f"cached is {first / max(cached, 1e-6):.0f}x faster (median of {args.runs} runs)")


if __name__ == "__main__":
    main()
