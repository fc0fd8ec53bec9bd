"""Where a test already failing on the untouched tree fails, read from each
runner's report, and the verdict when the work makes it fail differently:
the regression hiding in a red test (pox's `test_utils`) is caught by name;
the same failure stays not counted; a failure whose site cannot be read
keeps saying that a regression in it cannot be seen."""

from __future__ import annotations

import json
from pathlib import Path

from corral.supervisor.contracts.per_test import (
    against_baseline,
    on_untouched_tree,
    same_failure,
    unseen_regressions,
)
from corral.supervisor.contracts.test_reports import parse_jest_json, parse_junit, parse_output
from corral.supervisor.models import ContractCheck, FailureSite, TestReport

CHECK = ContractCheck(name="tests", command="pytest -q tests")


def _junit(body: str, *, file: str = "tests/test_utils.py") -> str:
    return (
        '<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">'
        '<testcase classname="tests.test_utils" name="test_ok" file="tests/test_utils.py" />'
        f'<testcase classname="tests.test_utils" name="test_utils" file="{file}">'
        f'<failure message="m">{body}</failure></testcase></testsuite></testsuites>'
    )


# pytest's long traceback (its default), as junit's failure text carries it;
# the message holds an address that changes from run to run
LONG_AT_80 = """def test_utils():
        assert pattern(['a', 'b']) == 'a;b'
&gt;       assert homedir() == '/home/me'
E       AssertionError: assert '/root' == '/home/me' at 0x7f95e526a9d0

tests/test_utils.py:80: AssertionError"""
LONG_AT_31 = """def test_utils():
&gt;       assert pattern(['a', 'b']) == 'a;b'
E       AssertionError: assert 'a,b,' == 'a;b'

tests/test_utils.py:31: AssertionError"""
# an exception raised in the code under test: the innermost frame in the
# test's file is the call, the type is the innermost location's
LONG_IN_LIBRARY = """def test_utils():
&gt;       helper.boom()

tests/test_utils.py:31:
_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _

&gt;   def boom(): return {}["x"]
E   KeyError: 'x'

pox/helper.py:3: KeyError"""
SHORT_AT_31 = """tests/test_utils.py:31: in test_utils
    check(pattern(['a', 'b']))
tests/test_utils.py:4: in check
    assert x == 'a;b'
E   assert 'a,b,' == 'a;b'"""
NATIVE_AT_80 = """Traceback (most recent call last):
  File "/tmp/corral-scratch-1a2b/tests/test_utils.py", line 80, in test_utils
    assert homedir() == '/home/me'
AssertionError: assert '/root' == '/home/me'"""


def test_pytest_long_short_and_native_tracebacks_give_a_stable_site() -> None:
    long80 = parse_junit(_junit(LONG_AT_80))
    assert long80 is not None
    assert long80.failed_at == {
        "tests.test_utils::test_utils": FailureSite(
            kind="AssertionError",
            path="tests/test_utils.py",
            line=80,
            text="assert homedir() == '/home/me'",
        )
    }
    # nothing of the message (an address) is kept
    assert "0x7f" not in long80.model_dump_json()
    lib = parse_junit(_junit(LONG_IN_LIBRARY))
    assert lib is not None
    site = lib.failed_at["tests.test_utils::test_utils"]
    assert (site.kind, site.path, site.line, site.text) == (
        "KeyError",
        "tests/test_utils.py",
        31,
        "helper.boom()",
    )
    short = parse_junit(_junit(SHORT_AT_31))
    assert short is not None
    site = short.failed_at["tests.test_utils::test_utils"]
    # the innermost frame in the test file is the helper's assertion in it
    assert (site.kind, site.line, site.text) == ("AssertionError", 4, "assert x == 'a;b'")
    native = parse_junit(_junit(NATIVE_AT_80))
    assert native is not None
    site = native.failed_at["tests.test_utils::test_utils"]
    # named from the checkout, never the scratch tree's absolute path
    assert (site.kind, site.path, site.line) == ("AssertionError", "tests/test_utils.py", 80)


def test_a_failure_that_names_no_frame_in_the_test_file_has_no_site() -> None:
    line_style = parse_junit(_junit("E   assert 0"))  # --tb=line / --tb=no
    assert line_style is not None and line_style.failed == ["tests.test_utils::test_utils"]
    assert line_style.failed_at == {}
    # a frame in another file only (a fixture's): no site in the test
    elsewhere = parse_junit(_junit(LONG_IN_LIBRARY.replace("tests/test_utils.py:31", "x.py:1")))
    assert elsewhere is not None and elsewhere.failed_at == {}


def test_a_report_without_sites_reads_and_writes_as_before() -> None:
    report = TestReport(passed=["a"], failed=["b"])
    assert "failed_at" not in report.model_dump()
    assert TestReport.model_validate({"passed": ["a"], "failed": ["b"]}) == report


UNITTEST = """test_ok (tests.test_utils.TestUtils.test_ok) ... ok
test_utils (tests.test_utils.TestUtils.test_utils) ... FAIL

======================================================================
FAIL: test_utils (tests.test_utils.TestUtils.test_utils)
----------------------------------------------------------------------
Traceback (most recent call last):
  File "/tmp/scratch-9/pox/tests/helpers.py", line 3, in same
    return a == b
  File "/tmp/scratch-9/tests/test_utils.py", line {line}, in test_utils
    self.assertEqual(pattern(['a']), 'a')
  File "/usr/lib/python3.12/unittest/case.py", line 885, in assertEqual
    assertion_func(first, second, msg=msg)
AssertionError: 'a,' != 'a' (at 0x7f00)

----------------------------------------------------------------------
Ran 2 tests in 0.001s

FAILED (failures=1)
"""


def test_unittest_tracebacks_give_the_innermost_frame_in_the_test_module() -> None:
    report = parse_output(UNITTEST.format(line=12))
    assert report is not None and report.failed == ["tests.test_utils.TestUtils.test_utils"]
    site = report.failed_at["tests.test_utils.TestUtils.test_utils"]
    assert (site.kind, site.path, site.line) == ("AssertionError", "tests/test_utils.py", 12)
    assert site.text == "self.assertEqual(pattern(['a']), 'a')"


def test_jest_failure_messages_and_node_tap_diagnostics_give_sites(tmp_path: Path) -> None:
    stack = (
        "Error: expect(received).toBe(expected) // Object.is equality\n\n"
        "Expected: 2\nReceived: 3\n"
        f"    at Object.toBe ({tmp_path}/test/a.test.js:7:13)\n"
        "    at Promise.then.completed (/x/node_modules/jest-circus/build/utils.js:298:28)"
    )
    data = {
        "testResults": [
            {
                "name": f"{tmp_path}/test/a.test.js",
                "assertionResults": [
                    {"fullName": "adds", "status": "failed", "failureMessages": [stack]}
                ],
            }
        ]
    }
    report = parse_jest_json(json.dumps(data), tmp_path)
    assert report is not None
    assert report.failed_at == {
        "test/a.test.js > adds": FailureSite(kind="Error", path="test/a.test.js", line=7)
    }
    tap = (
        "TAP version 13\n# Subtest: zone\nnot ok 1 - zone\n  ---\n  duration_ms: 0.9\n"
        f"  location: '{tmp_path}/a.test.js:4:1'\n  failureType: 'testCodeFailure'\n"
        "  error: '0 == 99'\n  code: 'ERR_ASSERTION'\n  name: 'AssertionError'\n"
        "  stack: |-\n"
        f"    TestContext.<anonymous> ({tmp_path}/a.test.js:6:10)\n"
        "    Test.runInAsyncScope (node:async_hooks:206:9)\n  ...\n1..1\n"
    )
    node = parse_output(tap, tmp_path)
    assert node is not None
    assert node.failed_at == {"zone": FailureSite(kind="AssertionError", path="a.test.js", line=6)}
    # run elsewhere (no checkout to name it from): no site, never an absolute path
    elsewhere = parse_output(tap)
    assert elsewhere is not None and elsewhere.failed_at == {}


def _before(site: FailureSite | None) -> TestReport:
    return TestReport(
        passed=["t::ok"],
        failed=["t::red"],
        failed_at={"t::red": site} if site is not None else {},
    )


AT_80 = FailureSite(kind="AssertionError", path="t.py", line=80, text="assert homedir() == h")
AT_31 = FailureSite(kind="AssertionError", path="t.py", line=31, text="assert pattern(x) == y")


def test_an_already_failing_test_that_fails_earlier_is_the_works_and_named() -> None:
    now = TestReport(passed=["t::ok"], failed=["t::red"], failed_at={"t::red": AT_31})
    judged = against_baseline(CHECK, 1, now, _before(AT_80))
    assert judged is not None and not judged.passed
    assert judged.note == (
        "1 test(s) already failing on the untouched tree fail differently now: "
        "t::red was already failing at line 80 of t.py (AssertionError); now fails at "
        "line 31 of t.py (AssertionError): the work changed what it does"
    )
    assert judged.changed_only == ("t::red",)
    # another exception at the same line is different too
    other = AT_80.model_copy(update={"kind": "TypeError"})
    now = TestReport(passed=["t::ok"], failed=["t::red"], failed_at={"t::red": other})
    judged = against_baseline(CHECK, 1, now, _before(AT_80))
    assert judged is not None and not judged.passed and "(TypeError)" in judged.note
    # fails where its runner no longer says (it says where another fails):
    # not the failure it was
    elsewhere = FailureSite(kind="KeyError", path="u.py", line=3)
    now = TestReport(passed=["t::ok"], failed=["t::red", "u::new"], failed_at={"u::new": elsewhere})
    judged = against_baseline(CHECK, 1, now, _before(AT_80))
    assert judged is not None and not judged.passed
    assert "now fails at where its runner does not say" in judged.note
    # a run that says no test's site at all (its output cut) is not compared
    now = TestReport(passed=["t::ok"], failed=["t::red"])
    judged = against_baseline(CHECK, 1, now, _before(AT_80))
    assert judged is not None and judged.passed


def test_the_same_failure_passes_and_a_fixed_one_passes() -> None:
    same = TestReport(passed=["t::ok"], failed=["t::red"], failed_at={"t::red": AT_80})
    judged = against_baseline(CHECK, 1, same, _before(AT_80))
    assert judged is not None and judged.passed
    assert "already failing on the untouched tree: t::red, each failing as it did there" in (
        judged.note
    )
    assert "seen only if it changes where or how it fails" in judged.note
    fixed = TestReport(passed=["t::ok", "t::red"])
    assert against_baseline(CHECK, 0, fixed, _before(AT_80)) is None  # exit 0: passes
    # the test file extended above it (the agent's files): the line moved, its text did not
    moved = AT_80.model_copy(update={"line": 95})
    assert same_failure(AT_80, moved)
    assert not same_failure(AT_80, AT_80.model_copy(update={"text": "assert other()"}))


def test_a_failure_never_placed_on_the_untouched_tree_keeps_the_old_sentence() -> None:
    now = TestReport(passed=["t::ok"], failed=["t::red"], failed_at={"t::red": AT_31})
    judged = against_baseline(CHECK, 1, now, _before(None))
    assert judged is not None and judged.passed
    assert "this test was already failing: a regression in it cannot be seen" in judged.note
    base = on_untouched_tree(CHECK, 1, _before(AT_80))
    assert base is not None and base.passed
    assert "a regression in it is seen only if it changes where or how it fails" in base.note


def test_gate_sentences_say_which_tests_can_show_a_regression() -> None:
    assert unseen_regressions(1) == (
        "this test was already failing: a regression in it cannot be seen"
    )
    assert unseen_regressions(2, 2) == (
        "these 2 tests were already failing: a regression in them is seen only if it changes "
        "where or how one fails (the exception, or the line in the test)"
    )
    assert unseen_regressions(3, 1).endswith(
        "in the other 2 (their runner did not say where they fail) it cannot be seen"
    )


def test_go_json_events_give_the_first_reported_line_of_a_failing_test() -> None:
    def event(action: str, test: str, output: str = "") -> str:
        data = {"Action": action, "Package": "example.com/calc", "Test": test}
        if output:
            data["Output"] = output
        return json.dumps(data)

    output = "\n".join(
        [
            event("run", "TestZone"),
            event("output", "TestZone", "=== RUN   TestZone\n"),
            event("output", "TestZone", "    calc_test.go:14: zone = UTC (at 0xc000012345)\n"),
            event("output", "TestZone", "    calc_test.go:15: offset = 0\n"),
            event("fail", "TestZone"),
            event("run", "TestPanics"),
            event("output", "TestPanics", "panic: runtime error [recovered]\n"),
            event("output", "TestPanics", "    calc_test.go:20: never read\n"),
            event("fail", "TestPanics"),
        ]
    )
    report = parse_output(output)
    assert report is not None
    assert report.failed_at == {
        "example.com/calc.TestZone": FailureSite(kind="failed", path="calc_test.go", line=14)
    }  # a panic's goroutines and addresses are no stable site
