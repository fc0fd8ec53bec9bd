"""What hidden checks cost (not a test): prints medians, with and without.

- verification: one visible check (`true`) on a fresh checkout of a tree, as
  the verifier runs it; then the same plus one hidden check (`true`, one
  file) in a checkout of its own (the ready checkout moved back to the tree
  and cleaned, the file written in and removed), as the verifier runs hidden
  checks. The difference is what a hidden check adds besides its own command.
- redaction: what an agent's `history` costs to redact (`for_agent`) for a
  session of many check results.

Exits 1 when the median added verification time is over the budget (1 s).

Run: .venv/bin/python bench/hidden.py [--files 10000] [--runs 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from corral.supervisor.contracts.checks import run_command
from corral.supervisor.contracts.hidden import HiddenStore, for_agent, materialized
from corral.supervisor.gates.scratch_tree import ScratchTrees
from corral.supervisor.models import CheckResult, HiddenCheck, HiddenFile
from corral.supervisor.workspaces import Workspaces

BUDGET_SECS = 1.0


def sh(cwd: Path, cmd: str) -> str:
    return subprocess.run(
        cmd, shell=True, cwd=cwd, check=True, capture_output=True, text=True
    ).stdout


def make_repo(root: Path, files: int) -> str:
    sh(root, "git init -q -b main && git config user.name b && git config user.email b@b")
    for i in range(files):
        d = root / f"pkg{i % 100}"
        d.mkdir(exist_ok=True)
        (d / f"mod{i}.py").write_text("".join(f"line {j}\n" for j in range(20)))
    sh(root, "git add -A && git commit -qm base")
    return sh(root, "git rev-parse HEAD").strip()


async def visible(repo: Path, tree: str, start: str, trees: ScratchTrees) -> None:
    async with trees.materialized(repo, tree, start, "bench") as path:
        await run_command("true", path, 60)


async def with_hidden(
    repo: Path, tree: str, start: str, trees: ScratchTrees, store: HiddenStore, check: HiddenCheck
) -> None:
    await visible(repo, tree, start, trees)
    async with trees.materialized(repo, tree, start, "bench") as path:
        files = materialized(path, [check], store)
        await asyncio.to_thread(files.__enter__)
        try:
            await run_command("true", path, 60)
        finally:
            await asyncio.to_thread(files.__exit__, None, None, None)


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=10_000, help="files in the repository")
    parser.add_argument("--runs", type=int, default=5, help="runs per median")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        repo, state = Path(tmp) / "repo", Path(tmp) / "state"
        repo.mkdir()
        state.mkdir()
        start = make_repo(repo, args.files)
        tree = sh(repo, "git rev-parse HEAD^{tree}").strip()
        workspaces = Workspaces(state, state / "leases.db")
        trees = ScratchTrees(workspaces)
        store = HiddenStore(state)
        sha = store.put(b"def test_more():\n    assert 7 * 8 == 56\n")
        check = HiddenCheck(
            name="hidden_more",
            command="true",
            files=[HiddenFile(path="tests/test_more.py", sha256=sha)],
        )
        await visible(repo, tree, start, trees)  # the first checkout is made once
        plain, hidden = [], []
        for _ in range(args.runs):
            t = time.perf_counter()
            await visible(repo, tree, start, trees)
            plain.append(time.perf_counter() - t)
            t = time.perf_counter()
            await with_hidden(repo, tree, start, trees, store, check)
            hidden.append(time.perf_counter() - t)
        trees.close()
        workspaces.close()
    added = statistics.median(hidden) - statistics.median(plain)
    load = os.getloadavg()[0]
    print(
        f"repository: {args.files} files, {args.runs} runs (load {load:.1f}, {os.cpu_count()} cores)"
    )
    print(f"verification, visible check only: median {statistics.median(plain) * 1000:.0f} ms")
    print(f"verification, plus one hidden check: median {statistics.median(hidden) * 1000:.0f} ms")
    print(f"added by one hidden check (besides its command): {added * 1000:.0f} ms")

    results = [
        CheckResult(
            name=f"c{i}", passed=i % 2 == 0, output_tail="x" * 2000, hidden=i % 3 == 0
        ).model_dump(mode="json")
        for i in range(5000)
    ]
    history = [
        {"seq": i, "kind": "check_completed", "data": {"result": r}} for i, r in enumerate(results)
    ]
    t = time.perf_counter()
    redacted = for_agent(history)
    took = time.perf_counter() - t
    size = len(json.dumps(history))
    print(f"redaction of a 5000-event history ({size // 1024} KiB): {took * 1000:.0f} ms")
    assert len(redacted) == len(history)
    if added > BUDGET_SECS:
        print(f"over the budget of {BUDGET_SECS:.0f} s")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
