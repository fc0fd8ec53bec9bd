"""What the operator's exam and hidden checks add to verifying a session on a
host (not a test): a real sshd on 127.0.0.1 (tests/fakes/sshd.py) stands for
the host. Prints medians.

The project is bench/judge.py's (`--files` source files, a pytest suite of
`--tests` files); its worktree is made on the host from the mirror there and
changed honestly there (three source files, a dependency, a new test file).
Each run, as `Verifier.exam_on_tree` runs it for a host session:

- the checks' own time: the suite in a fresh checkout of the snapshot on the
  host (what a host verification ran before the exam existed);
- the exam: fetching the snapshot home and building its exam here (the
  honest change touches no judge file, so nothing is pushed and nothing else
  runs) — budget: <= 10 % of the checks' own time;
- one hidden check (`sh` of one file) in a checkout of its own on the host,
  its file written in and taken out (outside the budget: the operator asked
  for it; said for scale);
- a rigged change (a test file edited): fetch, build and the push of the
  exam to the host's mirror, before the checks run twice by design.

Exits 1 over budget.

Run: .venv/bin/python bench/host_exam.py [--runs N] [--files N] [--tests N]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from judge import honest_change, make_project  # bench/judge.py

from corral.supervisor.contracts.hidden import HiddenStore
from corral.supervisor.contracts.judge import build_exam, discover
from corral.supervisor.gates.host_tree import HostTree, hidden_in_host_scratch, in_host_scratch
from corral.supervisor.hosts.place import HostPlace
from corral.supervisor.hosts.settings import HostSettings
from corral.supervisor.models import (
    CoderSession,
    ContractCheck,
    HiddenCheck,
    HiddenFile,
    OutcomeContract,
)
from tests.fakes.sshd import sshd_missing, start_sshd

BUDGET_SHARE = 0.10
PY = sys.executable


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--tests", type=int, default=60)
    args = parser.parse_args()
    missing = sshd_missing()
    if missing:
        print(f"cannot run: {missing}")
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        server = start_sshd(Path(tmp) / "sshd")
        settings = HostSettings(
            name="benchhost",
            destination=server.alias,
            state_dir=str(server.remote_root / "state"),
            ssh_options=server.ssh_options(),
        )
        place = HostPlace(settings, Path(tmp) / "state")
        try:
            return await measure(place, Path(tmp), args)
        finally:
            place.close()
            server.stop()


async def measure(place: HostPlace, tmp: Path, args: argparse.Namespace) -> int:
    repo = tmp / "repo"
    start = make_project(repo, args.files, args.tests)
    sid = "bench0000000000000000001"
    _mirror, path = await asyncio.to_thread(place.make_worktree, repo, start, sid)
    session = CoderSession(
        id=sid, repo=str(repo), intent="bench", start_commit=start, remote_worktree=path
    )
    check = ContractCheck(name="tests", command=f"PYTHONPATH=. {PY} -m pytest -p no:cacheprovider")
    bare = OutcomeContract(description="bench", checks=[check])
    [base] = await in_host_scratch(place, session, bare, None)
    assert base.passed, base.output_tail
    contract = bare.model_copy(update={"judge_files": discover(repo, start, bare, [base])})
    store = HiddenStore(tmp / "state")
    held = store.absorb(
        contract.model_copy(
            update={
                "hidden_checks": [
                    HiddenCheck(
                        name="hidden_true",
                        command="sh held.sh",
                        files=[HiddenFile(path="held.sh", content="true\n")],
                    )
                ]
            }
        )
    )

    honest_change(Path(path))  # the "host" is a directory tree on this machine
    there = HostTree(place, session)
    tree = await there.snapshot()
    checks: list[float] = []
    exams: list[float] = []
    hidden: list[float] = []
    for _ in range(args.runs):
        t0 = time.perf_counter()
        await there.fetch(tree)
        exam = await asyncio.to_thread(build_exam, repo, start, tree, contract)
        exams.append(time.perf_counter() - t0)
        assert exam.tree == tree and not exam.changes, exam
        t0 = time.perf_counter()
        results = await there.checks_on_tree(contract, None, tree, baseline=[base])
        checks.append(time.perf_counter() - t0)
        assert all(r.passed for r in results), results
        t0 = time.perf_counter()
        [secret] = await hidden_in_host_scratch(
            place, session, held, None, store, snapshot=there._commits[tree]
        )
        hidden.append(time.perf_counter() - t0)
        assert secret.passed and secret.hidden, secret.output_tail

    test0 = Path(path) / "tests" / "test_0.py"
    test0.write_text(test0.read_text().replace("assert value_0(0)", "assert True or value_0(0)"))
    rigged: list[float] = []
    for _ in range(args.runs):
        fresh = HostTree(place, session)  # nothing sent yet
        rigged_tree = await fresh.snapshot()
        t0 = time.perf_counter()
        await fresh.fetch(rigged_tree)
        exam = await asyncio.to_thread(build_exam, repo, start, rigged_tree, contract)
        await fresh.send(exam.tree)
        rigged.append(time.perf_counter() - t0)
        assert exam.tree != rigged_tree and exam.changes

    check_ms, exam_ms = median_ms(checks), median_ms(exams)
    share = exam_ms / check_ms
    print(f"project: {args.files} source files, {args.tests} test files, on host {place.name}")
    print(f"the checks' own time on the host:          median {check_ms:7.1f} ms")
    print(
        f"the exam (fetch + build, honest change):   median {exam_ms:7.1f} ms "
        f"= {share:.1%} of the checks (first run {exams[0] * 1000:.1f} ms)"
    )
    print(
        f"one hidden check in its own host checkout: median {median_ms(hidden):7.1f} ms "
        "(the operator asked for it)"
    )
    print(
        f"a rigged change (fetch + build + push):    median {median_ms(rigged):7.1f} ms "
        "(then the checks run twice, by design)"
    )
    print(f"budget: the exam adds <= {BUDGET_SHARE:.0%} of the checks' own time")
    if share > BUDGET_SHARE:
        print("OVER BUDGET")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
