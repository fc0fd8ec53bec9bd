"""A verification's test that failed, then passed when the check ran again at
once, is flaky, not a regression, and is said so; a test that fails every
time is still the work's regression; a test the work adds never earns a
re-run (it must pass every time). Real pytest runs, per-test judged against a
real baseline run (contracts/checks.py `run_check`)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from corral.supervisor.contracts.checks import run_check
from corral.supervisor.models import CheckResult, CheckVerdict, ContractCheck

PY = sys.executable
SUITE = ContractCheck(name="tests", command=f"{PY} -m pytest -q -p no:cacheprovider tests")

# each run leaves a line in runs.log; `timing` fails when its marker is absent
# (and lays it, so the next run passes): a timing test under load
TESTS = """\
from pathlib import Path

HERE = Path(__file__).parent


def _ran(name):
    with (HERE / "runs.log").open("a") as log:
        log.write(name + "\\n")


def test_steady():
    _ran("steady")
    assert not (HERE / "broken").exists(), "the work broke it"


def test_timing():
    _ran("timing")
    marker = HERE / "warm"
    if not marker.exists():
        marker.write_text("")
        raise AssertionError("took 1.4 s, limit 1 s (a loaded machine)")
"""


pytestmark = pytest.mark.usefixtures("interpreter_visible")


async def _baseline(tree: Path) -> CheckResult:
    (tree / "tests").mkdir()
    (tree / "tests" / "test_suite.py").write_text(TESTS)
    (tree / "tests" / "warm").write_text("")  # every test passes on the untouched tree
    base = await run_check(SUITE, tree, untouched=True)
    assert base.passed and base.tests is not None
    assert sorted(base.tests.passed) == [
        "tests.test_suite::test_steady",
        "tests.test_suite::test_timing",
    ]
    (tree / "tests" / "runs.log").unlink()
    (tree / "tests" / "warm").unlink()  # the next run of test_timing fails once
    return base


def _runs(tree: Path) -> list[str]:
    return (tree / "tests" / "runs.log").read_text().split()


@pytest.mark.slow
async def test_a_test_that_fails_then_passes_on_an_immediate_rerun_is_flaky_not_a_regression(
    tmp_path: Path,
) -> None:
    base = await _baseline(tmp_path)
    verified = await run_check(SUITE, tmp_path, before=base)
    assert _runs(tmp_path).count("timing") == 2  # the check ran again, at once
    assert verified.passed and verified.verdict is CheckVerdict.PASSES
    assert verified.flaky == ["tests.test_suite::test_timing"]
    # said, never passed silently: the result, its note and its record name it
    assert "flaky, not counted as a regression: 1 test(s) failed, then passed" in (
        verified.output_tail
    )
    assert "tests.test_suite::test_timing" in verified.output_tail
    assert verified.model_dump()["flaky"] == ["tests.test_suite::test_timing"]


@pytest.mark.slow
async def test_a_test_that_fails_on_the_rerun_too_is_a_regression(tmp_path: Path) -> None:
    base = await _baseline(tmp_path)
    (tmp_path / "tests" / "broken").write_text("")  # the work's regression: fails every time
    verified = await run_check(SUITE, tmp_path, before=base)
    assert _runs(tmp_path).count("steady") == 2  # re-run once, still failing
    assert not verified.passed and verified.verdict is CheckVerdict.FAILS
    assert verified.flaky == []
    assert "passed on the untouched tree fail now: tests.test_suite::test_steady" in (
        verified.reason
    )


@pytest.mark.slow
async def test_a_flaky_test_beside_a_regression_does_not_hide_it(tmp_path: Path) -> None:
    base = await _baseline(tmp_path)
    (tmp_path / "tests" / "broken").write_text("")
    verified = await run_check(SUITE, tmp_path, before=base)
    # test_timing recovered on the re-run, test_steady did not: the check fails
    assert not verified.passed and verified.flaky == []
    assert "test_steady" in verified.reason


@pytest.mark.slow
async def test_a_test_the_work_adds_gets_no_rerun(tmp_path: Path) -> None:
    base = await _baseline(tmp_path)
    (tmp_path / "tests" / "warm").write_text("")
    added = (
        TESTS.replace("def test_timing", "def test_added_by_the_work")
        .replace("def test_steady", "def _steady")
        .replace('HERE / "warm"', 'HERE / "warm-added"')
    )
    (tmp_path / "tests" / "test_added.py").write_text(added)
    verified = await run_check(SUITE, tmp_path, before=base)
    assert _runs(tmp_path).count("timing") == 2  # one run: test_timing and the added test
    assert not verified.passed and verified.flaky == []
    assert "test_added_by_the_work" in verified.reason


@pytest.mark.slow
async def test_many_tests_failing_at_once_are_the_work_s_and_get_no_rerun(tmp_path: Path) -> None:
    """A flake is a test or a few; a change that breaks a dozen tests that
    passed is judged on its first run (a re-run of a large suite would only
    double a long verification: packaging's 2,874 ran past the deadline)."""
    many = "".join(
        f'\n\ndef test_case_{n}():\n    _ran("case")\n    assert not (HERE / "broken").exists()\n'
        for n in range(11)
    )
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_many.py").write_text(TESTS + many)
    (tmp_path / "tests" / "warm").write_text("")
    base = await run_check(SUITE, tmp_path, untouched=True)
    assert base.passed and base.tests is not None and len(base.tests.passed) == 13
    (tmp_path / "tests" / "runs.log").unlink()
    (tmp_path / "tests" / "broken").write_text("")  # 12 tests fail every time
    verified = await run_check(SUITE, tmp_path, before=base)
    assert _runs(tmp_path).count("steady") == 1  # judged on its first run
    assert not verified.passed and verified.flaky == []
    assert "test_case_10" in verified.reason or "more" in verified.reason
