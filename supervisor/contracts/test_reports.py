"""Per-test outcomes of a test-suite check, read from what its runner reports.

A suite with a test that already fails on the untouched tree (a real bug, or
this host's time zone data) would otherwise be red forever, and no correct
change could pass. Where the runner says which tests passed and failed, a
check records that on the untouched tree and is judged against it: no test
that passed before may fail (or vanish, or be skipped) now, and tests that
are new, or that the contract names, must pass.

What is read, and how:

- pytest: a JUnit XML report, asked for through `PYTEST_ADDOPTS` (the check's
  command stays as written) into the check's private directory;
- TAP: Node's test runner (the default when not on a terminal), node-tap
  (subtests by their parents) and tape (a test is its `# name` comment and
  the assertions after it); a name never carries its directive (`# SKIP`,
  `# TODO`, node-tap's `# time=707.793ms`): what changes from run to run
  would make a test that already failed look new on every run;
- spec reporters (Node's, mocha's), without the durations they print;
- `go test`: its `-json` events, asked for through `GOFLAGS` when the check
  is one `go test` command (shown as the text `go test -v` would print), else
  the `--- PASS`/`--- FAIL` lines of `-v`;
- cargo's libtest: its `test name ... ok|FAILED|ignored` lines, each named
  by its target (`cargo test --quiet` prints none: drafted checks omit it);
- unittest with `-v` (drafted unittest checks carry it):
  `test_x (module.Class.test_x) ... ok` (Python 3.10's `(module.Class)` too);
- Jest and Vitest: the JSON report a command already writes with
  `--json --outputFile=FILE` / `--reporter=json --outputFile=FILE`, or, for
  a drafted check, the one it writes to `$CORRAL_TEST_REPORT` (a file in the
  check's private directory: jest's default reporter names no test).

A runner that names only its failures (unittest without `-v`, cargo's
`--quiet`) gives no report: one without the passes would let a suite that
stops early, or loses tests, pass beside a test that already failed.

Everything here is data the check wrote: sizes are capped and parsing never
executes anything.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import shlex
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..models import FailureSite, TestReport
from . import failure_sites

if TYPE_CHECKING:
    import xml.etree.ElementTree as ET

MAX_REPORT_BYTES = 8 * 1024 * 1024
#: pytest's JUnit report is read as a stream (each testcase dropped once
#: read): every failure carries its whole traceback, and packaging 24.2's
#: suite with its 2,874 failing version comparisons wrote 12 MB (under the
#: 8 MB cap of the others, that was "no per-test report").
MAX_JUNIT_BYTES = 512 * 1024 * 1024
PYTEST_REPORT = "pytest-report.xml"
JSON_REPORT = "test-report.json"
#: The variable a drafted jest/vitest check writes its JSON report to
#: (`--outputFile="${CORRAL_TEST_REPORT:-…}"`): set to a file in the check's
#: private directory; run by hand, the fallback name in the checkout is used.
TEST_REPORT_VAR = "CORRAL_TEST_REPORT"

# a TAP test point: `ok`/`not ok`, an optional number, an optional ` - `, the
# description, then an optional directive after an unescaped `#` (`# SKIP`,
# `# TODO`, and reporters' own: node-tap's `# time=707.793ms`)
_TAP = re.compile(r"^(\s*)(not ok|ok)\b(?: \d+)?(?: -)?(?: (.*))?$")
_TAP_DIRECTIVE = re.compile(r"(?<!\\)#")
_TAP_SKIP = re.compile(r"\s*(skip|todo)", re.IGNORECASE)
_TAP_SUBTEST = re.compile(r"^(\s*)# Subtest: (.*)$")
# tape: a `# name` comment opens a test, its assertions follow (no `- ` needed)
_TAPE_COMMENT = re.compile(r"^# (.*\S)\s*$")
_TAPE_SUMMARY = re.compile(
    r"^(tests|pass|fail|skip|todo|ok|not ok|suites|cancelled|skipped|duration_ms)\b(\s+\d.*)?$"
)
# a duration a reporter prints after a test's name: `(0.5ms)`, `(121ms)`, `(3 ms)`, `(1.2 s)`
_DURATION = r"(?:\s+\(\d+(?:\.\d+)?\s?m?s\))?"
_SPEC = re.compile(rf"^(\s*)([✔✖﹣✓]) (.*?){_DURATION}(?:\s+# (SKIP|TODO)\b.*)?$")
_SPEC_SUITE = re.compile(r"^(\s*)▶ (.*?)" + _DURATION + r"$")
# mocha's spec reporter: `✔ name (12ms)`, `1) name` (failed), `- name` (pending),
# describe titles as plain indented lines, then `N passing (Xms)`
_MOCHA_SUMMARY = re.compile(r"^\s*\d+ passing \(")
_MOCHA_FAILED = re.compile(r"^(\s*)\d+\) (.*\S)\s*$")
_MOCHA_PENDING = re.compile(r"^(\s*)- (.*\S)\s*$")
_GO = re.compile(r"^\s*--- (PASS|FAIL|SKIP): (\S+)")
# libtest: `test name ... ok` (a doc test's name has spaces: `src/lib.rs - f (line 3)`)
_CARGO = re.compile(r"^test (.+?) \.\.\. (ok|FAILED|ignored)\b")
_CARGO_SUMMARY = re.compile(r"^test result: (?:ok|FAILED)\.", re.MULTILINE)
_CARGO_TARGET = re.compile(r"^\s*(?:Running (?:unittests )?(\S+)|Doc-tests (\S+))")
_UNITTEST = re.compile(
    r"^(\w+) \(([\w.]+)\)(?:$| .*?\.\.\. (ok|FAIL|ERROR|skipped\b.*|expected failure|unexpected success)$)"
)
_UNITTEST_RESULT = re.compile(
    r"\.\.\. (ok|FAIL|ERROR|skipped\b.*|expected failure|unexpected success)$"
)
_UNITTEST_IMPORT_FAILED = "unittest.loader._FailedTest"
# a doctest a unittest suite loads (`DocTestSuite('pkg.mod')`) prints
# `name (pkg.mod)` then `Doctest: pkg.mod.name ... ok`: it keeps that name, so
# the module its docstrings are in (the code under test) is not taken for a
# test file, and every change to it for a change of how it is judged
_DOCTEST = "Doctest: "


def _uses_pytest(command: str) -> bool:
    return "pytest" in command or "py.test" in command


# one `go test` and nothing else: GOFLAGS reaches every go command a check
# runs, and `go vet -json` would print its findings and exit 0
_LONE_GO_TEST = re.compile(r"^\s*go\s+test(\s+[^;&|<>`$()]*)?$")


def _is_lone_go_test(command: str) -> bool:
    return bool(_LONE_GO_TEST.match(command)) and "-json" not in command


@dataclass(frozen=True)
class ReportPlan:
    """How one check's per-test outcomes are collected: extra environment for
    the runner, and where its report lands."""

    env: dict[str, str]
    report_dir: Path | None
    jest_file: Path | None = None
    checkout: Path | None = None  # a report the command writes must stay inside it
    go_json: bool = False  # `go test` prints `-json` events (asked through GOFLAGS)
    # the jest/vitest JSON report a drafted check writes to $CORRAL_TEST_REPORT
    # (in the check's private directory, never the checkout)
    json_report: Path | None = None

    def shown(self, output: str) -> str:
        """The output as a person (and the agent) reads it: `go test -json`
        events turned back into the text `go test -v` prints."""
        return go_json_text(output) if self.go_json else output

    def read(self, output: str) -> TestReport | None:
        """The per-test outcomes, or None when the runner reported none."""
        if self.report_dir is not None:
            pytest_xml = self.report_dir / PYTEST_REPORT
            if _inside(pytest_xml, self.report_dir):
                return parse_junit_file(pytest_xml)
        if self.json_report is not None and self.report_dir is not None:
            if _inside(self.json_report, self.report_dir):
                return parse_jest_json(_read_capped(self.json_report), self.checkout)
            return None
        jest = self.jest_file
        if jest is not None and self.checkout is not None and _inside(jest, self.checkout):
            return parse_jest_json(_read_capped(jest), self.checkout)
        return parse_output(output, self.checkout)


def plan_for(
    command: str, report_dir: Path | None, cwd: Path | None = None, *, network: bool = False
) -> ReportPlan:
    """What to add to a check's run so its runner says which tests passed.
    pytest is asked through its own environment variable (into
    `report_dir`), `go test` through GOFLAGS (`-json`; and, without network,
    GOPROXY=off: a module missing from the cache is said at once, not after a
    DNS timeout); the others are read from their output or from a report
    the command itself writes."""
    env: dict[str, str] = {}
    if _is_lone_go_test(command):
        env["GOFLAGS"] = "-json"
        if not network:
            env["GOPROXY"] = "off"
    report_dir = report_dir.resolve() if report_dir is not None else None
    if report_dir is not None and _uses_pytest(command):
        target = report_dir / PYTEST_REPORT
        env["PYTEST_ADDOPTS"] = f"--junitxml={shlex.quote(str(target))} -o junit_family=xunit1"
    json_report = None
    if report_dir is not None and TEST_REPORT_VAR in command:
        json_report = report_dir / JSON_REPORT
        env[TEST_REPORT_VAR] = str(json_report)
    jest = jest_output_file(command)
    jest_file = None
    if jest is not None and cwd is not None and not Path(jest).is_absolute():
        candidate = (cwd / jest).resolve()
        if candidate.is_relative_to(cwd.resolve()):  # never a file outside the checkout
            jest_file = candidate
    checkout = cwd.resolve() if cwd is not None else None
    return ReportPlan(
        env=env,
        report_dir=report_dir,
        jest_file=jest_file,
        checkout=checkout,
        go_json="GOFLAGS" in env,
        json_report=json_report,
    )


def _inside(path: Path, where: Path) -> bool:
    """A regular file that resolves inside `where` (resolved before the
    command ran) now, after it ran: it may have swapped a directory or the
    file for a link out of there meanwhile."""
    try:
        real = path.resolve(strict=True)
    except OSError:
        return False
    return real.is_relative_to(where) and real.is_file() and not path.is_symlink()


def _read_capped(path: Path) -> str:
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_REPORT_BYTES + 1)
    except OSError:
        return ""
    if len(data) > MAX_REPORT_BYTES:
        return ""
    return data.decode("utf-8", errors="replace")


def _report(
    passed: list[str],
    failed: list[str],
    skipped: list[str],
    errors: list[str],
    sites: dict[str, FailureSite] | None = None,
) -> TestReport | None:
    if not (passed or failed or skipped or errors):
        return None
    # a name reported both passed and failed (two tests of one name: one a
    # new file's stand-in for a named test) is a failure
    failing = sorted(set(failed))
    return TestReport(
        passed=sorted(set(passed) - set(failed)),
        failed=failing,
        skipped=sorted(set(skipped) - set(passed) - set(failed)),
        collection_errors=errors,
        failed_at={t: sites[t] for t in failing if sites and t in sites},
    )


def parse_junit(text: str) -> TestReport | None:
    """pytest's JUnit XML: each testcase by `classname::name`; a collection
    error (an `error` with an empty classname) is kept apart with its words."""
    if not text.strip():
        return None
    import xml.etree.ElementTree as ET  # the XML parser loads with the first report read

    try:
        root = ET.fromstring(text)
    except ET.ParseError:
        return None
    return _junit_cases(root.iter("testcase"))


def parse_junit_file(path: Path) -> TestReport | None:
    """`parse_junit` on a report file, read as a stream: a testcase is
    dropped once read, so a large report (thousands of failures, each with
    its traceback) is read whole in little memory."""
    import xml.etree.ElementTree as ET  # the XML parser loads with the first report read

    try:
        if path.stat().st_size > MAX_JUNIT_BYTES:
            return None

        def cases() -> Iterator[ET.Element]:
            for _, element in ET.iterparse(path, events=("end",)):
                if element.tag == "testcase":
                    yield element
                    element.clear()

        return _junit_cases(cases())
    except (OSError, ET.ParseError):
        return None


def _junit_cases(cases: Iterable[ET.Element]) -> TestReport | None:
    passed: list[str] = []
    failed: list[str] = []
    skipped: list[str] = []
    errors: list[str] = []
    sites: dict[str, FailureSite] = {}
    for case in cases:
        cls = case.get("classname") or ""
        name = case.get("name") or ""
        test_id = f"{cls}::{name}" if cls else name
        outcome = {child.tag for child in case}
        if "error" in outcome and not cls:
            error = case.find("error")
            words = (error.text or "") if error is not None else ""
            errors.append(_collection_words(name, words))
        elif "failure" in outcome or "error" in outcome:
            if test_id not in failed:  # two of one name: where either failed is no signature
                site = _junit_site(case)
                if site is not None:
                    sites[test_id] = site
            else:
                sites.pop(test_id, None)
            failed.append(test_id)
        elif "skipped" in outcome:
            skipped.append(test_id)
        else:
            passed.append(test_id)
    return _report(passed, failed, skipped, errors, sites)


def _junit_site(case: ET.Element) -> FailureSite | None:
    """Where a pytest testcase failed (its first `failure`, else `error`: an
    error in teardown after a failure is the failure's consequence)."""
    found = case.find("failure")
    if found is None:
        found = case.find("error")
    if found is None:
        return None
    text = found.text or ""
    site = failure_sites.from_pytest(text, case.get("file") or "")
    if site is None:  # --tb=native: a Python traceback
        site = failure_sites.from_python_traceback(text, case.get("classname") or "")
    return site


def _collection_words(module: str, text: str) -> str:
    """`tests.test_b: ModuleNotFoundError: No module named 'x'` — the runner's
    own last `E` line (or last line) for a module it could not collect."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    marked = [line[1:].strip() for line in lines if line.startswith("E ")]
    words = marked[-1] if marked else (lines[-1] if lines else "collection failure")
    return f"{module}: {words}"[:300]


def parse_output(output: str, checkout: Path | None = None) -> TestReport | None:
    """Per-test outcomes printed by a runner: TAP (node's test runner,
    node-tap, tape), go test, libtest, unittest, or a spec reporter (node's,
    mocha's). `checkout`: where the check ran (a TAP failure's file is named
    from it)."""
    tap = _parse_tap(output, checkout)
    if tap is not None:
        return tap
    for parse in (
        _parse_go_json,
        _parse_go,
        _parse_cargo,
        _parse_unittest,
        _parse_spec,
        _parse_mocha,
    ):
        report = parse(output)
        if report is not None:
            return report
    return None


# a script that died on an uncaught error: node's last line, its error line
# and stack frames; Python's traceback frames and its last line
_NODE_VERSION_LINE = re.compile(r"^Node\.js v\d")
_NODE_ERROR = re.compile(r"^(?:Uncaught )?([A-Za-z_$][\w$]*(?:Error|Exception))\b(?: \[[A-Z_]+\])?")
_NODE_FRAME = re.compile(r"^\s+at (?:[^()]*? \()?([^()\s]+):(\d+):\d+\)?\s*$")
_PY_TRACEBACK = "Traceback (most recent call last):"
_PY_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+), in (\S+)')
_PY_EXCEPTION = re.compile(r"^([A-Za-z_][\w.]*)(?::\s?(.*))?$")
_SITE_WORDS = 120


def _in_checkout(path: str, checkout: Path) -> str | None:
    """`path` (a frame's file) relative to the checkout, or None when it is
    outside it or in installed code (node_modules, site-packages)."""
    if "/node_modules/" in f"/{path}" or "/site-packages/" in path or path.startswith("node:"):
        return None
    where = checkout.resolve()  # runners print real paths (their cwd is one)
    # the output's path is attacker text: read as a name, never looked up on disk
    found = posixpath.normpath(posixpath.join(where.as_posix(), path))
    if not found.startswith(where.as_posix() + "/"):
        return None
    return found[len(where.as_posix()) + 1 :]


def failure_site(output: str, checkout: Path) -> str | None:
    """Where a plain script that names no test died, when it died on an
    uncaught error (a failed `assert`): the error and the line of the
    checkout's own code that raised it — `AssertionError [ERR_ASSERTION] at
    test.js:4` (node: the first frame in the checkout), `AssertionError: sums
    at tests/main.py:2 (check_sum)` (Python: the innermost). Never a test
    name: a script stops at its first failed assertion, so judged per test
    it would hide every assertion after it; it is the failure's reason."""
    lines = [line.rstrip() for line in output.splitlines()]
    filled = [line for line in lines if line.strip()]
    if not filled:
        return None
    if _NODE_VERSION_LINE.match(filled[-1]):
        errors = [n for n, line in enumerate(lines) if _NODE_ERROR.match(line)]
        if not errors:
            return None
        start = errors[-1]
        error = lines[start][:_SITE_WORDS].split(":", 1)[0].strip()
        for line in lines[start + 1 :]:
            frame = _NODE_FRAME.match(line)
            place = _in_checkout(frame.group(1), checkout) if frame else None
            if frame and place:
                return f"{error} at {place}:{frame.group(2)}"
        return None
    # a process that died prints its traceback from the first column (pytest's
    # warnings quote others indented: not this script's death)
    starts = [n for n, line in enumerate(lines) if line == _PY_TRACEBACK]
    if not starts or filled[-1][:1].isspace():
        return None
    tail = lines[starts[-1] :]
    exception = _PY_EXCEPTION.match(filled[-1])
    if exception is None:
        return None
    site = None
    for line in tail:
        frame = _PY_FRAME.match(line)
        place = _in_checkout(frame.group(1), checkout) if frame else None
        if frame and place:
            site = f"{place}:{frame.group(2)} ({frame.group(3)})"
    if site is None:
        return None
    return f"{filled[-1][:_SITE_WORDS]} at {site}"


def tap_point(text: str) -> tuple[str, bool]:
    """A TAP test point's description without its directive, and whether the
    directive skips it (`# SKIP`, `# TODO`). Whatever else a reporter puts
    after an unescaped `#` (node-tap's `# time=707.793ms`) is not the name:
    it changes from run to run, and a test must keep its name."""
    parts = _TAP_DIRECTIVE.split(text, maxsplit=1)
    name = parts[0].strip().replace("\\#", "#")
    skipped = len(parts) > 1 and bool(_TAP_SKIP.match(parts[1]))
    return name, skipped


def _parse_tap(output: str, checkout: Path | None = None) -> TestReport | None:
    if "TAP version" not in output:
        return None
    if "# Subtest:" not in output and _opens_with_a_test_comment(output):
        tape = _parse_tape(output)
        if tape is not None:
            return tape
    passed: list[str] = []
    failed: list[str] = []
    skipped: list[str] = []
    stack: dict[int, str] = {}
    sites: dict[str, FailureSite] = {}
    where = str(checkout) if checkout is not None else None
    failing: str | None = None  # the last `not ok`, whose YAML block may follow
    block: list[str] | None = None
    for line in output.splitlines():
        if block is not None:  # a YAML block ends at `...` (or, unclosed, at the next test)
            if line.strip() == "..." or _TAP.match(line) or _TAP_SUBTEST.match(line):
                site = failure_sites.from_tap_yaml(block, where) if failing else None
                if site is not None and failing is not None:
                    sites.setdefault(failing, site)
                block, failing = None, None
            else:
                block.append(line)
                continue
        if failing is not None and line.strip() == "---":
            block = []
            continue
        sub = _TAP_SUBTEST.match(line)
        if sub:
            depth = len(sub.group(1))
            stack = {d: n for d, n in stack.items() if d < depth}
            stack[depth] = tap_point(sub.group(2))[0]
            continue
        m = _TAP.match(line)
        if not m:
            continue
        depth = len(m.group(1))
        name, skip = tap_point(m.group(3) or "")
        name = name or stack.get(depth, "")
        path = [stack[d] for d in sorted(stack) if d < depth] + [name]
        test_id = " > ".join(path)
        failing = None
        if skip:
            skipped.append(test_id)
        elif m.group(2) == "ok":
            passed.append(test_id)
        else:
            failed.append(test_id)
            failing = test_id
    return _report(passed, failed, skipped, [], sites)


def _opens_with_a_test_comment(output: str) -> bool:
    """tape's shape: the first line after `TAP version` is a `# name`
    comment (node-tap 1.x prints test points first, and a `# time=` last)."""
    lines = output.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("TAP version")), None)
    if start is None:
        return False
    first = next((line for line in lines[start + 1 :] if line.strip()), "")
    comment = _TAPE_COMMENT.match(first)
    return comment is not None and not _TAPE_SUMMARY.match(comment.group(1))


def _parse_tape(output: str) -> TestReport | None:
    """tape's TAP: each test is a `# name` comment and the assertions after
    it, which carry the assertion's message, not the test's (`ok 1 should be
    equal`). A test fails when any of its assertions does."""
    outcome: dict[str, str] = {}  # test name -> passed | failed | skipped
    current: str | None = None
    todo: set[str] = set()
    for line in output.splitlines():
        comment = _TAPE_COMMENT.match(line)
        if comment:
            words = comment.group(1)
            if _TAPE_SUMMARY.match(words):
                current = None
                continue
            directive = _TAP_SKIP.match(words)
            if directive and words[directive.end() : directive.end() + 1] == " ":
                # `# SKIP name` (no assertions follow) or `# TODO name` (its
                # failures are expected): neither passes nor fails
                current = words[directive.end() :].strip()
                outcome.setdefault(current, "skipped")
                todo.add(current)
                continue
            current = words
            outcome.setdefault(current, "passed")
            continue
        m = _TAP.match(line)
        if not m or m.group(1):
            continue
        name, skip = tap_point(m.group(3) or "")
        test = current if current is not None else name
        if test in todo:
            continue
        if skip:
            outcome.setdefault(test, "skipped")
        elif m.group(2) == "not ok":
            outcome[test] = "failed"
        elif outcome.get(test) != "failed":
            outcome[test] = "passed"
    if not outcome:
        return None
    by: dict[str, list[str]] = {"passed": [], "failed": [], "skipped": []}
    for test, result in outcome.items():
        by[result].append(test)
    return _report(by["passed"], by["failed"], by["skipped"], [])


def _parse_spec(output: str) -> TestReport | None:
    """Node's spec reporter: `✔ name (0.5ms)`, `✖ name`, `﹣ name # SKIP`,
    suites opened by `▶ name`; the duration is never part of the name."""
    passed: list[str] = []
    failed: list[str] = []
    skipped: list[str] = []
    stack: dict[int, str] = {}
    summary = False
    for line in output.splitlines():
        if line.startswith("ℹ tests "):
            summary = True
        suite = _SPEC_SUITE.match(line)
        if suite:
            depth = len(suite.group(1))
            stack = {d: n for d, n in stack.items() if d < depth}
            stack[depth] = suite.group(2).strip()
            continue
        m = _SPEC.match(line)
        if not m:
            continue
        depth = len(m.group(1))
        stack = {d: n for d, n in stack.items() if d < depth}
        name = m.group(3).strip()
        test_id = " > ".join([stack[d] for d in sorted(stack)] + [name])
        if m.group(4) or m.group(2) == "﹣":
            skipped.append(test_id)
        elif m.group(2) in "✔✓":
            passed.append(test_id)
        else:
            failed.append(test_id)
    # the failures are listed again after the summary: the first list counts
    return _report(passed, failed, skipped, []) if summary else None


def _parse_mocha(output: str) -> TestReport | None:
    """Mocha's spec reporter, up to its `N passing (Xms)` summary (the
    failures are listed again after it): describe titles are the plain lines
    at a lower indent."""
    lines = output.splitlines()
    end = next((i for i, line in enumerate(lines) if _MOCHA_SUMMARY.match(line)), None)
    if end is None:
        return None
    passed: list[str] = []
    failed: list[str] = []
    skipped: list[str] = []
    stack: dict[int, str] = {}
    for line in lines[:end]:
        if not line.strip() or line.startswith("> "):
            continue  # npm's own header (`> calc@1.0.0 test`, `> mocha`) names no suite
        depth = len(line) - len(line.lstrip())
        stack = {d: n for d, n in stack.items() if d < depth}
        spec = _SPEC.match(line)
        failing = _MOCHA_FAILED.match(line)
        pending = _MOCHA_PENDING.match(line)
        if spec:
            name, target = spec.group(3).strip(), passed if spec.group(2) in "✔✓" else failed
        elif failing:
            name, target = failing.group(2), failed
        elif pending:
            name, target = pending.group(2), skipped
        elif depth:
            stack[depth] = line.strip()  # a describe title (the reporter indents them)
            continue
        else:  # npm's echo of the script (`> mocha --reporter spec`), a log line
            continue
        target.append(" > ".join([stack[d] for d in sorted(stack)] + [name]))
    return _report(passed, failed, skipped, [])


def _parse_go(output: str) -> TestReport | None:
    passed: list[str] = []
    failed: list[str] = []
    skipped: list[str] = []
    for line in output.splitlines():
        m = _GO.match(line)
        if m:
            {"PASS": passed, "FAIL": failed, "SKIP": skipped}[m.group(1)].append(m.group(2))
    return _report(passed, failed, skipped, [])


def _parse_go_json(output: str) -> TestReport | None:
    passed: list[str] = []
    failed: list[str] = []
    skipped: list[str] = []
    said: dict[str, list[str]] = {}
    for line in output.splitlines():
        if not line.startswith("{"):
            continue
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if not isinstance(event, dict) or not event.get("Test"):
            continue
        test_id = f"{event.get('Package', '')}.{event['Test']}".lstrip(".")
        action = event.get("Action")
        if action == "output" and isinstance(event.get("Output"), str):
            said.setdefault(test_id, []).append(event["Output"])
        target = {"pass": passed, "fail": failed, "skip": skipped}.get(str(action))
        if target is not None:
            target.append(test_id)
    sites = {t: site for t in failed if (site := failure_sites.from_go(said.get(t, [])))}
    return _report(passed, failed, skipped, [], sites)


def go_json_text(output: str) -> str:
    """`go test -json` events as the text they carry (their `Output`), in
    order; lines that are not events (a build error on stderr) as they are."""
    lines: list[str] = []
    for line in output.splitlines(keepends=True):
        event = None
        if line.startswith("{"):
            try:
                event = json.loads(line)
            except ValueError:
                event = None
        if isinstance(event, dict):
            text = event.get("Output")
            if isinstance(text, str):
                lines.append(text)
        else:
            lines.append(line)
    return "".join(lines)


def _parse_cargo(output: str) -> TestReport | None:
    """libtest's `test name ... ok|FAILED|ignored` lines, each named by the
    target that ran it (`src/lib.rs::tests::adds`, `doc mycrate::...`): two
    test binaries may hold tests of the same name. `--quiet` prints no
    per-test lines, only `name --- FAILED` for each failure: then the report
    holds those failures alone (a test that failed before, or fails now, is
    named; the passes are counted by the exit code).

    Only output with libtest's own summary (`test result: ok.`) is libtest's:
    unittest's `-v` prints a docstring's first line before its result, and
    one that reads `test simple repeated functions ... ok` (more-itertools)
    made a whole unittest run one passing libtest test."""
    if not _CARGO_SUMMARY.search(output):
        return None
    passed: list[str] = []
    failed: list[str] = []
    skipped: list[str] = []
    target = ""
    for line in output.splitlines():
        where = _CARGO_TARGET.match(line)
        if where:
            target = where.group(1) or f"doc {where.group(2)}"
            continue
        m = _CARGO.match(line)
        if m:
            test_id = f"{target}::{m.group(1)}" if target else m.group(1)
            {"ok": passed, "FAILED": failed, "ignored": skipped}[m.group(2)].append(test_id)
    return _report(passed, failed, skipped, [])


def _unittest_id(method: str, where: str) -> str:
    """`module.Class.test_x`: Python 3.11+ prints that, older ones `module.Class`."""
    return where if where.endswith(f".{method}") else f"{where}.{method}"


def _parse_unittest(output: str) -> TestReport | None:
    passed: list[str] = []
    failed: list[str] = []
    skipped: list[str] = []
    errors: list[str] = []
    pending: str | None = None  # a test whose docstring line carries the result
    for line in output.splitlines():
        m = _UNITTEST.match(line)
        outcome: str | None = None
        if m:
            pending = _unittest_id(m.group(1), m.group(2))
            outcome = m.group(3)
        elif pending is not None:
            result = _UNITTEST_RESULT.search(line)
            outcome = result.group(1) if result else None
            if result is None:
                pending = None
                continue
            if line.startswith(_DOCTEST):  # named as doctest names it (see _DOCTEST)
                pending = line[: result.start()].strip()
        if pending is None or outcome is None:
            continue
        if pending.startswith(_UNITTEST_IMPORT_FAILED):
            errors.append(f"{pending.rsplit('.', 1)[-1]}: could not be imported")
        elif outcome in ("ok", "expected failure"):
            passed.append(pending)
        elif outcome.startswith("skipped"):
            skipped.append(pending)
        else:
            failed.append(pending)
        pending = None
    return _report(passed, failed, skipped, errors, failure_sites.from_unittest(output))


def parse_jest_json(text: str, checkout: Path | None = None) -> TestReport | None:
    """Jest's and Vitest's `--json` report: `testResults[].assertionResults[]`.
    A test file's absolute path is named from `checkout` (`test.js > adds`):
    the checkout a check runs in is not always the same one, and a test must
    keep its name from the untouched tree's run to the verification's."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    passed: list[str] = []
    failed: list[str] = []
    skipped: list[str] = []
    errors: list[str] = []
    sites: dict[str, FailureSite] = {}
    if not isinstance(data, dict):
        return None
    for suite in data.get("testResults") or []:
        if not isinstance(suite, dict):
            continue
        file = str(suite.get("name") or suite.get("testFilePath") or "")
        if checkout is not None and os.path.isabs(file):
            inside = os.path.relpath(file, checkout)
            file = file if inside.startswith("..") else inside
        assertions = suite.get("assertionResults") or []
        if suite.get("status") == "failed" and not assertions:
            errors.append(f"{file}: {str(suite.get('message') or 'failed to run').strip()[:200]}")
        for case in assertions:
            if not isinstance(case, dict):
                continue
            title = str(case.get("fullName") or case.get("title") or "")
            target = {"passed": passed, "failed": failed}.get(str(case.get("status")), skipped)
            target.append(f"{file} > {title}")
            messages = case.get("failureMessages")
            if target is failed and isinstance(messages, list) and messages:
                where = str(checkout) if checkout is not None else None
                site = failure_sites.from_js(str(messages[0]), file, where)
                if site is not None:
                    sites[f"{file} > {title}"] = site
    return _report(passed, failed, skipped, errors, sites)


def jest_output_file(command: str) -> str | None:
    """The JSON report file a jest/vitest command writes (`--outputFile`), if any."""
    if not re.search(r"\b(jest|vitest)\b", command) or "json" not in command:
        return None
    m = re.search(r"--outputFile[= ](\S+)", command)
    return m.group(1).strip("'\"") if m else None
