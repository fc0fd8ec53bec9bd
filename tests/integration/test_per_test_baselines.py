"""Per-test baselines end to end, on real git repos with real pytest and
node --test runs: a suite with one genuinely failing, unrelated test still
delivers a correct change (the failing test is named at gate 1 as not this
task's work), and a change that breaks a test that passed before is refused
with that test's name."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from corral.supervisor.contracts.checks import run_check
from corral.supervisor.models import CheckVerdict, ContractCheck
from corral.supervisor.states import CoderState
from tests.conftest import SupervisorFactory, commit_files, git, plan_texts
from tests.fakes.scripted import ScriptedDrafter, ScriptedEngine, Write, contract

S = CoderState
PY = sys.executable

CALC = "def add(a, b):\n    return a + b\n"
TESTS = (
    "from calc import add\n\n"
    "def test_add():\n    assert add(2, 3) == 5\n\n"
    "def test_unrelated_bug():\n    assert round(2.675, 2) == 2.68  # float rounding: fails\n"
)
TEST_MUL = "from calc import mul\n\ndef test_mul():\n    assert mul(2, 3) == 6\n"


pytestmark = pytest.mark.usefixtures("interpreter_visible")


def _project(repo: Path) -> Path:
    files = {"calc.py": CALC, "tests/test_calc.py": TESTS}
    return commit_files(repo, files, "calc with one failing test")


def _suite(**kw: object) -> object:
    return contract(
        ("tests", f"PYTHONPATH=. {PY} -m pytest -q -p no:cacheprovider tests"),
        description="add mul(a, b) to calc",
        **kw,
    )


@pytest.mark.slow
async def test_a_correct_change_is_delivered_despite_an_unrelated_failing_test(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    _project(repo)
    drafted = _suite(must_pass=["tests/test_mul.py::test_mul"])
    engine = ScriptedEngine(
        [
            [
                Write("calc.py", CALC + "\ndef mul(a, b):\n    return a * b\n"),
                Write("tests/test_mul.py", TEST_MUL),
            ]
        ]
    )
    sup = await make_supervisor(drafter=ScriptedDrafter([drafted]), engine=engine)
    result = await sup.start("add mul(a, b) to calc", repo)
    assert result.state is S.CONTRACT_PROPOSED
    [base] = result.baseline
    # red only because the named new test does not exist yet: the work
    assert base.verdict is CheckVerdict.FAILS and "test_mul" in base.reason
    assert base.tests is not None
    assert base.tests.failed == ["tests.test_calc::test_unrelated_bug"]

    assert await sup.confirm(result.session_id) == {"state": "running"}
    row = await sup.wait_for(result.session_id, needs=True, timeout=90)
    assert row.state is S.NEEDS_APPROVAL
    [verified] = sup.get(result.session_id).session.last_check_results
    assert verified.passed and verified.verdict is CheckVerdict.PASSES
    assert "already failing on the untouched tree: tests.test_calc::test_unrelated_bug" in (
        verified.output_tail
    )
    delivered = await sup.approve(result.session_id)
    assert delivered.state is S.MERGED and delivered.branch
    assert "def mul" in git(repo, "show", f"{delivered.branch}:calc.py")


@pytest.mark.slow
async def test_gate_one_names_tests_already_failing_and_a_regression_is_refused_by_name(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    _project(repo)
    engine = ScriptedEngine([[Write("calc.py", "def add(a, b):\n    return a - b\n")]])
    sup = await make_supervisor(
        drafter=ScriptedDrafter([_suite()]), engine=engine, repair_invokes=0
    )
    result = await sup.start("add mul(a, b) to calc", repo)
    [base] = result.baseline
    assert base.passed and base.verdict is CheckVerdict.PASSES  # never blocking
    assert base.already_failing == ["tests.test_calc::test_unrelated_bug"]
    texts = plan_texts(sup, result.session_id)
    assert any(
        "already failing on the untouched tree (1): not this task's work" in t
        and "test_unrelated_bug" in t
        # gate 1 says what that costs: a regression in it is seen only where
        # it changes how the test fails (pytest said where it fails)
        and "this test was already failing: a regression in it is seen only if it changes "
        "where or how it fails"
        in t
        for t in texts
    ), texts

    assert await sup.confirm(result.session_id) == {"state": "running"}
    row = await sup.wait_for(result.session_id, needs=True, timeout=90)
    assert row.state is not S.NEEDS_APPROVAL, row
    [red] = sup.get(result.session_id).session.last_check_results
    assert not red.passed and red.verdict is CheckVerdict.FAILS
    assert "passed on the untouched tree fail now: tests.test_calc::test_add" in red.reason
    assert "test_unrelated_bug" not in red.reason
    assert git(repo, "branch", "--list", "corral/*").strip() == ""


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
async def test_node_test_runner_baseline_and_regression(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "a.test.js").write_text(
        "const test = require('node:test'); const assert = require('assert');\n"
        "test('adds', () => assert.equal(1 + 1, 2));\n"
        "test('zone', () => assert.equal(new Date(0).getTimezoneOffset(), 99));\n"
    )
    check = ContractCheck(name="tests", command="node --test", timeout_secs=60)
    base = await run_check(check, root, untouched=True)
    assert base.passed and base.already_failing == ["zone"]
    fine = await run_check(check, root, before=base)
    assert fine.passed
    (root / "a.test.js").write_text(
        (root / "a.test.js").read_text().replace("1 + 1, 2", "1 + 1, 3")
    )
    broken = await run_check(check, root, before=base)
    assert not broken.passed and broken.verdict is CheckVerdict.FAILS
    assert broken.reason == "1 test(s) that passed on the untouched tree fail now: adds"


GO_TESTS = """package calc

import "testing"

func TestAdd(t *testing.T) {
	if Add(2, 3) != 5 {
		t.Fatalf("Add(2, 3) = %d", Add(2, 3))
	}
}

func TestUnrelatedBug(t *testing.T) {
	t.Fatal("fails on the untouched tree")
}
"""


@pytest.mark.slow
@pytest.mark.skipif(
    shutil.which("go") is None, reason="go is not installed (.ci/run: apt-get install golang-go)"
)
async def test_go_test_is_judged_test_by_test_from_its_json_events(tmp_path: Path) -> None:
    root = tmp_path / "calc"
    (root / "sub").mkdir(parents=True)
    (root / "go.mod").write_text("module example.com/calc\n\ngo 1.19\n")
    (root / "calc.go").write_text("package calc\n\nfunc Add(a, b int) int { return a + b }\n")
    (root / "calc_test.go").write_text(GO_TESTS)
    # the same test name in another package: a failure there is not hidden by this one
    (root / "sub" / "sub.go").write_text("package sub\n\nfunc One() int { return 1 }\n")
    (root / "sub" / "sub_test.go").write_text(
        'package sub\n\nimport "testing"\n\n'
        'func TestAdd(t *testing.T) {\n\tif One() != 1 {\n\t\tt.Fatal("one")\n\t}\n}\n'
    )
    check = ContractCheck(name="go_test", command="go test ./...", timeout_secs=300)
    base = await run_check(check, root, untouched=True)
    assert base.passed, base.output_tail
    assert base.already_failing == ["example.com/calc.TestUnrelatedBug"]
    # what the agent and the operator read is go's own text, not its JSON events
    assert "--- FAIL: TestUnrelatedBug" in base.output_tail
    assert '"Action"' not in base.output_tail
    (root / "sub" / "sub.go").write_text("package sub\n\nfunc One() int { return 2 }\n")
    broken = await run_check(check, root, before=base)
    assert not broken.passed and broken.verdict is CheckVerdict.FAILS
    assert broken.reason == (
        "1 test(s) that passed on the untouched tree fail now: example.com/calc/sub.TestAdd"
    )


@pytest.mark.slow
async def test_pytest_options_in_the_environment_are_kept_with_the_report(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "calc.py").write_text(CALC)
    (root / "tests").mkdir()
    (root / "tests" / "test_calc.py").write_text(TESTS)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(Path.home()), "PYTEST_ADDOPTS": "-k add"}
    check = ContractCheck(
        name="tests", command=f"PYTHONPATH=. {PY} -m pytest -q -p no:cacheprovider tests"
    )
    result = await run_check(check, root, env=env, untouched=True)
    assert result.passed and result.tests is not None
    assert result.tests.passed == ["tests.test_calc::test_add"]  # -k add still applied
    assert result.tests.failed == []
