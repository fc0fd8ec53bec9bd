"""Benchmark of attestations (docs/attestation.md):

(a) Writing a delivery's attestation, as gate 2 does after the commit: read
    git's config, build the statement (a contract of 3 checks, per-test
    results of 500 tests, usage of two models) and write the note — unsigned,
    and signed with a throwaway SSH key (`gpg.format = ssh`). Median of the
    runs. Budget: <= 50 ms per delivery, each way.
(b) `corral verify`'s own overhead over running the checks, on a commit of
    a 10,000-file tree: the whole verification of one attested commit (read
    the note, check the commit, materialise the tree fresh, run the recorded
    check, compare, remove the tree) minus the time the check itself ran.
    Median of the runs, in the default temp dir (the budget's), and printed
    beside it with TMPDIR on a tmpfs (/dev/shm). Budget: <= 1 s.

Run: .venv/bin/python bench/verify_attestation.py [--runs N] [--files N]
Exits non-zero when a median is over its budget.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from corral.supervisor.gates.attestation import approver, attest, git_config, statement_for
from corral.supervisor.models import (
    CheckResult,
    CoderSession,
    ContractCheck,
    ModelUse,
    OutcomeContract,
    TestReport,
    TokenUse,
)
from corral.supervisor.provenance import Verification

BUDGET_WRITE_MS = 50.0
BUDGET_VERIFY_OVERHEAD_S = 1.0


def sh(cwd: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_AUTHOR_NAME="B", GIT_AUTHOR_EMAIL="b@example.com")
    env.update(GIT_COMMITTER_NAME="B", GIT_COMMITTER_EMAIL="b@example.com")
    return subprocess.run(
        list(args), cwd=cwd, env=env, check=True, capture_output=True, text=True
    ).stdout


def make_repo(root: Path, files: int) -> tuple[Path, str]:
    repo = root / "repo"
    repo.mkdir()
    sh(repo, "git", "init", "-q", "-b", "main")
    sh(repo, "git", "config", "user.email", "b@example.com")
    sh(repo, "git", "config", "user.name", "B")
    for i in range(files):
        d = repo / f"pkg{i % 100:02d}"
        d.mkdir(exist_ok=True)
        (d / f"mod{i}.py").write_text(f"VALUE = {i}\n")
    sh(repo, "git", "add", "-A")
    sh(repo, "git", "commit", "-q", "-m", "a large tree")
    return repo, sh(repo, "git", "rev-parse", "HEAD").strip()


def session_for(repo: Path, commit: str) -> CoderSession:
    tests = [f"test_{i}" for i in range(1, 501)]
    # The per-test check prints a TAP report of the 500 tests it records: a
    # check judged test by test at delivery is judged so again by verify.
    tap = 'echo "TAP version 13"; i=0; while [ $i -lt 500 ]; do i=$((i+1)); echo "ok $i - test_$i"; done'
    checks = [
        ContractCheck(name="tests", command=tap),
        ContractCheck(name="lint", command="true"),
        ContractCheck(name="types", command="true"),
    ]
    return CoderSession(
        id="c" * 32,
        repo=str(repo),
        intent="make the widget faster\n\nand keep the API",
        start_commit=commit,
        contract=OutcomeContract(description="the widget is fast", checks=checks),
        baseline=[CheckResult(name=c.name, passed=True) for c in checks],
        engine="claude",
        model="sonnet",
        model_use={"haiku": ModelUse(tokens_in=1200, tokens_out=300, cost_usd=0.001)},
        agent_usage={"sonnet": TokenUse(input=50_000, output=9_000, cache_read=200_000)},
        agent_cost_usd=0.42,
        last_check_results=[
            CheckResult(
                name="tests", passed=True, duration_ms=5400, tests=TestReport(passed=tests)
            ),
            CheckResult(name="lint", passed=True, duration_ms=800),
            CheckResult(name="types", passed=True, duration_ms=2100),
        ],
    )


def write_once(repo: Path, commit: str, tree: str, session: CoderSession) -> float:
    started = time.perf_counter()
    config = git_config(repo)
    statement = statement_for(
        session,
        commit=commit,
        tree=tree,
        results=session.last_check_results,
        delivery="branch",
        branch="corral/cccccccc",
        approved_by=approver(config),
    )
    attest(repo, commit, statement, config)
    return (time.perf_counter() - started) * 1000


def bench_write(repo: Path, commit: str, runs: int, keys: Path) -> tuple[float, float]:
    tree = sh(repo, "git", "rev-parse", f"{commit}^{{tree}}").strip()
    session = session_for(repo, commit)
    write_once(repo, commit, tree, session)  # the version lookup, once per process
    unsigned = statistics.median(write_once(repo, commit, tree, session) for _ in range(runs))
    key = keys / "id_ed25519"
    sh(keys, "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key))
    sh(repo, "git", "config", "gpg.format", "ssh")
    sh(repo, "git", "config", "user.signingkey", str(key))
    signed = statistics.median(write_once(repo, commit, tree, session) for _ in range(runs))
    sh(repo, "git", "config", "--unset", "gpg.format")
    sh(repo, "git", "config", "--unset", "user.signingkey")
    write_once(repo, commit, tree, session)  # leave an unsigned note for (b)
    return unsigned, signed


def bench_verify(repo: Path, commit: str, runs: int, tmp: str | None) -> tuple[float, float]:
    """Medians of verify's own overhead and its whole time; `tmp`: where its
    checkouts go (TMPDIR), None for the default temp dir."""
    overheads, totals = [], []
    before = tempfile.tempdir
    tempfile.tempdir = tmp
    try:
        for _ in range(runs):
            verification = Verification(repo)
            verdict = asyncio.run(verification.commit(commit))
            assert verdict.state == "verified", verdict.sentences
            overheads.append(verdict.seconds - verdict.checks_seconds)
            totals.append(verdict.seconds)
    finally:
        tempfile.tempdir = before
    return statistics.median(overheads), statistics.median(totals)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--files", type=int, default=10_000)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="corral-bench-attest-"))
    try:
        repo, commit = make_repo(root, args.files)
        keys = root / "keys"
        keys.mkdir()
        unsigned, signed = bench_write(repo, commit, args.runs, keys)
        overhead, total = bench_verify(repo, commit, max(3, args.runs // 2), None)
        shm = Path("/dev/shm")
        in_memory = (
            bench_verify(repo, commit, max(3, args.runs // 2), str(shm))
            if shm.is_dir() and os.access(shm, os.W_OK)
            else None
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    over = False
    for name, value, budget in (
        ("(a) write the attestation, unsigned", unsigned, BUDGET_WRITE_MS),
        ("(a) write the attestation, signed (ssh)", signed, BUDGET_WRITE_MS),
    ):
        mark = "ok" if value <= budget else "OVER BUDGET"
        over |= value > budget
        print(f"{name}: median {value:.1f} ms (budget {budget:.0f} ms) {mark}")
    mark = "ok" if overhead <= BUDGET_VERIFY_OVERHEAD_S else "OVER BUDGET"
    over |= overhead > BUDGET_VERIFY_OVERHEAD_S
    print(
        f"(b) corral verify's own overhead, {args.files:,}-file tree: median {overhead:.3f} s "
        f"(whole verification {total:.3f} s; budget {BUDGET_VERIFY_OVERHEAD_S:.0f} s) {mark}"
    )
    if in_memory is not None:
        print(
            f"    with TMPDIR=/dev/shm (a tmpfs): median {in_memory[0]:.3f} s "
            f"(whole verification {in_memory[1]:.3f} s)"
        )
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
