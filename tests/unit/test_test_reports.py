"""Per-test names read from each runner's own output, as the runners print
them (captured from node-tap 16, tape 5, mocha 10, node 20, cargo 1.95 and
Python 3.11/3.10 unittest): a name never carries what changes from run to
run (a duration, a directive), or a failing test that was already failing
looks new on every run and no correct change can pass."""

from __future__ import annotations

from pathlib import Path

import pytest

from corral.supervisor.contracts.per_test import against_baseline, on_untouched_tree
from corral.supervisor.contracts.test_reports import parse_output, tap_point
from corral.supervisor.models import ContractCheck

CHECK = ContractCheck(name="tests", command="npm test")


def node_tap(time: str, other: str = "ok") -> str:
    """node-tap 16's output for two files, one with a failing test (the
    times differ on every run)."""
    return f"""TAP version 13
# Subtest: test/basic.js
    # Subtest: adds
        ok 1 - should be equal
        1..1
    ok 1 - adds # time=11.{time}ms

    # Subtest: fails
        not ok 1 - should be equal
          ---
          compare: ===
          ...

        1..1
        # failed 1 test
    not ok 2 - fails # time=13.{time}ms

    ok 3 - skipped # SKIP
    1..3
    # failed 1 of 3 tests
    # skip: 1
    # time=29.{time}ms
not ok 1 - test/basic.js # time=707.{time}ms
  ---
  file: test/basic.js
  ...

# Subtest: test/other.js
    {other} 1 - fine
    1..1
    # time=3.{time}ms
{other} 2 - test/other.js # time=41.{time}ms

1..2
# failed 1 of 2 tests
# time=751.{time}ms
"""


def test_node_tap_names_keep_no_directive() -> None:
    report = parse_output(node_tap("793"))
    assert report is not None
    every = report.passed + report.failed + report.skipped
    assert every and not any("#" in name or "time=" in name for name in every)
    assert "test/basic.js" in report.failed
    assert "test/basic.js > fails" in report.failed
    assert "test/basic.js > adds" in report.passed
    assert "test/other.js" in report.passed
    assert report.skipped == ["test/basic.js > skipped"]


def test_a_test_already_failing_under_node_tap_does_not_block_a_correct_change() -> None:
    """The issue's case: the same failing file, timed differently, is the
    same test; a test that passed before and fails now is still named."""
    before = parse_output(node_tap("793"))
    baseline = on_untouched_tree(CHECK, 1, before)
    assert baseline is not None and baseline.passed
    assert "test/basic.js" in baseline.already_failing
    after = against_baseline(CHECK, 1, parse_output(node_tap("101")), before)
    assert after is not None and after.passed, after
    broken = against_baseline(CHECK, 1, parse_output(node_tap("101", "not ok")), before)
    assert broken is not None and not broken.passed
    assert "test/other.js" in broken.note


def test_tap_directives_and_escapes() -> None:
    assert tap_point("adds # time=707.793ms") == ("adds", False)
    assert tap_point("later # SKIP not on this host") == ("later", True)
    assert tap_point("wip # todo") == ("wip", True)
    assert tap_point(r"top \# weird # time=1ms") == ("top # weird", False)
    assert tap_point("plain") == ("plain", False)


TAPE = """TAP version 13
# adds
ok 1 should be strictly equal
ok 2 should be strictly equal
# fails
ok 3 should be strictly equal
not ok 4 should be strictly equal
  ---
    operator: equal
    expected: 2
    actual:   1
    at: Test.<anonymous> (tape1.js:3:24)
  ...
# SKIP skipme
# TODO todo one
not ok 5 should be truthy # TODO
  ---
    operator: ok
  ...

1..5
# tests 5
# pass  3
# fail  1
"""


def test_tape_tests_are_named_by_their_comment_not_their_assertions() -> None:
    report = parse_output(TAPE)
    assert report is not None
    assert report.passed == ["adds"]
    assert report.failed == ["fails"]  # one red assertion fails its test
    assert report.skipped == ["skipme", "todo one"]


MOCHA = """

  math
    ✔ adds
    1) fails
    - skip
    ✔ slow (121ms)
    nested
      ✓ deep one (3ms)


  2 passing (125ms)
  1 pending
  1 failing

  1) math
       fails:

      AssertionError [ERR_ASSERTION]: 1 == 2
      + expected - actual

      -1
      +2
"""


def test_mocha_spec_output_is_read_per_test_without_durations() -> None:
    report = parse_output(MOCHA)
    assert report is not None
    assert report.passed == ["math > adds", "math > nested > deep one", "math > slow"]
    assert report.failed == ["math > fails"]
    assert report.skipped == ["math > skip"]


NPM_MOCHA = """
> calc@1.0.0 test
> mocha



  calc
    ✔ muls
    1) muls
    ✔ adds


  2 passing (4ms)
  1 failing
"""


def test_mocha_under_npm_test_and_a_name_reported_twice_once_failing() -> None:
    """npm's `> mocha` header names no suite (the id stays `calc > adds`
    whatever the script says), and a second test of the named test's name (a
    new file's stand-in, mocha's ids carry no file) cannot outvote its failure."""
    report = parse_output(NPM_MOCHA)
    assert report is not None
    assert report.passed == ["calc > adds"] and report.failed == ["calc > muls"]


def test_mocha_names_leave_out_npm_s_echo_of_the_script() -> None:
    # is-url 1.2.4 under `npm test`: the echoed script lines are not describe
    # titles (they named every test "> mocha --reporter spec > is-url > ...")
    report = parse_output("\n> is-url@1.2.4 test\n> mocha --reporter spec\n" + MOCHA)
    assert report is not None
    assert report.failed == ["math > fails"]
    assert report.passed[0] == "math > adds"


NODE_SPEC = """▶ math
  ✔ adds (0.576778ms)
  ✖ fails (1.289468ms)
    AssertionError [ERR_ASSERTION]: 1 == 2
  ﹣ skip (0.1ms) # SKIP
▶ math (3.1ms)
✔ top (0.2ms)
ℹ tests 4
ℹ pass 2
"""


def test_node_spec_output_names_suites_and_drops_durations() -> None:
    report = parse_output(NODE_SPEC)
    assert report is not None
    assert report.passed == ["math > adds", "top"]
    assert report.failed == ["math > fails"]
    assert report.skipped == ["math > skip"]


CARGO = """   Compiling rc v0.1.0 (/tmp/cs/rc)
    Finished `test` profile [unoptimized + debuginfo] target(s) in 0.52s
     Running unittests src/lib.rs (target/debug/deps/rc-a84f2c166dd1b0ee)

running 3 tests
test tests::adds ... ok
test tests::ign ... ignored
test tests::fails ... ok

test result: ok. 2 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.00s

     Running tests/it.rs (target/debug/deps/it-09a75f79e71ffe8f)

running 1 test
test tests::adds ... FAILED

test result: FAILED. 0 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s

   Doc-tests rc

running 1 test
test src/lib.rs - add (line 1) ... ok
"""


def test_cargo_tests_are_named_by_their_target_and_doc_tests_count() -> None:
    report = parse_output(CARGO)
    assert report is not None
    # the same name in two test binaries: the one that fails is not hidden by the other
    assert report.failed == ["tests/it.rs::tests::adds"]
    assert "src/lib.rs::tests::adds" in report.passed
    assert "doc rc::src/lib.rs - add (line 1)" in report.passed
    assert report.skipped == ["src/lib.rs::tests::ign"]


def test_cargo_quiet_output_is_no_report() -> None:
    """`--quiet` names only failures: a report without the passes would let a
    suite that stops early pass beside an old failure (its exit code judges it)."""
    quiet = "\nrunning 3 tests\n.iF 2/3\ntests::fails --- FAILED\n\nfailures:\n    tests::fails\n"
    assert parse_output(quiet) is None


def test_a_unittest_docstring_that_reads_like_a_libtest_line_is_still_unittest() -> None:
    """more-itertools' `python -m unittest -v`: a docstring's first line,
    printed before its result, reads `test simple repeated functions ... ok`;
    read as libtest's, 817 tests were one passing test, and a regression
    failed its check naming no test."""
    output = (
        "test_basic (tests.test_more.ChunkedTests.test_basic)\n"
        "Test when ``n`` divides evenly into the length of the iterable. ... ok\n"
        "test_strict_being_true (tests.test_more.ChunkedTests.test_strict_being_true)\n"
        "Test when ``n`` does not divide evenly into the length of the ... FAIL\n"
        "test_repeated (tests.test_more.MapReduceTests.test_repeated)\n"
        "test simple repeated functions ... ok\n"
        "\n----------------------------------------------------------------------\n"
        "Ran 3 tests in 0.003s\n\nFAILED (failures=1)\n"
    )
    report = parse_output(output)
    assert report is not None
    assert report.passed == [
        "tests.test_more.ChunkedTests.test_basic",
        "tests.test_more.MapReduceTests.test_repeated",
    ]
    assert report.failed == ["tests.test_more.ChunkedTests.test_strict_being_true"]


def test_a_doctest_a_unittest_suite_loads_keeps_its_doctest_name() -> None:
    """more-itertools loads `DocTestSuite('more_itertools.more')`: named
    `more_itertools.more.adjacent`, the doctest made more.py (the code under
    test) a test file, and every change to it waited for a person (exit 9)."""
    output = (
        "adjacent (more_itertools.more)\n"
        "Doctest: more_itertools.more.adjacent ... ok\n"
        "chunked (more_itertools.more)\n"
        "Doctest: more_itertools.more.chunked ... FAIL\n"
        "test_basic (tests.test_more.ChunkedTests.test_basic) ... ok\n"
    )
    report = parse_output(output)
    assert report is not None
    assert report.passed == [
        "Doctest: more_itertools.more.adjacent",
        "tests.test_more.ChunkedTests.test_basic",
    ]
    assert report.failed == ["Doctest: more_itertools.more.chunked"]


def test_unittest_on_older_pythons_names_each_test_not_its_class() -> None:
    """Python 3.10 prints `test_a (mod.Class)`: every test of a class must
    not collapse into one name (a failing one hides behind a passing one)."""
    output = (
        "test_a (test_u.T) ... ok\n"
        "test_b (test_u.T) ... FAIL\n"
        "test_c (test_u.T)\nParses a date. ... ok\n"
    )
    report = parse_output(output)
    assert report is not None
    assert report.passed == ["test_u.T.test_a", "test_u.T.test_c"]
    assert report.failed == ["test_u.T.test_b"]


def test_a_unittest_module_that_cannot_import_is_a_collection_error() -> None:
    output = (
        "test_a (test_u.T.test_a) ... ok\ntest_b (unittest.loader._FailedTest.test_b) ... ERROR\n"
    )
    report = parse_output(output)
    assert report is not None
    assert report.passed == ["test_u.T.test_a"]
    assert report.failed == []
    assert report.collection_errors == ["test_b: could not be imported"]


def test_node_tap_1_per_file_output_is_not_read_as_tape() -> None:
    """tap 1.x (semver 4.3.6) prints one test point per file and a `# time=`
    comment last: each file is a test, named without its time."""
    output = (
        "TAP version 13\nok 1 - test/amd.js # time=245.025ms\n"
        "not ok 2 - test/clean.js # time=200.274ms\n# time=1677.434ms\n"
    )
    report = parse_output(output)
    assert report is not None
    assert (report.passed, report.failed) == (["test/amd.js"], ["test/clean.js"])


def _failed_script(tmp_path: object, argv: list[str], files: dict[str, str]) -> tuple[str, object]:
    """A real script run that dies on its failed assertion: (its output, its checkout)."""
    import subprocess
    from pathlib import Path

    root = Path(str(tmp_path)) / "checkout"
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    proc = subprocess.run(argv, cwd=root, capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    return proc.stdout + proc.stderr, root


def test_a_bare_script_s_failed_assertion_is_named_by_its_place_in_the_reason(
    tmp_path: object,
) -> None:
    """A check that is one plain script (inherits' `node test`, a Python
    test script) names no test: its failure read only "exit 1: Node.js
    v20…", node's last line. The reason now names the uncaught error and the
    script's line in the checkout that raised it (the first frame outside
    node_modules / site-packages); still no test name: a script stops at its
    first failed assertion, so per test it would hide the rest."""
    import shutil
    from pathlib import Path

    import pytest

    from corral.supervisor.contracts.verdicts import classify
    from corral.supervisor.models import CheckResult

    if shutil.which("node") is None:
        pytest.skip("node is not installed")
    js = "var assert = require('assert');\n\nassert.ok(true);\nassert.strictEqual(1 + 1, 3);\n"
    output, root = _failed_script(tmp_path, ["node", "test.js"], {"test.js": js})
    assert output.strip().splitlines()[-1].startswith("Node.js v")  # what the reason said
    failed = CheckResult(name="npm_test", passed=False, exit_code=1, output_tail=output)
    reason = classify(failed, "node test.js", Path(str(root))).reason
    assert reason.startswith("exit 1: AssertionError") and "at test.js:4" in reason, reason
    assert str(root) not in reason  # named from the checkout, not by its absolute path

    py = "def check_sum():\n    assert 1 + 1 == 3, 'sums'\n\n\ncheck_sum()\n"
    import sys

    output, root = _failed_script(
        tmp_path, [sys.executable, "tests/main.py"], {"tests/main.py": py}
    )
    failed = CheckResult(name="script", passed=False, exit_code=1, output_tail=output)
    reason = classify(failed, "python tests/main.py", Path(str(root))).reason
    assert "AssertionError: sums" in reason and "at tests/main.py:2 (check_sum)" in reason, reason


def test_a_traceback_quoted_indented_is_no_script_s_death(tmp_path: object) -> None:
    """pytest's warnings summary quotes a thread's traceback indented (sh's
    suite): reading it as the script's own death raised ValueError and
    failed the whole session ("corral error: 'Traceback (most recent call
    last):' is not in list"). Hostile or odd output never raises."""
    from pathlib import Path

    from corral.supervisor.contracts.test_reports import failure_site

    root = Path(str(tmp_path))
    quoted = (
        "tests/sh_test.py::FunctionalTests::test_piped_exception2\n"
        "  PytestUnhandledThreadExceptionWarning: Exception in thread\n\n"
        "  Traceback (most recent call last):\n"
        f'    File "{root}/src/sh/__init__.py", line 9, in run\n'
        "      self._target()\n"
        "  OSError: broken\n\n"
        "-- Docs: https://docs.pytest.org/en/stable/how-to/capture-warnings.html\n"
        "3 failed, 200 passed in 90.1s\n"
    )
    assert failure_site(quoted, root) is None
    for odd in ("", "Traceback (most recent call last):", "Node.js v20\n", "x\nNode.js v20"):
        assert failure_site(odd, root) is None
    outside = (
        'Traceback (most recent call last):\n  File "/etc/x.py", line 1, in f\nValueError: no\n'
    )
    assert failure_site(outside, root) is None  # a frame outside the checkout names nothing
    escaping = f'Traceback (most recent call last):\n  File "{root}/../x.py", line 1, in f\nE: no\n'
    assert failure_site(escaping, root) is None


def test_a_junit_report_over_the_read_cap_is_read_as_a_stream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """packaging's regression (round 8): 2862 failing tests wrote a 10 MB
    JUnit report, over the 8 MB read cap, so the report was dropped and the
    check said "cannot judge" instead of naming the tests it broke."""
    import subprocess
    import sys

    from corral.supervisor.contracts import test_reports

    (tmp_path / "test_many.py").write_text(
        "import pytest\n\n\n@pytest.mark.parametrize('n', range(40))\n"
        "def test_n(n):\n    assert n % 2, 'x' * 2000\n"
    )
    xml = tmp_path / "report.xml"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"--junitxml={xml}",
            "-o",
            "junit_family=xunit1",
            "test_many.py",
        ],
        cwd=tmp_path,
        capture_output=True,
        check=False,
        timeout=120,
    )
    size = xml.stat().st_size
    monkeypatch.setattr(test_reports, "MAX_REPORT_BYTES", size // 4)
    report = test_reports.parse_junit_file(xml)
    assert report is not None
    assert len(report.failed) == 20 and len(report.passed) == 20
    assert "test_many::test_n[0]" in report.failed
    monkeypatch.setattr(test_reports, "MAX_JUNIT_BYTES", size // 2)
    assert test_reports.parse_junit_file(xml) is None  # past the streamed cap: none
