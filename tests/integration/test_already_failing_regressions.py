"""A regression inside a test already failing on the untouched tree, on real
runs (pytest, unittest, node's test runner): pox's shape, where `test_utils`
fails on this host at its last assertion and the regression breaks
`pattern()`, which the same test asserts first. Before, it failed either way
and was delivered; now it fails differently (earlier), and is refused by name.
The same failure unchanged is delivered, a fix that makes it pass is too, and
a test that fails at a place that moves by itself is named flaky, not the
work's."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from corral.supervisor.contracts.checks import run_check
from corral.supervisor.models import CheckResult, CheckVerdict, ContractCheck
from corral.supervisor.states import CoderState
from tests.conftest import SupervisorFactory, git
from tests.fakes.scripted import ScriptedDrafter, ScriptedEngine, Write, contract

PY = sys.executable
S = CoderState

UTILS = (
    "import os\n\n"
    "def pattern(items, sep=';'):\n    return sep.join(str(i) for i in items)\n\n"
    "def homedir():\n    return '/nonexistent/home/of/the/author'\n\n"
    "def double(x):\n    return 2 * x\n"
)
# the regression breaks pattern(), which test_utils asserts before the line
# that fails on this host (a home directory only its author has)
BROKEN = UTILS.replace("sep.join(str(i) for i in items)", "','.join(str(i) for i in items)")
# a change that leaves test_utils failing as it did
OTHER_WORK = UTILS.replace("return 2 * x", "return x + x")
# a change that fixes what test_utils asserts last
FIXED = UTILS.replace("'/nonexistent/home/of/the/author'", "os.path.expanduser('~')")

PYTEST_TESTS = (
    "import os\n"
    "from utils import double, homedir, pattern\n\n\n"
    "def test_double():\n    assert double(2) == 4\n\n\n"
    "def test_utils():\n"
    "    assert pattern(['a', 'b']) == 'a;b'\n"  # line 10
    "    assert pattern([]) == ''\n"
    "    assert homedir() == os.path.expanduser('~')\n"  # line 12: red on the untouched tree
)

UNITTEST_TESTS = (
    "import os\nimport unittest\n\nfrom utils import double, homedir, pattern\n\n\n"
    "class TestUtils(unittest.TestCase):\n"
    "    def test_double(self):\n        self.assertEqual(double(2), 4)\n\n"
    "    def test_utils(self):\n"
    "        self.assertEqual(pattern(['a', 'b']), 'a;b')\n"  # line 12
    "        self.assertEqual(homedir(), os.path.expanduser('~'))\n"  # line 13
)

NODE_UTILS = (
    "exports.pattern = (items) => items.join(';');\n"
    "exports.homedir = () => '/nonexistent/home/of/the/author';\n"
    "exports.double = (x) => 2 * x;\n"
)
NODE_TESTS = (
    "const test = require('node:test');\nconst assert = require('assert');\n"
    "const os = require('os');\nconst u = require('./utils.js');\n\n"
    "test('double', () => assert.equal(u.double(2), 4));\n"
    "test('utils', () => {\n"
    "  assert.equal(u.pattern(['a', 'b']), 'a;b');\n"  # line 8
    "  assert.equal(u.homedir(), os.homedir());\n"  # line 9
    "});\n"
)


# checks run this interpreter: confined unless it lives under /tmp (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("interpreter_visible")


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def _rewrite(path: Path, text: str) -> None:
    """The work's edit of a module: often the same size, maybe in the same
    second as the run before, so its mtime is moved on, or Python could run
    the bytecode an earlier run cached for the old text."""
    path.write_text(text)
    later = path.stat().st_mtime + 5
    os.utime(path, (later, later))


async def _three_ways(check: ContractCheck, root: Path, utils: str, broken: str) -> CheckResult:
    """The untouched tree's run, then the work unchanged, then the regression;
    returns the regression's result."""
    base = await run_check(check, root, untouched=True)
    assert base.passed and base.verdict is CheckVerdict.PASSES, base.output_tail
    assert base.tests is not None and len(base.already_failing) == 1
    same = await run_check(check, root, before=base)
    assert same.passed, same.output_tail
    _rewrite(root / utils, broken)
    result = await run_check(check, root, before=base)
    # before, the regression hid behind the red test and passed here
    assert not result.passed and result.verdict is CheckVerdict.FAILS, result.output_tail
    assert "each failing as it did there" in same.output_tail
    return result


@pytest.mark.slow
async def test_pytest_an_already_failing_test_that_now_fails_earlier_is_refused_by_name(
    tmp_path: Path,
) -> None:
    root = _tree(tmp_path, {"utils.py": UTILS, "tests/test_utils.py": PYTEST_TESTS})
    check = ContractCheck(
        name="tests", command=f"PYTHONPATH=. {PY} -m pytest -q -p no:cacheprovider tests"
    )
    broken = await _three_ways(check, root, "utils.py", BROKEN)
    assert broken.reason == (
        "1 test(s) already failing on the untouched tree fail differently now: "
        "tests.test_utils::test_utils was already failing at line 12 of tests/test_utils.py "
        "(AssertionError); now fails at line 10 of tests/test_utils.py (AssertionError): "
        "the work changed what it does"
    )
    _rewrite(root / "utils.py", UTILS)
    base = await run_check(check, root, untouched=True)
    assert base.already_failing == ["tests.test_utils::test_utils"]
    # gate 1 says a regression in it is seen only where it changes how it fails
    assert "a regression in it is seen only if it changes where or how it fails" in (
        base.output_tail
    )
    # a correct change that fixes it: the test passes, the check too
    _rewrite(root / "utils.py", FIXED)
    fixed = await run_check(check, root, before=base)
    assert fixed.passed and fixed.exit_code == 0, fixed.output_tail


@pytest.mark.slow
async def test_pytest_the_same_failure_under_other_work_is_delivered(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"utils.py": UTILS, "tests/test_utils.py": PYTEST_TESTS})
    check = ContractCheck(
        name="tests", command=f"PYTHONPATH=. {PY} -m pytest -q -p no:cacheprovider tests"
    )
    base = await run_check(check, root, untouched=True)
    _rewrite(root / "utils.py", OTHER_WORK)
    ok = await run_check(check, root, before=base)
    assert ok.passed and ok.verdict is CheckVerdict.PASSES
    assert "tests.test_utils::test_utils, each failing as it did there" in ok.output_tail


@pytest.mark.slow
async def test_unittest_an_already_failing_test_that_now_fails_earlier_is_refused(
    tmp_path: Path,
) -> None:
    root = _tree(
        tmp_path,
        {"utils.py": UTILS, "tests/__init__.py": "", "tests/test_utils.py": UNITTEST_TESTS},
    )
    check = ContractCheck(name="tests", command=f"{PY} -m unittest -v tests.test_utils")
    broken = await _three_ways(check, root, "utils.py", BROKEN)
    assert "tests.test_utils.TestUtils.test_utils was already failing at line 13 of " in (
        broken.reason
    )
    assert "now fails at line 12 of tests/test_utils.py (AssertionError)" in broken.reason


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
async def test_node_test_runner_an_already_failing_test_that_now_fails_earlier_is_refused(
    tmp_path: Path,
) -> None:
    root = _tree(tmp_path, {"utils.js": NODE_UTILS, "utils.test.js": NODE_TESTS})
    check = ContractCheck(name="tests", command="node --test", timeout_secs=60)
    broken = await _three_ways(
        check, root, "utils.js", NODE_UTILS.replace("join(';')", "join(',')")
    )
    assert broken.reason == (
        "1 test(s) already failing on the untouched tree fail differently now: utils was "
        "already failing at line 9 of utils.test.js (AssertionError); now fails at line 8 of "
        "utils.test.js (AssertionError): the work changed what it does"
    )


# fails at one of two lines, in turn (a counter in the checkout): where it
# fails moves by itself, with no work at all
WANDERING = (
    "from pathlib import Path\n\n\n"
    "def test_wanders():\n"
    "    counter = Path('runs.txt')\n"
    "    runs = int(counter.read_text()) if counter.exists() else 0\n"
    "    counter.write_text(str(runs + 1))\n"
    "    assert runs % 2 == 1\n"
    "    assert runs < 0\n"
)


@pytest.mark.slow
async def test_a_test_whose_failure_moves_by_itself_is_named_flaky_not_the_works(
    tmp_path: Path,
) -> None:
    root = _tree(tmp_path, {"tests/test_w.py": WANDERING})
    check = ContractCheck(name="tests", command=f"{PY} -m pytest -q -p no:cacheprovider tests")
    base = await run_check(check, root, untouched=True)  # run 0: fails at line 8
    # run 1 fails at line 9 (differently), its re-run (run 2) at line 8 as before
    moved = await run_check(check, root, before=base)
    assert moved.passed and moved.verdict is CheckVerdict.PASSES, moved.output_tail
    assert moved.flaky == ["tests.test_w::test_wanders"]
    assert base.tests is not None and base.tests.failed_at["tests.test_w::test_wanders"].line == 8
    assert "where they fail is not stable: a regression in them cannot be seen" in (
        moved.output_tail
    )


REGRESSED = "        self.sections = sections_data['pytest']['regressed']"


def _iniconfig_project(root: Path) -> str:
    """A copy of iniconfig (which pytest reads pytest.ini with) as a project
    with one test; returns the module with the regression that kills pytest
    at start (packaging 24.2's shape: its regression inverted version
    ordering and pytest, which imports packaging, died before reporting)."""
    import iniconfig

    shutil.copytree(
        Path(iniconfig.__file__).parent,
        root / "src" / "iniconfig",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    _tree(
        root,
        {
            "pytest.ini": "[pytest]\naddopts = -q\n",
            "tests/test_ic.py": (
                "from iniconfig import IniConfig\n\n\ndef test_parse():\n"
                "    assert IniConfig('x', data='[a]\\nb = 1\\n')['a']['b'] == '1'\n"
            ),
        },
    )
    text = (root / "src" / "iniconfig" / "__init__.py").read_text()
    assert "        self.sections = sections_data\n" in text
    return text.replace("        self.sections = sections_data\n", REGRESSED + "\n")


CRASH = (
    "the test runner failed before it reported any test (it did on the untouched tree): "
    "its traceback ends in src/iniconfig/__init__.py line {line} (KeyError: 'regressed'), "
    "{whose}: the work broke something the runner itself imports or runs"
)
CRASH_CHECK = f"PYTHONPATH=src {PY} -m pytest -p no:cacheprovider tests"


@pytest.mark.slow
async def test_a_runner_that_dies_in_a_file_of_the_tree_is_named_not_cannot_judge(
    tmp_path: Path,
) -> None:
    root = tmp_path / "proj"
    broken_module = _iniconfig_project(root)
    check = ContractCheck(name="tests", command=CRASH_CHECK)
    base = await run_check(check, root, untouched=True)
    assert base.passed and base.tests is not None and base.tests.passed, base.output_tail
    _rewrite(root / "src" / "iniconfig" / "__init__.py", broken_module)
    broken = await run_check(check, root, before=base)
    assert not broken.passed and broken.verdict is CheckVerdict.FAILS
    line = broken_module.splitlines().index(REGRESSED) + 1
    assert broken.reason == CRASH.format(line=line, whose="a file of the tree checked")


@pytest.mark.slow
async def test_verification_says_the_runner_died_in_a_file_this_work_changed(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    broken_module = _iniconfig_project(repo)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "iniconfig")
    engine = ScriptedEngine([[Write("src/iniconfig/__init__.py", broken_module)]])
    drafted = contract(("tests", CRASH_CHECK), description="tidy iniconfig")
    sup = await make_supervisor(drafter=ScriptedDrafter([drafted]), engine=engine, repair_invokes=0)
    result = await sup.start("tidy iniconfig", repo)
    [base] = result.baseline
    assert base.passed and base.tests is not None, base.output_tail
    assert await sup.confirm(result.session_id) == {"state": "running"}
    row = await sup.wait_for(result.session_id, needs=True, timeout=90)
    assert row.state is not S.NEEDS_APPROVAL, row
    [red] = sup.get(result.session_id).session.last_check_results
    assert not red.passed and red.verdict is CheckVerdict.FAILS
    line = broken_module.splitlines().index(REGRESSED) + 1
    assert red.reason == CRASH.format(line=line, whose="a file this work changed")
    assert red.reason in red.output_tail  # the agent and the operator read it too


BIG_FAILURES = (
    "from utils import double\n\n\n"
    "def test_double():\n    assert double(2) == 4\n\n\n"
    "def test_big_a():\n    raise AssertionError('x' * 3_000_000)\n\n\n"
    "def test_big_b():\n    raise AssertionError('y' * 3_000_000)\n\n\n"
    "def test_big_c():\n    raise AssertionError('z' * 3_000_000)\n"
)


@pytest.mark.slow
async def test_a_junit_report_over_8_mb_is_read_per_test(tmp_path: Path) -> None:
    """packaging 24.2's regression failed 2,874 version comparisons: pytest's
    JUnit report (each failure with its traceback) was 12 MB, over the 8 MB
    cap, and the verdict was "cannot judge: no per-test report" — not the
    runner crash it was taken for. Read as a stream, it is judged by name."""
    root = _tree(tmp_path, {"utils.py": UTILS, "tests/test_big.py": BIG_FAILURES})
    check = ContractCheck(
        name="tests", command=f"PYTHONPATH=. {PY} -m pytest -q -p no:cacheprovider tests"
    )
    base = await run_check(check, root, untouched=True)
    assert base.passed and base.verdict is CheckVerdict.PASSES, base.output_tail[-500:]
    assert len(base.already_failing) == 3
    _rewrite(root / "utils.py", UTILS.replace("return 2 * x", "return 3 * x"))
    broken = await run_check(check, root, before=base)
    assert not broken.passed
    assert broken.reason == (
        "1 test(s) that passed on the untouched tree fail now: tests.test_big::test_double"
    )
