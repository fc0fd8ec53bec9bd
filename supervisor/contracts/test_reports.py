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
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..models import TestReport

MAX_REPORT_BYTES = 8 * 1024 * 1024
# a larger pytest JUnit report is read as a stream (its failures' tracebacks
# make it big, not its tests), up to this
MAX_STREAMED_REPORT_BYTES = 128 * 1024 * 1024
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
        return parse_output(output)


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
    passed: list[str], failed: list[str], skipped: list[str], errors: list[str]
) -> TestReport | None:
    if not (passed or failed or skipped or errors):
        return None
    # a name reported both passed and failed (two tests of one name: one a
    # new file's stand-in for a named test) is a failure
    return TestReport(
        passed=sorted(set(passed) - set(failed)),
        failed=sorted(set(failed)),
        skipped=sorted(set(skipped) - set(passed) - set(failed)),
        collection_errors=errors,
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
    passed: list[str] = []
    failed: list[str] = []
    skipped: list[str] = []
    errors: list[str] = []
    for case in root.iter("testcase"):
        _sort_case(case, passed, failed, skipped, errors)
    return _report(passed, failed, skipped, errors)


def parse_junit_file(path: Path) -> TestReport | None:
    """pytest's JUnit XML file. One within MAX_REPORT_BYTES is read whole;
    a larger one (packaging's 18 000 tests with 2 862 failing wrote 10 MB of
    tracebacks, and its regression was "cannot judge") is read as a stream,
    up to MAX_STREAMED_REPORT_BYTES, each testcase dropped once sorted, so
    memory stays bounded whatever the failures say."""
    try:
        size = path.stat().st_size
    except OSError:
        return None
    if size <= MAX_REPORT_BYTES:
        return parse_junit(_read_capped(path))
    if size > MAX_STREAMED_REPORT_BYTES:
        return None
    import xml.etree.ElementTree as ET

    passed: list[str] = []
    failed: list[str] = []
    skipped: list[str] = []
    errors: list[str] = []
    try:
        for _event, element in ET.iterparse(path, events=("end",)):
            if element.tag == "testcase":
                _sort_case(element, passed, failed, skipped, errors)
                element.clear()
    except (ET.ParseError, OSError):
        return None
    return _report(passed, failed, skipped, errors)


def _sort_case(
    case: Any,
    passed: list[str],
    failed: list[str],
    skipped: list[str],
    errors: list[str],
) -> None:
    """One JUnit testcase into its outcome's list."""
    cls = case.get("classname") or ""
    name = case.get("name") or ""
    test_id = f"{cls}::{name}" if cls else name
    outcome = {child.tag for child in case}
    if "error" in outcome and not cls:
        error = case.find("error")
        words = (error.text or "") if error is not None else ""
        errors.append(_collection_words(name, words))
    elif "failure" in outcome or "error" in outcome:
        failed.append(test_id)
    elif "skipped" in outcome:
        skipped.append(test_id)
    else:
        passed.append(test_id)


def _collection_words(module: str, text: str) -> str:
    """`tests.test_b: ModuleNotFoundError: No module named 'x'` — the runner's
    own last `E` line (or last line) for a module it could not collect."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    marked = [line[1:].strip() for line in lines if line.startswith("E ")]
    words = marked[-1] if marked else (lines[-1] if lines else "collection failure")
    return f"{module}: {words}"[:300]


def parse_output(output: str) -> TestReport | None:
    """Per-test outcomes printed by a runner: TAP (node's test runner,
    node-tap, tape), go test, libtest, unittest, or a spec reporter (node's,
    mocha's)."""
    for parse in (
        _parse_tap,
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


def tap_point(text: str) -> tuple[str, bool]:
    """A TAP test point's description without its directive, and whether the
    directive skips it (`# SKIP`, `# TODO`). Whatever else a reporter puts
    after an unescaped `#` (node-tap's `# time=707.793ms`) is not the name:
    it changes from run to run, and a test must keep its name."""
    parts = _TAP_DIRECTIVE.split(text, maxsplit=1)
    name = parts[0].strip().replace("\\#", "#")
    skipped = len(parts) > 1 and bool(_TAP_SKIP.match(parts[1]))
    return name, skipped


def _parse_tap(output: str) -> TestReport | None:
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
    for line in output.splitlines():
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
        if skip:
            skipped.append(test_id)
        elif m.group(2) == "ok":
            passed.append(test_id)
        else:
            failed.append(test_id)
    return _report(passed, failed, skipped, [])


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
        target = {"pass": passed, "fail": failed, "skip": skipped}.get(str(action))
        if target is not None:
            target.append(test_id)
    return _report(passed, failed, skipped, [])


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
    return _report(passed, failed, skipped, errors)


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
    return _report(passed, failed, skipped, errors)


def jest_output_file(command: str) -> str | None:
    """The JSON report file a jest/vitest command writes (`--outputFile`), if any."""
    if not re.search(r"\b(jest|vitest)\b", command) or "json" not in command:
        return None
    m = re.search(r"--outputFile[= ](\S+)", command)
    return m.group(1).strip("'\"") if m else None
