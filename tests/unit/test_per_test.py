"""Per-test outcomes read from each runner's report, and the verdict a
test-suite check gets against the untouched tree's report."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from corral.supervisor.contracts.per_test import against_baseline, on_untouched_tree
from corral.supervisor.contracts.test_reports import (
    PYTEST_REPORT,
    parse_jest_json,
    parse_junit,
    parse_output,
    plan_for,
)
from corral.supervisor.models import ContractCheck, TestReport

JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="tests.test_a" name="test_ok" time="0.001" />
<testcase classname="tests.test_a" name="test_bad"><failure message="assert 0">E assert 0</failure></testcase>
<testcase classname="tests.test_a" name="test_skip"><skipped message="skip"/></testcase>
<testcase classname="tests.test_a.TestK" name="test_m" />
</testsuite></testsuites>"""

JUNIT_COLLECTION = """<testsuites><testsuite><testcase classname="" name="tests.test_b">
<error message="collection failure">ImportError while importing test module
tests/test_b.py:1: in &lt;module&gt;
    from tests import OrderedDict
E   ImportError: cannot import name 'OrderedDict' from 'tests'</error></testcase></testsuite></testsuites>"""

TAP = """TAP version 13
# Subtest: adds
ok 1 - adds
  ---
  duration_ms: 2.2
  ...
# Subtest: fails
not ok 2 - fails
  ---
  error: '1 == 2'
  ...
# Subtest: suite
    # Subtest: inner ok
    ok 1 - inner ok
    # Subtest: later
    ok 2 - later # SKIP
    1..2
ok 3 - suite
1..3
# pass 3
"""

GO = """=== RUN   TestAdd
--- PASS: TestAdd (0.00s)
=== RUN   TestZone
    zone_test.go:9: unknown time zone
--- FAIL: TestZone (0.00s)
FAIL
"""

CARGO = """running 3 tests
test tests::adds ... ok
test tests::zone ... FAILED
test tests::slow ... ignored

test result: FAILED. 1 passed; 1 failed; 1 ignored
"""


def test_pytest_junit_names_each_test_and_keeps_collection_errors_apart() -> None:
    report = parse_junit(JUNIT)
    assert report is not None
    assert report.passed == ["tests.test_a.TestK::test_m", "tests.test_a::test_ok"]
    assert report.failed == ["tests.test_a::test_bad"]
    assert report.skipped == ["tests.test_a::test_skip"]
    broken = parse_junit(JUNIT_COLLECTION)
    assert broken is not None and broken.passed == [] and broken.failed == []
    assert broken.collection_errors == [
        "tests.test_b: ImportError: cannot import name 'OrderedDict' from 'tests'"
    ]


def test_a_report_that_is_not_xml_or_empty_is_no_report() -> None:
    assert parse_junit("") is None
    assert parse_junit("<testsuites><testcase") is None
    assert parse_junit("<testsuites></testsuites>") is None


def test_node_tap_names_subtests_by_their_parents() -> None:
    report = parse_output(TAP)
    assert report is not None
    assert report.passed == ["adds", "suite", "suite > inner ok"]
    assert report.failed == ["fails"]
    assert report.skipped == ["suite > later"]


def test_go_and_cargo_outputs_are_read_per_test() -> None:
    go = parse_output(GO)
    assert go is not None and go.passed == ["TestAdd"] and go.failed == ["TestZone"]
    cargo = parse_output(CARGO)
    assert cargo is not None
    assert (cargo.passed, cargo.failed, cargo.skipped) == (
        ["tests::adds"],
        ["tests::zone"],
        ["tests::slow"],
    )
    events = "\n".join(
        json.dumps(e)
        for e in [
            {"Action": "run", "Package": "p", "Test": "TestA"},
            {"Action": "pass", "Package": "p", "Test": "TestA"},
            {"Action": "fail", "Package": "p", "Test": "TestB"},
            {"Action": "fail", "Package": "p"},
        ]
    )
    go_json = parse_output(events)
    assert go_json is not None and go_json.passed == ["p.TestA"] and go_json.failed == ["p.TestB"]


def test_unittest_verbose_output_is_read_per_test() -> None:
    output = (
        "test_a (test_u.T.test_a) ... ok\n"
        "test_b (test_u.T.test_b) ... FAIL\n"
        "test_c (test_u.T.test_c)\nParses a date. ... ERROR\n"
        "test_d (test_u.T.test_d) ... skipped 'no tz'\n\n"
        "======\nFAIL: test_b (test_u.T.test_b)\n"
    )
    report = parse_output(output)
    assert report is not None
    assert report.passed == ["test_u.T.test_a"]
    assert report.failed == ["test_u.T.test_b", "test_u.T.test_c"]
    assert report.skipped == ["test_u.T.test_d"]


def test_plain_output_has_no_report() -> None:
    assert parse_output("all good\n3 passed") is None


def test_jest_json_report() -> None:
    data = {
        "testResults": [
            {
                "name": "/r/a.test.js",
                "status": "failed",
                "assertionResults": [
                    {"fullName": "adds", "status": "passed"},
                    {"fullName": "zone", "status": "failed"},
                    {"fullName": "later", "status": "pending"},
                ],
            },
            {"name": "/r/b.test.js", "status": "failed", "message": "Cannot find module 'x'"},
        ]
    }
    report = parse_jest_json(json.dumps(data))
    assert report is not None
    assert report.passed == ["/r/a.test.js > adds"]
    assert report.failed == ["/r/a.test.js > zone"]
    assert report.collection_errors == ["/r/b.test.js: Cannot find module 'x'"]


def test_jest_test_files_are_named_from_the_checkout_the_check_ran_in(tmp_path: Path) -> None:
    """fastest-levenshtein: jest names a test file by its absolute path, the
    scratch checkout's; the untouched tree's run and the verification's may be
    in different checkouts, and a test must keep its name between them."""
    first, second = tmp_path / "checkout-1", tmp_path / "checkout-2"
    reports = []
    for checkout in (first, second):
        data = {
            "testResults": [
                {
                    "name": str(checkout / "test.js"),
                    "assertionResults": [{"fullName": "test compare", "status": "passed"}],
                },
                {
                    "name": "/elsewhere/x.test.js",
                    "assertionResults": [{"fullName": "adds", "status": "failed"}],
                },
            ]
        }
        reports.append(parse_jest_json(json.dumps(data), checkout))
    assert reports[0] == reports[1]
    assert reports[0] is not None
    assert reports[0].passed == ["test.js > test compare"]
    assert reports[0].failed == ["/elsewhere/x.test.js > adds"]  # outside: kept whole


def test_only_pytest_is_asked_for_a_report_and_the_command_is_untouched(tmp_path: Path) -> None:
    plan = plan_for("python -m pytest -q tests", tmp_path)
    assert str(tmp_path / PYTEST_REPORT) in plan.env["PYTEST_ADDOPTS"]
    assert plan_for("npm test", tmp_path).env == {}
    (tmp_path / PYTEST_REPORT).write_text(JUNIT)
    report = plan.read("whatever the output says")
    assert report is not None and "tests.test_a::test_bad" in report.failed


def test_a_lone_go_test_is_asked_for_json_events_and_shown_as_text(tmp_path: Path) -> None:
    plan = plan_for("go test ./...", tmp_path)
    assert plan.env == {"GOFLAGS": "-json", "GOPROXY": "off"}
    assert plan_for("go test ./...", tmp_path, network=True).env == {"GOFLAGS": "-json"}
    # GOFLAGS reaches every go command: `go vet -json` would exit 0 on findings
    assert plan_for("go vet ./... && go test ./...", tmp_path).env == {}
    assert plan_for("go test -json ./...", tmp_path).env == {}
    events = [
        {"Action": "output", "Package": "p", "Test": "TestA", "Output": "=== RUN   TestA\n"},
        {"Action": "output", "Package": "p", "Test": "TestA", "Output": "--- FAIL: TestA\n"},
        {"Action": "fail", "Package": "p", "Test": "TestA"},
    ]
    output = "# p\n./a.go:3: syntax error\n" + "".join(json.dumps(e) + "\n" for e in events)
    assert plan.shown(output) == "# p\n./a.go:3: syntax error\n=== RUN   TestA\n--- FAIL: TestA\n"
    report = plan.read(output)
    assert report is not None and report.failed == ["p.TestA"]
    assert plan_for("npm test", tmp_path).shown(output) == output


def test_a_report_dir_swapped_for_a_link_is_not_read(tmp_path: Path) -> None:
    private = tmp_path / "private"
    private.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / PYTEST_REPORT).write_text(JUNIT)
    plan = plan_for("pytest", private)
    private.rmdir()
    private.symlink_to(elsewhere)  # what a check could do to its own private dir
    assert plan.read("") is None


def test_a_jest_output_file_outside_the_checkout_is_never_read(tmp_path: Path) -> None:
    outside = tmp_path / "secret.json"
    outside.write_text(json.dumps({"testResults": []}))
    checkout = tmp_path / "co"
    checkout.mkdir()
    plan = plan_for("npx jest --json --outputFile=../secret.json", None, checkout)
    assert plan.jest_file is None
    inside = plan_for("npx jest --json --outputFile=out/r.json", None, checkout)
    assert inside.jest_file == (checkout / "out" / "r.json").resolve()
    # the command swaps its output directory for a link out of the checkout meanwhile
    (checkout / "out").symlink_to(tmp_path)
    (tmp_path / "r.json").write_text(json.dumps({"testResults": [{"name": "secret"}]}))
    assert inside.read("") is None
    (checkout / "out").unlink()
    (checkout / "out").mkdir()
    report = {
        "testResults": [{"name": "a", "assertionResults": [{"title": "t", "status": "passed"}]}]
    }
    (checkout / "out" / "r.json").write_text(json.dumps(report))
    read = inside.read("")
    assert read is not None and read.passed == ["a > t"]


DRAFTED_JEST = 'npm test -- --ci --json --outputFile="${CORRAL_TEST_REPORT:-jest-report.json}"'


async def test_a_drafted_jest_check_s_report_is_read_from_its_private_directory(
    tmp_path: Path,
) -> None:
    """A real process writes the JSON report where $CORRAL_TEST_REPORT says
    (the check's private directory); one planted in the checkout under the
    fallback name is never what is read."""
    from corral.supervisor.contracts.checks import run_check

    checkout = tmp_path / "co"
    checkout.mkdir()
    planted = {
        "testResults": [
            {"name": "x", "assertionResults": [{"title": "forged", "status": "passed"}]}
        ]
    }
    (checkout / "jest-report.json").write_text(json.dumps(planted))
    real = {
        "testResults": [
            {
                "name": "lev.test.js",
                "assertionResults": [
                    {"fullName": "distance two", "status": "passed"},
                    {"fullName": "distance one", "status": "failed"},
                ],
            }
        ]
    }
    write = f'printf %s {shlex.quote(json.dumps(real))} > "$CORRAL_TEST_REPORT"; exit 1'
    command = DRAFTED_JEST.replace("npm test -- --ci --json", write + " #")
    assert (
        plan_for(command, tmp_path / "private")
        .env["CORRAL_TEST_REPORT"]
        .endswith("test-report.json")
    )
    result = await run_check(ContractCheck(name="tests", command=command), checkout)
    assert result.tests is not None
    assert result.tests.passed == ["lev.test.js > distance two"]
    assert result.tests.failed == ["lev.test.js > distance one"]
    # no report written: no per-test report, never the planted file
    silent = await run_check(
        ContractCheck(name="tests", command="true # $CORRAL_TEST_REPORT"), checkout
    )
    assert silent.tests is None


SUITE = ContractCheck(name="tests", command="pytest -q")


def _report(passed: list[str], failed: list[str], skipped: list[str] | None = None) -> TestReport:
    return TestReport(passed=passed, failed=failed, skipped=skipped or [])


def test_a_baseline_whose_only_red_is_failing_tests_passes_and_names_them() -> None:
    judged = on_untouched_tree(SUITE, 1, _report(["a"], ["zone1", "zone2"]))
    assert judged is not None and judged.passed
    assert judged.already_failing == ("zone1", "zone2")
    assert "already failing on the untouched tree (2)" in judged.note
    assert "these 2 tests were already failing: a regression in them cannot be seen" in judged.note
    assert on_untouched_tree(SUITE, 0, _report(["a"], [])) is None  # plain green
    # a red exit no failed test explains keeps the exit-code semantics
    assert on_untouched_tree(SUITE, 1, _report(["a"], [])) is None
    broken = TestReport(collection_errors=["tests.x: ImportError"])
    assert on_untouched_tree(SUITE, 2, broken) is None


def test_tests_the_contract_names_are_red_on_the_untouched_tree_until_they_pass() -> None:
    named = SUITE.model_copy(update={"must_pass": ["tests/test_a.py::test_new"]})
    judged = on_untouched_tree(named, 0, _report(["tests.test_a::test_ok"], []))
    assert judged is not None and not judged.passed and "test_new" in judged.note
    now = _report(["tests.test_a::test_ok", "tests.test_a::test_new"], [])
    assert against_baseline(named, 0, now, _report(["tests.test_a::test_ok"], [])) is None


def test_verification_refuses_a_regression_by_name_and_ignores_old_failures() -> None:
    before = _report(["a", "b"], ["zone"])
    ok = against_baseline(SUITE, 1, _report(["a", "b", "new"], ["zone"]), before)
    assert ok is not None and ok.passed and "zone" in ok.note
    # said at gate 2 too: a test failing before hides whatever the work did to it
    assert "this test was already failing: a regression in it cannot be seen" in ok.note
    regressed = against_baseline(SUITE, 1, _report(["a", "new"], ["b", "zone"]), before)
    assert regressed is not None and not regressed.passed
    assert "passed on the untouched tree fail now: b" in regressed.note
    new_red = against_baseline(SUITE, 1, _report(["a", "b"], ["zone", "new"]), before)
    assert new_red is not None and not new_red.passed and "failing: new" in new_red.note
    skipped = against_baseline(SUITE, 0, _report(["a"], [], ["b"]), before)
    assert skipped is not None and not skipped.passed and "skipped now: b" in skipped.note


def test_a_suite_the_change_stops_collecting_fails_as_the_works() -> None:
    # an emptied package: its test modules no longer import. The untouched
    # tree collected in the same environment, so this is the work, not the host
    before = _report(["tests.test_a::test_ok"], [])
    broken = TestReport(collection_errors=["tests.test_a: ImportError: cannot import name 'f'"])
    judged = against_baseline(SUITE, 2, broken, before)
    assert judged is not None and not judged.passed
    assert judged.note.startswith("the tests no longer collect (they did on the untouched tree)")
    assert "cannot import name 'f'" in judged.note
    # a suite that never collected here keeps the exit-code semantics (cannot run, with why)
    assert against_baseline(SUITE, 2, broken, broken) is None


def test_checks_with_other_assertions_keep_exit_code_semantics() -> None:
    grep = ContractCheck(name="out", command="pytest -q", output_contains="3 passed")
    assert on_untouched_tree(grep, 1, _report(["a"], ["zone"])) is None
    assert against_baseline(grep, 1, _report(["a"], ["zone"]), _report(["a"], ["zone"])) is None
