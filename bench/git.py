"""Git and verification figures (not a test): prints medians.

- snapshot a 10,000-file worktree, before and after in the same run: `git add
  -A` through a copy of the worktree's index (what corral did until it read
  file bytes itself) against `snapshot_tree` (bytes, no filters): on a fresh
  worktree, then again after 100 files changed (the stat cache warm). Budget
  (ARCHITECTURE.md): at most 1 s added on the fresh tree; exits 1 over it;
- snapshot and diff 1,000 changed files in a worktree (what verification and
  the approval gate need: the verified tree through a private index, then
  stat, numstat, name-status and patch against it): a figure, no budget;
- evaluate a 10-check contract (each check a real `bash -c` process): a
  figure, no budget.

Run: .venv/bin/python bench/git.py
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from corral.supervisor.contracts.checks import run_contract
from corral.supervisor.git.pins import pin_worktree
from corral.supervisor.git.run import git
from corral.supervisor.git.snapshot import PrivateIndex
from corral.supervisor.git.trees import snapshot_tree
from corral.supervisor.git.workspace import GitWorkspace
from corral.supervisor.models import ContractCheck, OutcomeContract

RUNS = 7


def sh(cwd: Path, cmd: str) -> str:
    return subprocess.run(
        cmd, shell=True, cwd=cwd, check=True, capture_output=True, text=True
    ).stdout


def make_repo(root: Path, files: int) -> str:
    sh(root, "git init -q -b main && git config user.name b && git config user.email b@b")
    for i in range(files):
        d = root / f"pkg{i % 20}"
        d.mkdir(exist_ok=True)
        (d / f"mod{i}.py").write_text("".join(f"line {j}\n" for j in range(40)))
    sh(root, "git add -A && git commit -qm base")
    return sh(root, "git rev-parse HEAD").strip()


def bench_diff(files: int = 1000) -> list[float]:
    times: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        repo.mkdir()
        base = make_repo(repo, files)
        for run in range(RUNS):
            wt = Path(tmp) / f"wt{run}"
            sh(repo, f"git worktree add -q --detach {wt} {base}")
            for i in range(files):
                p = wt / f"pkg{i % 20}" / f"mod{i}.py"
                p.write_text(p.read_text().replace("line 7\n", f"changed {run}\n"))
            ws = GitWorkspace(repo, wt)
            started = time.perf_counter()
            diff = ws.diff(base, snapshot_tree(wt))
            times.append(time.perf_counter() - started)
            assert len(diff.files) == files, len(diff.files)
            sh(repo, f"git worktree remove --force {wt}")
    return times


def add_all_tree(worktree: Path) -> str:
    """The snapshot as corral took it before: `git add -A` on a copy of the
    worktree's index (filters, conversions and all)."""
    with PrivateIndex(worktree) as index:
        git(worktree, "add", "-A", "--", ".", env=index.env, timeout=300)
        return git(worktree, "write-tree", env=index.env).strip()


def bench_snapshot(files: int = 10_000, changed: int = 100) -> dict[str, list[float]]:
    """Fresh and warm snapshot times for both ways, on pinned worktrees."""
    times: dict[str, list[float]] = {
        "git add -A, fresh": [],
        "bytes, fresh": [],
        "git add -A, 100 changed": [],
        "bytes, 100 changed": [],
    }
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        repo.mkdir()
        base = make_repo(repo, files)
        for run in range(RUNS):
            trees: dict[str, str] = {}
            for way, snap in (("git add -A", add_all_tree), ("bytes", snapshot_tree)):
                wt = Path(tmp) / "worktrees" / f"{way.split()[0]}{run}"
                wt.parent.mkdir(exist_ok=True)
                sh(repo, f"git worktree add -q --detach {wt} {base}")
                pin_worktree(wt, repo / ".git")
                time.sleep(2.1)  # the checkout's files are no longer "racily" new
                started = time.perf_counter()
                snap(wt)
                times[f"{way}, fresh"].append(time.perf_counter() - started)
                for i in range(changed):
                    p = wt / f"pkg{i % 20}" / f"mod{i}.py"
                    p.write_text(p.read_text().replace("line 7\n", f"changed {run}\n"))
                started = time.perf_counter()
                trees[way] = snap(wt)
                times[f"{way}, {changed} changed"].append(time.perf_counter() - started)
            assert trees["git add -A"] == trees["bytes"], trees  # the same tree either way
            sh(repo, "git worktree prune")
    return times


def bench_contract(checks: int = 10) -> list[float]:
    contract = OutcomeContract(
        checks=[
            ContractCheck(name=f"c{i}", command=f"test {i} -ge 0 && echo ok{i}", timeout_secs=10)
            for i in range(checks)
        ]
    )
    times: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(RUNS):
            started = time.perf_counter()
            results = asyncio.run(run_contract(contract, Path(tmp)))
            times.append(time.perf_counter() - started)
            assert all(r.passed for r in results)
    return times


def main() -> int:
    global RUNS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=RUNS, help=f"runs per median ({RUNS})")
    RUNS = parser.parse_args().runs
    snapshots = bench_snapshot()
    print(f"snapshot a 10,000-file worktree, {RUNS} runs (before: git add -A; after: bytes)")
    for what, runs in snapshots.items():
        print(f"  {what:<26} median {statistics.median(runs) * 1000:6.0f} ms")
    fresh = statistics.median(snapshots["bytes, fresh"])
    before = statistics.median(snapshots["git add -A, fresh"])
    over = fresh - before > 1.0
    print(
        f"  fresh tree: after/before = {fresh / before:.2f}, {(fresh - before) * 1000:+.0f} ms; "
        f"budget: at most 1 s added   {'OVER BUDGET' if over else 'OK'}"
    )
    diff = bench_diff()
    print(f"snapshot tree + diff, 1,000 changed files, {RUNS} runs")
    print("  runs (ms): " + ", ".join(f"{t * 1000:.0f}" for t in diff))
    print(f"  median: {statistics.median(diff) * 1000:.0f} ms")
    contract = bench_contract()
    print(f"evaluate a 10-check contract (10 bash processes, sequential), {RUNS} runs")
    print("  runs (ms): " + ", ".join(f"{t * 1000:.1f}" for t in contract))
    print(
        f"  median: {statistics.median(contract) * 1000:.1f} ms "
        f"({statistics.median(contract) * 100:.1f} ms per check)"
    )
    if over:
        print("OVER BUDGET: a fresh 10,000-file snapshot adds more than 1 s")
        return 1
    return 0


if __name__ == "__main__":
    from load import run_with_load  # bench/load.py: --load N busy loops

    sys.exit(run_with_load(lambda: main()))
