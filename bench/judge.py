"""What running the operator's exam adds to a verification (not a test):
building the exam tree with the gate-1 judge files (the diff from the start
commit, the section checks, the harness scan) as a share of the checks' own
time, on an honest change, where nothing else runs. Prints medians.

The project: `--files` source files in 50 packages and a pytest suite of
`--tests` test files (5 tests each), a `conftest.py`, a `pyproject.toml`
with a `[tool.pytest.ini_options]` section; the check is that suite with
pytest (its per-test report asked for, as verification does). The honest
change edits three source files, adds a dependency to `pyproject.toml` and
adds a new test file: a judged section-level file is read and compared, and
nothing is restored, so the exam tree is the delivered tree.

Also printed, outside the budget: finding the judge files at gate 1, and
the rigged case (a test file edited: the exam tree differs, so the checks
run twice by design).

Budget: the exam adds <= 10 % of the checks' own time (median over --runs).
Exits 1 over budget.

Run: .venv/bin/python bench/judge.py [--runs N] [--files N] [--tests N]
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
from corral.supervisor.contracts.judge import build_exam, discover
from corral.supervisor.git.trees import snapshot_tree
from corral.supervisor.models import ContractCheck, OutcomeContract

BUDGET_SHARE = 0.10
PY = sys.executable


def sh(cwd: Path, cmd: str) -> str:
    return subprocess.run(
        cmd, shell=True, cwd=cwd, check=True, capture_output=True, text=True
    ).stdout


def make_project(root: Path, files: int, tests: int) -> str:
    root.mkdir()
    sh(root, "git init -q -b main && git config user.name b && git config user.email b@b")
    for i in range(files):
        pkg = root / "app" / f"pkg{i % 50}"
        pkg.mkdir(parents=True, exist_ok=True)
        (pkg / "__init__.py").touch()
        (pkg / f"mod{i}.py").write_text(
            f"def value_{i}(x):\n    return x + {i}\n" + "".join(f"# line {j}\n" for j in range(30))
        )
    (root / "app" / "__init__.py").touch()
    (root / "tests").mkdir()
    for t in range(tests):
        i = t % files
        body = "".join(
            f"def test_{t}_{k}():\n    assert value_{i}({k}) == {k} + {i}\n\n\n" for k in range(5)
        )
        (root / "tests" / f"test_{t}.py").write_text(
            f"from app.pkg{i % 50}.mod{i} import value_{i}\n\n\n{body}"
        )
    (root / "conftest.py").write_text("import sys\n")
    (root / "pyproject.toml").write_text(
        '[project]\nname = "app"\nversion = "0"\n\n'
        '[tool.pytest.ini_options]\naddopts = "-q"\ntestpaths = ["tests"]\n'
    )
    sh(root, "git add -A && git commit -qm base")
    return sh(root, "git rev-parse HEAD").strip()


def honest_change(root: Path) -> None:
    for i in range(3):
        path = root / "app" / f"pkg{i % 50}" / f"mod{i}.py"
        path.write_text(path.read_text() + f"\n\ndef extra_{i}():\n    return {i}\n")
    pyproject = root / "pyproject.toml"
    pyproject.write_text(
        pyproject.read_text().replace('version = "0"\n', 'version = "0"\ndependencies = []\n')
    )
    (root / "tests" / "test_new.py").write_text(
        "from app.pkg0.mod0 import extra_0\n\n\ndef test_extra():\n    assert extra_0() == 0\n"
    )


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--tests", type=int, default=60)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        start = make_project(repo, args.files, args.tests)
        check = ContractCheck(
            name="tests", command=f"PYTHONPATH=. {PY} -m pytest -p no:cacheprovider"
        )
        bare = OutcomeContract(description="bench", checks=[check])
        base = await run_check(check, repo, untouched=True)
        assert base.passed and base.tests is not None, base.output_tail

        found: list[float] = []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            files = discover(repo, start, bare, [base])
            found.append(time.perf_counter() - t0)
        contract = bare.model_copy(update={"judge_files": files})

        honest_change(repo)
        tree = snapshot_tree(repo)
        checks: list[float] = []
        exams: list[float] = []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            exam = build_exam(repo, start, tree, contract)
            exams.append(time.perf_counter() - t0)
            assert exam.tree == tree and not exam.changes, exam
            t0 = time.perf_counter()
            result = await run_check(check, repo, before=base, judged=True)
            checks.append(time.perf_counter() - t0)
            assert result.passed, result.output_tail

        test0 = repo / "tests" / "test_0.py"
        test0.write_text(test0.read_text() + "\n\ndef test_rigged():\n    assert True\n")
        rigged_tree = snapshot_tree(repo)
        rigged: list[float] = []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            exam = build_exam(repo, start, rigged_tree, contract)
            rigged.append(time.perf_counter() - t0)
            assert exam.tree != rigged_tree and exam.changes

    check_ms, exam_ms = median_ms(checks), median_ms(exams)
    share = exam_ms / check_ms
    print(f"project: {args.files} source files, {args.tests} test files, {len(files)} judge files")
    print(f"judge files found at gate 1:       median {median_ms(found):7.1f} ms")
    print(f"the checks' own time (pytest):     median {check_ms:7.1f} ms")
    print(
        f"the exam (honest change, added):   median {exam_ms:7.1f} ms = {share:.1%} of the checks"
    )
    print(
        f"the exam tree of a rigged change:  median {median_ms(rigged):7.1f} ms "
        "(then the checks run twice, by design)"
    )
    print(f"budget: the exam adds <= {BUDGET_SHARE:.0%} of the checks' own time")
    if share > BUDGET_SHARE:
        print("OVER BUDGET")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
