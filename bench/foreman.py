"""Benchmark of the foreman: wall time of a 5-way split against one agent doing
the same five edits in sequence, in the same run (alternating, so both see
the same machine load).

A repo of five independent modules and a contract over all of them. The
agent is a small `custom:` program in a real tmux pane (private socket) that
spends `--per-edit` seconds on each edit it is asked for (standing in for an
agent's thinking), then writes it. Timed: from confirm to the verified diff
waiting for approval (needs_approval), so each side's verification, and the
foreman's worktrees, child verifications and merge, are all inside.

A split exists to be faster: exits 1 when the split's median is not below
the single agent's in the same run.

Run: .venv/bin/python bench/foreman.py [--runs N] [--per-edit SECS]
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

from corral.supervisor.config import SupervisorConfig
from corral.supervisor.factory import build_supervisor
from corral.supervisor.interface import FixedDrafter
from corral.supervisor.models import ContractCheck, OutcomeContract
from corral.supervisor.states import CoderState

MODULES = ("a", "b", "c", "d", "e")

AGENT = r"""
import os, re, select, sys, time
per_edit = float(sys.argv[1])
sys.stdout.write("> "); sys.stdout.flush()
data = os.read(0, 65536)
while select.select([0], [], [], 0.5)[0]:
    more = os.read(0, 65536)
    if not more:
        break
    data += more
for value, path in re.findall(r"<<write (\S+) into (\S+)>>", data.decode(errors="replace")):
    time.sleep(per_edit)
    with open(path, "w") as fh:
        fh.write(value + "\n")
    print(f"wrote {path}", flush=True)
"""


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def make_repo(path: Path) -> Path:
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "bench@corral")
    git(path, "config", "user.name", "bench")
    for m in MODULES:
        (path / f"mod_{m}").mkdir()
        (path / f"mod_{m}" / "value.txt").write_text("old\n")
    git(path, "add", ".")
    git(path, "commit", "-qm", "init")
    return path


def write(m: str) -> str:
    return f"<<write {m.upper()} into mod_{m}/value.txt>>"


CONTRACT = OutcomeContract(
    checks=[
        ContractCheck(name=m, command=f"grep -qx {m.upper()} mod_{m}/value.txt", timeout_secs=30)
        for m in MODULES
    ]
)
SPLIT = {
    "subtasks": [
        {"id": f"s_{m}", "intent": f"module {m}: {write(m)}", "files": [f"mod_{m}/"], "checks": [m]}
        for m in MODULES
    ]
}
INTENT = "set every module: " + " ".join(write(m) for m in MODULES)


async def one_run(root: Path, agent: str, *, split: bool) -> float:
    """Seconds from confirm to needs_approval."""
    sup = build_supervisor(
        root / "state",
        FixedDrafter(CONTRACT),
        socket_dir=root / "tmux",
        config=SupervisorConfig(repair_invokes=1, max_session_wall_secs=600),
    )
    await sup.open()
    try:
        engine = f"foreman:custom:{agent}" if split else f"custom:{agent}"
        repo = make_repo(root / "repo")
        sid = (
            await sup.start(INTENT, repo, engine=engine, split=SPLIT if split else None)
        ).session_id
        began = time.monotonic()
        await sup.confirm(sid)
        row = await sup.wait_for(sid, {CoderState.NEEDS_APPROVAL, CoderState.FAILED}, timeout=600)
        took = time.monotonic() - began
        if row.state is not CoderState.NEEDS_APPROVAL:
            raise SystemExit(f"the {'split' if split else 'single'} run failed: {row.error}")
        return took
    finally:
        await sup.close()
        for sock in (root / "tmux").glob("*"):
            subprocess.run(["tmux", "-S", str(sock), "kill-server"], capture_output=True)


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--per-edit", type=float, default=3.0, help="seconds per edit")
    args = parser.parse_args()
    split_times: list[float] = []
    single_times: list[float] = []
    with tempfile.TemporaryDirectory(prefix="corral-bench-foreman-") as tmp:
        script = Path(tmp) / "agent.py"
        script.write_text(AGENT)
        agent = f"{sys.executable} {script} {args.per_edit}"
        for i in range(args.runs):
            for split in (True, False):  # alternating: the same load for both
                root = Path(tmp) / f"run{i}-{'split' if split else 'single'}"
                root.mkdir()
                took = await one_run(root, agent, split=split)
                (split_times if split else single_times).append(took)
                print(f"run {i + 1}: {'5-way split' if split else 'one agent  '} {took:6.1f} s")
    ms, mo = statistics.median(split_times), statistics.median(single_times)
    print(
        f"\nconfirm → verified diff, median of {args.runs} ({args.per_edit:.1f} s per edit):\n"
        f"  foreman, 5 subtasks in parallel: {ms:6.1f} s\n"
        f"  one agent, 5 edits in sequence:  {mo:6.1f} s\n"
        f"  speed-up: {mo / ms:.2f}x   {'OK' if ms < mo else 'NOT FASTER: the split must beat one agent'}"
    )
    return 0 if ms < mo else 1


if __name__ == "__main__":
    from load import run_with_load  # bench/load.py: --load N busy loops

    sys.exit(run_with_load(lambda: asyncio.run(main())))
