"""Sandboxed check overhead: the median of N trivial checks (`true`) run the
way corral runs contract checks (`run_check` in a real worktree), inside the
bubblewrap sandbox and unconfined, interleaved in the same loop so both
medians come from one machine state. Budget: ≤ 20 ms of overhead.

Run (from the repo root): .venv/bin/python bench/sandbox.py [--runs 50]
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

from corral.supervisor.contracts.checks import run_check
from corral.supervisor.models import ContractCheck
from corral.supervisor.sandbox import SandboxPolicy, sandbox_status, set_active_policy

BUDGET_MS = 20.0


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


async def timed(check: ContractCheck, wt: Path, policy: SandboxPolicy) -> float:
    set_active_policy(policy)
    started = time.perf_counter()
    result = await run_check(check, wt)
    elapsed = (time.perf_counter() - started) * 1000
    assert result.passed, result.output_tail
    return elapsed


async def main(runs: int) -> int:
    status = sandbox_status()
    if not status.available:
        print(f"no sandbox can run here: {status.detail}")
        return 1
    with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp:
        repo, wt = Path(tmp) / "repo", Path(tmp) / "wt"
        repo.mkdir()
        git(repo, "init", "-q")
        git(
            repo,
            "-c",
            "user.name=b",
            "-c",
            "user.email=b@b",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "0",
        )
        git(repo, "worktree", "add", "-q", "--detach", str(wt))
        check = ContractCheck(name="noop", command="true")
        state = Path(tmp) / "state"  # the git view lives there, as in a session
        state.mkdir()
        on, off = SandboxPolicy(state_dir=state), SandboxPolicy(enabled=False)
        for policy in (on, off, on, off):  # warm up
            await timed(check, wt, policy)
        confined: list[float] = []
        bare: list[float] = []
        for _ in range(runs):
            confined.append(await timed(check, wt, on))
            bare.append(await timed(check, wt, off))
    a, b = statistics.median(confined), statistics.median(bare)
    verdict = "within" if a - b <= BUDGET_MS else "OVER"
    print(f"{runs} trivial checks (`true`), median per check:")
    print(f"  sandboxed   {a:7.2f} ms")
    print(f"  unconfined  {b:7.2f} ms")
    print(f"  overhead    {a - b:7.2f} ms ({verdict} the {BUDGET_MS:g} ms budget)")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    sys.exit(asyncio.run(main(parser.parse_args().runs)))
