"""What running the checks on a fresh checkout of the verified tree costs
(not a test): prints medians, before and after, in the same run.

On a 10,000-file repository with a small change, one verification attempt:

- before: snapshot the worktree, one check in the worktree, snapshot again
  (the checks ran where the agent worked);
- after: snapshot, a fresh checkout of that tree (the checkout the last
  checks used, moved to this tree and cleaned, as the verifier does; the
  first attempt makes it), the same check in it, snapshot again.
- fresh: the same, but each time a new checkout from objects, removed
  afterwards (what the first verification of a repository costs).

Exits 1 when the median added time is over the budget (1 s).

Run: .venv/bin/python bench/verify_tree.py
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from corral.supervisor.contracts.checks import run_command
from corral.supervisor.gates.scratch_tree import ScratchTrees
from corral.supervisor.git.trees import snapshot_tree
from corral.supervisor.workspaces import Workspaces

RUNS = 5
FILES = 10_000
BUDGET_SECS = 1.0
CHECK = "test -s pkg0/mod0.py"


def sh(cwd: Path, cmd: str) -> str:
    return subprocess.run(
        cmd, shell=True, cwd=cwd, check=True, capture_output=True, text=True
    ).stdout


def make_repo(root: Path) -> str:
    sh(root, "git init -q -b main && git config user.name b && git config user.email b@b")
    for i in range(FILES):
        d = root / f"pkg{i % 100}"
        d.mkdir(exist_ok=True)
        (d / f"mod{i}.py").write_text("".join(f"line {j}\n" for j in range(20)))
    sh(root, "git add -A && git commit -qm base")
    return sh(root, "git rev-parse HEAD").strip()


async def before(worktree: Path) -> None:
    first = snapshot_tree(worktree)
    await run_command(CHECK, worktree, 60)
    assert snapshot_tree(worktree) == first


async def after(worktree: Path, repo: Path, start: str, trees: ScratchTrees) -> None:
    first = await asyncio.to_thread(snapshot_tree, worktree)
    async with trees.materialized(repo, first, start, "bench") as scratch:
        await run_command(CHECK, scratch, 60)
        (scratch / "written-by-the-check.txt").write_text("x\n")
    assert await asyncio.to_thread(snapshot_tree, worktree) == first


async def main() -> int:
    global RUNS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=RUNS, help=f"runs per median ({RUNS})")
    RUNS = parser.parse_args().runs
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        repo.mkdir()
        start = make_repo(repo)
        worktree = Path(tmp) / "wt"
        sh(repo, f"git worktree add -q --detach {worktree} {start}")
        (worktree / "pkg1" / "mod1.py").write_text("changed\n")
        (worktree / "new.py").write_text("new\n")
        state = Path(tmp) / "state"
        state.mkdir()
        workspaces = Workspaces(state, state / "leases.db")
        reused = ScratchTrees(workspaces)
        old: list[float] = []
        new: list[float] = []
        cold: list[float] = []
        await after(worktree, repo, start, reused)  # the first one makes it
        for i in range(RUNS):  # interleaved, so load hits all alike
            (worktree / "pkg2" / "mod2.py").write_text(f"attempt {i}\n")  # a new tree each time
            t = time.perf_counter()
            await before(worktree)
            old.append(time.perf_counter() - t)
            t = time.perf_counter()
            await after(worktree, repo, start, reused)
            new.append(time.perf_counter() - t)
            fresh = ScratchTrees(workspaces)
            t = time.perf_counter()
            await after(worktree, repo, start, fresh)
            fresh.close()  # removing it is part of the cost
            cold.append(time.perf_counter() - t)
        reused.close()
        workspaces.close()
    b, a, c = statistics.median(old), statistics.median(new), statistics.median(cold)
    load = os.getloadavg()[0]
    print(
        f"{FILES} files, median of {RUNS}: before {b:.3f}s  after {a:.3f}s  added {a - b:.3f}s"
        f"  (a fresh checkout each time: {c:.3f}s, added {c - b:.3f}s)"
        f"  (load average {load:.1f} on {os.cpu_count()} cores)"
    )
    if a - b > BUDGET_SECS:
        print(f"over budget: {a - b:.3f}s added > {BUDGET_SECS:.1f}s")
        return 1
    return 0


if __name__ == "__main__":
    from load import run_with_load  # bench/load.py: --load N busy loops

    sys.exit(run_with_load(lambda: asyncio.run(main())))
