"""Drafted checks print what corral judges test by test: a unittest suite
is drafted with `-v` (without it unittest names no passing test), so a test
that already fails on the untouched tree is named and does not block a
correct change, and a test the change breaks is refused by name."""

from __future__ import annotations

import sys
from pathlib import Path

from corral.supervisor.contracts.checks import run_check
from corral.supervisor.contracts.conventions import draft_contract
from corral.supervisor.models import CheckVerdict
from tests.unit.test_conventions import stub_bin, write

UNITTESTS = (
    "import unittest\n\nfrom calc import add\n\n\n"
    "class Calc(unittest.TestCase):\n"
    "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n"
    "    def test_unrelated_bug(self):\n        self.assertEqual(round(2.675, 2), 2.68)\n"
)


async def test_a_drafted_unittest_suite_is_judged_test_by_test(tmp_path: Path) -> None:
    root = tmp_path / "calc"
    write(root, "calc.py", "def add(a, b):\n    return a + b\n")
    write(root, "tests/testcalc.py", UNITTESTS)  # unittest's pattern, not pytest's
    # pytest is not on PATH: only the standard library's runner is drafted
    contract = draft_contract(root, "add mul", path=stub_bin(tmp_path, "python3"))
    [check] = contract.checks
    assert check.command.endswith(" -v"), check.command
    python = str(Path(sys.executable).parent)
    env = {"PATH": f"{python}:/usr/bin:/bin", "HOME": str(Path.home()), "PYTHONPATH": "."}
    base = await run_check(check, root, env=env, untouched=True)
    assert base.passed, base.output_tail
    assert base.already_failing == ["testcalc.Calc.test_unrelated_bug"]
    write(root, "calc.py", "def add(a, b):\n    return a * b + 1\n")  # not the same size
    broken = await run_check(check, root, env=env, before=base)
    assert not broken.passed and broken.verdict is CheckVerdict.FAILS
    assert "testcalc.Calc.test_add" in broken.reason
