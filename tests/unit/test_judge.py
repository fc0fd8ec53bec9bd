"""The files that judge the work and the operator's exam, on real git repos:
what is found at gate 1, what the exam tree puts back (and what it keeps),
the harness scan's findings and its silence on honest code, and per-test
accounting that names what went missing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from corral.supervisor.contracts.judge import (
    HARNESS,
    build_exam,
    discover,
    harness_findings,
    splice,
)
from corral.supervisor.contracts.per_test import against_baseline
from corral.supervisor.git.trees import snapshot_tree
from corral.supervisor.models import (
    CheckResult,
    ContractCheck,
    JudgeFile,
    OutcomeContract,
    TestReport,
)
from tests.conftest import git

PYTEST = ContractCheck(
    name="tests", command="python -m pytest -q tests", must_pass=["tests/test_mul.py::test_mul"]
)
PYPROJECT = (
    '[project]\nname = "calc"\nversion = "0"\n\n'
    '[tool.pytest.ini_options]\naddopts = "-q"\n\n[tool.ruff]\nline-length = 99\n'
)
PACKAGE = {"name": "calc", "scripts": {"test": "node --test"}, "dependencies": {}}


def _files(repo: Path, files: dict[str, str]) -> str:
    for path, text in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "project")
    return git(repo, "rev-parse", "HEAD").strip()


def _project(repo: Path) -> str:
    return _files(
        repo,
        {
            "calc.py": "def mul(a, b):\n    return a + b\n",
            "tests/test_mul.py": "from calc import mul\n\ndef test_mul():\n    assert mul(2, 3) == 6\n",
            "tests/helpers.py": "def close(a, b):\n    return abs(a - b) < 1e-9\n",
            "conftest.py": "",
            "pyproject.toml": PYPROJECT,
            "package.json": json.dumps(PACKAGE, indent=2) + "\n",
            "web/app.test.js": "test('x', () => {});\n",
            "scripts/ci.sh": "pytest\n",
            "docs/test_plan.md": "not a test\n",
        },
    )


def _judged(repo: Path, start: str, *checks: ContractCheck, **kw: object) -> OutcomeContract:
    contract = OutcomeContract(description="mul", checks=list(checks or [PYTEST]), **kw)
    return contract.model_copy(update={"judge_files": discover(repo, start, contract, [])})


def test_gate_one_finds_the_files_the_checks_are_judged_by(repo: Path) -> None:
    start = _project(repo)
    script = ContractCheck(name="ci", command="bash ./scripts/ci.sh")
    files = {(f.path, f.section): f for f in _judged(repo, start, PYTEST, script).judge_files}
    assert ("tests/test_mul.py", None) in files and ("tests/helpers.py", None) in files
    assert ("conftest.py", None) in files
    assert ("pyproject.toml", "tool.pytest") in files  # the section, not the whole file
    assert ("scripts/ci.sh", None) in files and "ci" in files[("scripts/ci.sh", None)].why
    assert ("calc.py", None) not in files and ("docs/test_plan.md", None) not in files
    # a script may run any runner; pytest checks only: JavaScript tests do not judge them
    assert ("web/app.test.js", None) in files
    only = {(f.path, f.section) for f in _judged(repo, start, PYTEST).judge_files}
    assert ("web/app.test.js", None) not in only and ("package.json", "scripts") not in only
    blob = git(repo, "rev-parse", f"{start}:tests/test_mul.py").strip()
    assert files[("tests/test_mul.py", None)].blob == blob


def test_the_operator_adds_and_removes_judge_files(repo: Path) -> None:
    start = _project(repo)
    contract = _judged(
        repo,
        start,
        judge_files=[JudgeFile(path="calc.py")],
        not_judged=["tests/helpers.py"],
    )
    paths = {f.path for f in contract.judge_files}
    assert "calc.py" in paths and "tests/helpers.py" not in paths
    assert "tests/test_mul.py" in paths


def _exam(repo: Path, start: str, contract: OutcomeContract, files: dict[str, str | None]):
    for path, text in files.items():
        if text is None:
            (repo / path).unlink()
        else:
            (repo / path).parent.mkdir(parents=True, exist_ok=True)
            (repo / path).write_text(text)
    tree = snapshot_tree(repo)
    return tree, build_exam(repo, start, tree, contract)


def _in(repo: Path, tree: str, path: str) -> str | None:
    out = git(repo, "ls-tree", tree, "--", path).strip()
    return git(repo, "cat-file", "blob", out.split()[2]) if out else None


def test_the_exam_puts_back_what_the_agent_changed_and_keeps_its_new_tests(repo: Path) -> None:
    start = _project(repo)
    contract = _judged(repo, start)
    tree, exam = _exam(
        repo,
        start,
        contract,
        {
            "calc.py": "def mul(a, b):\n    return a * b\n",
            "tests/test_mul.py": "def test_mul():\n    assert True\n",
            "tests/helpers.py": None,
            "tests/conftest.py": "import pytest\n",
            "tests/test_new.py": "def test_new():\n    pass\n",
        },
    )
    assert exam.tree != tree
    assert "mul(2, 3) == 6" in (_in(repo, exam.tree, "tests/test_mul.py") or "")
    assert _in(repo, exam.tree, "tests/helpers.py") is not None
    assert _in(repo, exam.tree, "tests/conftest.py") is None
    assert _in(repo, exam.tree, "tests/test_new.py") is not None  # an addition
    assert "a * b" in (_in(repo, exam.tree, "calc.py") or "")
    shown = {c.path: c for c in exam.changes}
    assert (
        shown["tests/test_mul.py"].what == "edited" and shown["tests/test_mul.py"].holds_must_pass
    )
    assert shown["tests/helpers.py"].what == "deleted"
    assert shown["tests/conftest.py"].what == "added"
    assert "tests/test_new.py" not in shown and "calc.py" not in shown


def test_an_honest_change_is_its_own_exam(repo: Path) -> None:
    start = _project(repo)
    contract = _judged(repo, start)
    deps = PYPROJECT.replace('version = "0"\n', 'version = "0"\ndependencies = ["attrs"]\n')
    tree, exam = _exam(
        repo,
        start,
        contract,
        {
            "calc.py": "def mul(a, b):\n    return a * b\n\n\ndef same(a, b):\n    return a == b\n",
            "pyproject.toml": deps,
            "tests/test_more.py": "def test_more():\n    assert 1 == 1\n",
        },
    )
    assert exam.tree == tree and exam.changes == []


def test_a_changed_section_is_spliced_back_and_the_rest_of_the_file_kept(repo: Path) -> None:
    start = _project(repo)
    contract = _judged(repo, start)
    rigged = PYPROJECT.replace('version = "0"\n', 'version = "0"\ndependencies = ["attrs"]\n')
    rigged = rigged.replace('addopts = "-q"', "addopts = \"-q -k 'not mul'\"")
    _tree, exam = _exam(repo, start, contract, {"pyproject.toml": rigged})
    now = _in(repo, exam.tree, "pyproject.toml") or ""
    assert "not mul" not in now and 'dependencies = ["attrs"]' in now and "line-length" in now
    [change] = exam.changes
    assert change.what == "section changed" and change.detail == "tool.pytest"


def test_package_json_scripts_are_spliced_back_and_its_dependencies_kept(repo: Path) -> None:
    start = _project(repo)
    contract = _judged(repo, start, ContractCheck(name="tests", command="npm test"))
    rigged = dict(PACKAGE, scripts={"test": "exit 0"}, dependencies={"left-pad": "1"})
    _tree, exam = _exam(repo, start, contract, {"package.json": json.dumps(rigged)})
    now = json.loads(_in(repo, exam.tree, "package.json") or "{}")
    assert now["scripts"] == {"test": "node --test"} and now["dependencies"] == {"left-pad": "1"}
    assert [c.what for c in exam.changes] == ["section changed"]


def test_a_runner_key_added_to_package_json_is_left_out_and_named(repo: Path) -> None:
    """Only `scripts` was judged at gate 1 (the project had no `mocha` key):
    a `mocha` key the change adds is runner configuration all the same."""
    start = _project(repo)
    contract = _judged(repo, start, ContractCheck(name="tests", command="npm test"))
    rigged = dict(PACKAGE, mocha={"grep": "adds"}, dependencies={"left-pad": "1"})
    _tree, exam = _exam(repo, start, contract, {"package.json": json.dumps(rigged)})
    now = json.loads(_in(repo, exam.tree, "package.json") or "{}")
    assert "mocha" not in now and now["dependencies"] == {"left-pad": "1"}
    assert [c.shown() for c in exam.changes] == ["package.json (section changed; mocha)"]


def test_a_judge_file_turned_into_a_folder_comes_back_as_a_file(repo: Path) -> None:
    start = _project(repo)
    contract = _judged(repo, start)
    (repo / "tests" / "test_mul.py").unlink()
    _tree, exam = _exam(repo, start, contract, {"tests/test_mul.py/x.py": "x = 1\n"})
    assert "mul(2, 3) == 6" in (_in(repo, exam.tree, "tests/test_mul.py") or "")


def test_splice_says_when_the_sections_are_the_same() -> None:
    same = PYPROJECT.replace("line-length = 99", "line-length = 120")
    assert splice("pyproject.toml", PYPROJECT, same, ["tool.pytest"]) is None
    cfg = "[metadata]\nname = x\n\n[tool:pytest]\naddopts = -q\n"
    assert splice("setup.cfg", cfg, cfg.replace("name = x", "name = y"), ["tool:pytest"]) is None
    spliced = splice("setup.cfg", cfg, cfg.replace("-q", "-k 'not mul'"), ["tool:pytest"])
    assert spliced is not None and "not mul" not in spliced


def test_the_harness_scan_names_rigging_and_is_silent_on_honest_code() -> None:
    honest = {
        "calc.py": [
            "import time",
            "def elapsed(start):",
            "    return time.time() - start",
            "class Money:",
            "    def __eq__(self, other):",
            "        return isinstance(other, Money) and self.cents == other.cents",
            "def is_true(x):",
            "    return True",
            "    # see _pytest docs",
        ]
    }
    assert harness_findings(honest) == []
    honest_tests = {
        "tests/test_clock.py": [
            "import time",
            "from _pytest.monkeypatch import MonkeyPatch",
            "from freezegun import freeze_time",
            '@freeze_time("2020-01-01")',
            "def test_frozen(monkeypatch):",
            '    monkeypatch.setattr(time, "time", lambda: 0)',
            "    assert time.time() == 0",
        ]
    }
    assert harness_findings(honest_tests) == []
    # at a new test file's top level, patching pytest's reports reaches every test
    rigged_test = {
        "tests/test_zz.py": [
            "from _pytest.reports import TestReport",
            "TestReport.outcome = 'passed'",
        ]
    }
    assert [c.path for c in harness_findings(rigged_test)] == ["tests/test_zz.py"]
    rigged = {
        "calc.py": ["class A:", "    def __eq__(self, other):", "        return True"],
        "util.py": ["import time", "time.time = lambda: 0"],
        "lib.py": ["from _pytest.reports import TestReport"],
        "run.py": ["os._exit(0)"],
    }
    found = {(c.path, c.detail.split(":")[0]) for c in harness_findings(rigged)}
    assert ("calc.py", "a comparison that returns a constant") in found
    assert ("util.py", "the clock patched") in found
    assert ("lib.py", "pytest's internals (_pytest)") in found
    assert any(path == "run.py" for path, _ in found)
    assert all(c.what == HARNESS for c in harness_findings(rigged))
    plugin = {"pyproject.toml": ["[project.entry-points.pytest11]", 'calc = "calc.plugin"']}
    assert [c.detail.split(":")[0] for c in harness_findings(plugin)] == [
        "a pytest plugin entry point"
    ]


# -- per-test accounting ----------------------------------------------------------------------

SUITE = ContractCheck(name="tests", command="pytest -q")


def _report(passed: list[str], failed: list[str] = [], skipped: list[str] = []) -> TestReport:  # noqa: B006
    return TestReport(passed=passed, failed=failed, skipped=skipped)


def test_a_test_that_passed_before_and_was_not_run_now_is_named() -> None:
    before = _report(["a", "b", "c"])
    judged = against_baseline(SUITE, 0, _report(["a", "new"]), before)
    assert judged is not None and not judged.passed
    assert "2 test(s) that passed on the untouched tree were not run now" in judged.note
    assert "b, c" in judged.note


def test_a_runner_that_stopped_reporting_cannot_be_judged() -> None:
    judged = against_baseline(SUITE, 0, None, _report(["a"]))
    assert judged is not None and not judged.passed
    assert judged.note.startswith("cannot judge: the test runner produced no per-test report")
    named = SUITE.model_copy(update={"must_pass": ["t::x"]})
    assert not (against_baseline(named, 0, None, None) or judged).passed
    # named tests are held to a report even when the untouched tree had none
    judged = against_baseline(named, 0, _report(["t::y"]), None)
    assert judged is not None and not judged.passed and "t::x" in judged.note


def test_tests_appended_to_a_test_file_are_an_extension_not_an_edit(repo: Path) -> None:
    start = _project(repo)
    contract = _judged(repo, start)
    old = (repo / "tests" / "test_mul.py").read_text()
    more = old + "\n\ndef test_zero():\n    assert mul(0, 2) == 0\n"
    tree, exam = _exam(repo, start, contract, {"tests/test_mul.py": more})
    assert exam.tree != tree  # the file as it was decides; the agent's version runs too
    assert exam.only_extended and [c.what for c in exam.changes] == ["extended"]
    assert not exam.changes[0].blocks
    for rigged in (
        old + "\n\ndef test_mul():\n    pass\n",  # the named test redefined
        old + "\nimport calc\ncalc.mul = lambda a, b: 6\n",  # code run at import
        old + "    assert True\n",  # into the file's last test
        old.replace("== 6", "== 5") + "\n\ndef test_zero():\n    pass\n",
    ):
        _tree, exam = _exam(repo, start, contract, {"tests/test_mul.py": rigged})
        assert [c.what for c in exam.changes if c.path == "tests/test_mul.py"] == ["edited"]
        assert exam.changes[0].blocks


SCRIPT_STYLE = (
    "from calc import mul\n\ndef test_mul():\n    assert mul(2, 3) == 6\n\n\n"
    "if __name__ == '__main__':\n    test_mul()\n"
)


@pytest.mark.slow
def test_a_test_added_to_a_script_style_test_file_with_its_main_call_is_an_extension(
    repo: Path,
) -> None:
    """pox's shape: test files that tox runs as scripts end in a `__main__`
    block calling their tests; an honest new test adds a call there (or a
    new block after it). Both are `extended`; a `__main__` block that could
    run at import, or that does anything but call the file's tests, is not."""
    start = _files(repo, {"calc.py": "def mul(a, b):\n    return a * b\n"})
    start = _files(repo, {"tests/test_mul.py": SCRIPT_STYLE})
    contract = _judged(repo, start)
    new_test = "\n\ndef test_zero():\n    assert mul(0, 2) == 0\n"
    before_main, main = SCRIPT_STYLE.split("\n\nif __name__")
    for honest in (
        # pox's own change: a new test and a second block after the first
        SCRIPT_STYLE + new_test + "\n\nif __name__=='__main__':\n    test_zero()\n",
        # the new test before the block, its call added inside it
        before_main + new_test + "\n\nif __name__" + main + "    test_zero()\n",
    ):
        _tree, exam = _exam(repo, start, contract, {"tests/test_mul.py": honest})
        assert [c.what for c in exam.changes] == ["extended"], honest
        assert exam.only_extended
    for rigged in (
        SCRIPT_STYLE
        + new_test
        + "\n\nif __name__ == '__main__':\n    import os\n    os._exit(0)\n",
        SCRIPT_STYLE + new_test + "\n\nif __name__ != '__main__':\n    test_zero()\n",
        SCRIPT_STYLE + new_test + "\n\nif __name__ == '__main__' or 1:\n    test_zero()\n",
        SCRIPT_STYLE
        + new_test
        + "\n\nif __name__ == '__main__':\n    test_zero()\nelse:\n    pass\n",
        SCRIPT_STYLE + "\n\nif __name__ == '__main__':\n    mul(2, 3)\n",  # not a test
        SCRIPT_STYLE + new_test + "\n\nif __name__ == '__main__':\n    test_zero(1)\n",
        # the old block's call dropped, a new test's call in its place
        before_main + new_test + "\n\nif __name__ == '__main__':\n    test_zero()\n",
        # the old block's call kept, but something else run before it
        before_main
        + new_test
        + "\n\nif __name__"
        + main.replace("    test_mul()", "    exit(0)\n    test_mul()"),
    ):
        _tree, exam = _exam(repo, start, contract, {"tests/test_mul.py": rigged})
        assert [c.what for c in exam.changes] == ["edited"], rigged


def test_a_node_assertion_appended_is_an_extension_and_a_mock_is_not(repo: Path) -> None:
    start = _files(
        repo,
        {"calc.js": "exports.mul = (a, b) => a * b;\n", "test.js": "require('assert').ok(1);\n"},
    )
    contract = _judged(repo, start, ContractCheck(name="tests", command="node test.js"))
    assert any(f.path == "test.js" for f in contract.judge_files)
    line = "\nrequire('assert').strictEqual(require('./calc.js').mul(2, 21), 42);\n"
    _tree, exam = _exam(repo, start, contract, {"test.js": "require('assert').ok(1);\n" + line})
    assert [c.what for c in exam.changes] == ["extended"]
    mock = "\nrequire('./calc.js').mul = () => 42;\n"
    _tree, exam = _exam(repo, start, contract, {"test.js": "require('assert').ok(1);\n" + mock})
    assert [c.what for c in exam.changes] == ["edited"]


TAPE_TEST = (
    "var concatMap = require('./');\nvar test = require('tape');\n\n"
    "test('flat', function (t) {\n    var ys = concatMap([1], function (x) { return [x]; });\n"
    "    t.same(ys, [1]);\n    t.end();\n});\n"
)


def test_a_tape_test_appended_with_its_own_locals_is_an_extension(repo: Path) -> None:
    """concat-map's honest change (round 8): a tape test appended with `var`
    locals in its callback was held as a judge change (exit 9) because every
    `=` counted as an assignment that could reach the older tests."""
    start = _files(
        repo, {"index.js": "module.exports = function () {};\n", "test/map.js": TAPE_TEST}
    )
    contract = _judged(repo, start, ContractCheck(name="tests", command="tape test/*.js"))
    honest = (
        "\ntest('third argument', function (t) {\n    var xs = [ 'a', 'b' ];\n"
        "    var seen = []; // the array: 'it = is'\n"
        "    concatMap(xs, function (x, ix, arr) {\n        seen.push(arr);\n"
        "        return [ x ];\n    });\n    t.equal(seen[0], xs);\n    t.end();\n});\n"
        "\ntest('arrow', (t) => {\n    const one = 1;\n    let two = one + one;\n"
        "    t.equal(two, 2);\n    t.end();\n});\n"
    )
    _tree, exam = _exam(repo, start, contract, {"test/map.js": TAPE_TEST + honest})
    assert [c.what for c in exam.changes] == ["extended"]
    for rigged in (
        "\nvar concatMap = function () { return [1]; };\n",  # rebinds what the old tests call
        "\n{ var concatMap = function () { return [1]; } }\n",  # a block's var is the module's
        "\nif (1) {\n  var concatMap = function () { return [1]; };\n}\n",
        "\n// function\n(0)\n{ var concatMap = function () { return [1]; } }\n",  # a head in a comment
        "\nvar s = ' function'\n(s)\n{ var concatMap = function () { return [1]; } }\n",
        "\ntest('x', function (t) {\n  t.same = function () {};\n  t.end();\n});\n",
        "\ntest('x', function (t) {\n  var a = 1, concatMap = 2;\n  t.end();\n});\n",
        "\ntest('x', function (t) {\n  var a = /x/;\n  t.end();\n});\n",  # a regex: not followed
        "\n});\nvar concatMap = 1;\n",  # closes what it did not open
    ):
        _tree, exam = _exam(repo, start, contract, {"test/map.js": TAPE_TEST + rigged})
        assert [c.what for c in exam.changes] == ["edited"], rigged


def test_a_module_that_shadows_the_test_runner_is_left_out_of_the_exam(repo: Path) -> None:
    start = _project(repo)
    contract = _judged(repo, start)
    fake = "import sys\nsys.exit(0)\n"
    _tree, exam = _exam(
        repo, start, contract, {"pytest.py": fake, "node_modules/tap/index.js": "x\n"}
    )
    assert _in(repo, exam.tree, "pytest.py") is None
    assert {(c.path, c.what) for c in exam.changes} >= {("pytest.py", "added")}
    assert any(c.path == "node_modules/tap/index.js" for c in exam.changes)


def test_an_added_line_that_looks_like_a_file_header_cannot_hide_what_follows() -> None:
    from corral.supervisor.contracts.judge import _added_lines

    patch = (
        "diff --git a/calc.py b/calc.py\n--- a/calc.py\n+++ b/calc.py\n@@ -1,0 +2,3 @@\n"
        '+"""\n+++ b/tests/test_mul.py\n+"""\n+os._exit(0)\n'
    )
    added = _added_lines(patch)
    assert list(added) == ["calc.py"] and "os._exit(0)" in added["calc.py"]


def test_only_a_module_that_shadows_what_the_runner_imports_is_left_out() -> None:
    from corral.supervisor.contracts.judge import judge_like_added

    for shadow in ("pytest.py", "_pytest/__init__.py", "json.py", "xml/__init__.py"):
        assert judge_like_added(shadow) == "shadows the test runner", shadow
    for honest in ("test/test_new.py", "test/__init__.py", "json/data.json", "src/json.py"):
        assert judge_like_added(honest) is None, honest


# -- node runners: what their configuration loads, snapshots, the harness ---------------------

JEST = ContractCheck(name="tests", command="npx jest --ci --json --outputFile=r.json")


def test_what_a_node_runners_configuration_loads_judges_and_a_source_file_does_not(
    repo: Path,
) -> None:
    start = _files(
        repo,
        {
            "src/calc.js": "exports.mul = (a, b) => a + b;\n",
            "src/calc.test.js": "test('x', () => expect(1).toBe(1));\n",
            "src/__snapshots__/calc.test.js.snap": "exports[`x 1`] = `1`;\n",
            "jest.config.js": (
                "module.exports = {\n  setupFilesAfterEnv: ['<rootDir>/jest.setup'],\n"
                "  reporters: ['default', './tools/reporter.js'],\n"
                "  testPathIgnorePatterns: ['calc'],\n  roots: ['<rootDir>/src'],\n"
                "  collectCoverageFrom: ['src/calc.js'],\n};\n"
            ),
            "jest.setup.js": "",
            "tools/reporter.js": "",
            ".mocharc.yml": "require:\n  - support/hooks.js\nspec: test/**/*.js\n",
            "support/hooks.js": "",
            "babel.config.js": "module.exports = {};\n",
            "package.json": json.dumps(
                {
                    "name": "calc",
                    "main": "src/calc.js",
                    "scripts": {"test": "mocha --require ./support/extra.js"},
                    "tap": {"before": "support/tap-before.js", "coverage-map": "src/calc.js"},
                    "nyc": {"include": ["src/calc.js"]},
                }
            ),
            "support/extra.js": "",
            "support/tap-before.js": "",
        },
    )
    files = {f.path: f.why for f in _judged(repo, start, JEST).judge_files}
    assert files["src/__snapshots__/calc.test.js.snap"].startswith("jest snapshot")
    assert "loaded by the test runner configuration (jest.config.js)" in files["jest.setup.js"]
    assert "tools/reporter.js" in files and "support/hooks.js" in files
    assert "support/tap-before.js" in files  # package.json's `tap` key
    assert "support/extra.js" in files  # the npm script's runner argument
    assert "babel.config.js" in files  # it transforms every test file jest runs
    # `main` and the coverage settings name the code under test; an ignore
    # pattern is not a file
    assert "src/calc.js" not in files


def test_the_harness_scan_names_node_rigging_and_is_silent_on_honest_node_code() -> None:
    honest = {
        "src/calc.js": [
            "const assert = require('assert');",
            "if (Object.is(a, b)) return true;",
            "assert.strictEqual(typeof a, 'number');",
            "module.exports = { expected: 1 };",
        ],
        "test/more.test.js": [
            "expect.extend({ toBeWithin() {} });",  # a test file's own matcher
            "test('x', () => {",
            "  delete require.cache[require.resolve('../calc')];",
            "});",
        ],
        "train.py": ["model.fit(x, y)", "fit(x)"],  # not a focused test
    }
    assert harness_findings(honest) == []
    rigged = {
        "src/a.js": ["Object.is = () => true;"],
        "src/b.js": ["Object.defineProperty(Object, 'is', { value: () => true });"],
        "src/c.js": ["global.expect = (v) => ({ toBe() {} });"],
        "src/d.js": ["require('assert').strictEqual = () => {};"],
        "src/e.js": ["assert.deepEqual = function () {};"],
        "test/zz.js": ["Module.prototype.require = function () {};"],
    }
    rigged["test/zz_only.test.js"] = ["describe('calc', () => {", "  it.only('muls', () => {});"]
    rigged["spec/focus.js"] = ["fit('muls', () => {});"]
    found = {c.path: c.detail.split(":")[0] for c in harness_findings(rigged)}
    assert found == {
        "test/zz_only.test.js": "runs only the tests it focuses (.only)",
        "spec/focus.js": "runs only the tests it focuses (.only)",
        "src/a.js": "Object.is replaced (jest's toBe compares with it)",
        "src/b.js": "Object.is replaced (jest's toBe compares with it)",
        "src/c.js": "jest's expect patched",
        "src/d.js": "node's assert patched",
        "src/e.js": "node's assert patched",
        "test/zz.js": "node's module loader patched",
    }


def test_a_test_method_added_inside_a_test_class_is_an_extension_and_an_override_is_not(
    repo: Path,
) -> None:
    """The common honest change: one more test in the middle of a unittest
    class. The file as it was decides, the agent's version runs too, and no
    person is needed; a method that overrides what the class inherits, a
    changed old test or code run at import is a judge change."""
    cls = (
        "import unittest\nfrom calc import mul\n\n\nclass TestMul(unittest.TestCase):\n"
        "    def test_mul(self):\n        self.assertEqual(mul(2, 3), 6)\n\n"
        "    def test_one(self):\n        self.assertEqual(mul(1, 1), 1)\n\n\n"
        "def test_free():\n    assert mul(2, 2) == 4\n"
    )
    start = _files(
        repo, {"calc.py": "def mul(a, b):\n    return a * b\n", "tests/test_mul.py": cls}
    )
    contract = _judged(repo, start)
    inside = cls.replace(
        "    def test_one(self):",
        "    def test_zero(self):\n        self.assertEqual(mul(0, 5), 0)\n\n    def test_one(self):",
    )
    between = cls.replace(
        "\n\ndef test_free", "\n\ndef test_neg():\n    assert mul(-1, 2) == -2\n\n\ndef test_free"
    )
    for honest in (inside, between):
        _tree, exam = _exam(repo, start, contract, {"tests/test_mul.py": honest})
        assert [c.what for c in exam.changes] == ["extended"], honest
        assert exam.only_extended and not exam.changes[0].blocks
    for rigged in (
        cls.replace(  # overrides the assertion every test of the class uses
            "    def test_one(self):",
            "    def assertEqual(self, *a):\n        pass\n\n    def test_one(self):",
        ),
        cls.replace(
            "    def test_one(self):",
            "    def setUp(self):\n        pass\n\n    def test_one(self):",
        ),
        cls.replace("mul(2, 3), 6", "mul(2, 3), mul(2, 3)"),  # an old test changed
        cls.replace("class TestMul(unittest.TestCase):", "class TestMul(object):"),
        cls.replace("\n\ndef test_free", "\n\nmul = lambda a, b: 6\n\n\ndef test_free"),
        cls.replace(
            "    def test_one(self):\n        self.assertEqual(mul(1, 1), 1)\n\n", ""
        ),  # one gone
    ):
        _tree, exam = _exam(repo, start, contract, {"tests/test_mul.py": rigged})
        assert [c.what for c in exam.changes if c.path == "tests/test_mul.py"] == ["edited"], rigged
        assert exam.changes[0].blocks


@pytest.mark.slow
def test_a_module_whose_doctests_pytest_runs_is_the_code_under_test_not_a_judge_file(
    repo: Path, tmp_path: Path
) -> None:
    """tabulate's tox check runs `pytest --doctest-modules`: its doctest items
    (`tabulate.__init__::tabulate._isbool`) made tabulate/__init__.py a judge
    file, so verification put the code under test back as it was at gate 1:
    a correct change waited for a person and a regression in that module
    passed every check (both exit 9)."""
    import subprocess
    import sys

    from corral.supervisor.contracts.test_reports import parse_junit

    start = _files(
        repo,
        {
            "calc.py": '"""Calculator."""\n\n\ndef mul(a, b):\n    """\n    >>> mul(2, 3)\n    6\n    """\n    return a * b\n',
            "tests/test_mul.py": "from calc import mul\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n",
        },
    )
    junit = tmp_path / "report.xml"
    subprocess.run(
        [
            *(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--doctest-modules"),
            *(f"--junitxml={junit}", "-o", "junit_family=xunit2"),
        ],
        cwd=repo,
        check=True,
        capture_output=True,
    )
    report = parse_junit(junit.read_text())
    assert report is not None and "calc::calc.mul" in report.passed  # the doctest item, as read
    check = ContractCheck(name="tests", command="python -m pytest --doctest-modules")
    contract = OutcomeContract(description="mul", checks=[check])
    baseline = [CheckResult(name="tests", passed=True, exit_code=0, tests=report)]
    judged = {f.path for f in discover(repo, start, contract, baseline)}
    assert "tests/test_mul.py" in judged
    assert "calc.py" not in judged


TAPE_TEST = (
    "'use strict';\n\nvar parse = require('../');\nvar test = require('tape');\n\n"
    "test('nums', function (t) {\n\tvar argv = parse(['-x', '1']);\n"
    "\tt.deepEqual(argv, { x: 1, _: [] });\n\tt.end();\n});\n"
)


def test_a_js_test_that_declares_its_own_locals_is_an_extension_and_a_shadow_is_not(
    repo: Path,
) -> None:
    """minimist's honest tape test appended to test/num.js (`var argv =
    parse(...)` inside its function) was held as an edit at exit 9: any `=`
    in appended JavaScript counted as rigging. A declaration local to the new
    test's own function cannot reach the old tests; one at the top of the
    module (hoisted over the whole file), a `var` in a block that is no
    function, or a function named like something the old tests use can."""
    start = _files(
        repo, {"index.js": "module.exports = function () {};\n", "test/num.js": TAPE_TEST}
    )
    contract = _judged(repo, start, ContractCheck(name="tests", command="tape test/*.js"))
    assert any(f.path == "test/num.js" for f in contract.judge_files)
    honest = (
        "\ntest('binary numbers', function (t) {\n\tvar argv = parse(['--bin', '0b1010']);\n"
        "\tconst want = { bin: 10, _: [] };\n\tt.deepEqual(argv, want);\n\tt.end();\n});\n"
        "\ntest('arrow', (t) => {\n\tlet n = parse([]);\n\tt.ok(n);\n\tt.end();\n});\n"
    )
    _tree, exam = _exam(repo, start, contract, {"test/num.js": TAPE_TEST + honest})
    assert [c.what for c in exam.changes] == ["extended"]
    rigged = [
        # hoisted over the module: every old test now calls the fake
        "\nvar parse = function () { return { x: 1, _: [] }; };\n",
        # a `var` in a block that is not a function still lands in the module
        "\nif (true) {\n\tvar parse = function () { return {}; };\n}\n",
        # braces in a string or a regex literal do not open a function
        "\nvar s = 'function () {';\nvar parse = null;\nvar e = '}';\n",
        "\n/function () {/;\nvar parse = null;\n/}/;\n",
        "\nvar s = `function () {`;\nvar parse = null;\nvar e = `}`;\n",
        "\ntest('x', function (t) {\n\tvar s = `${(parse = null)}`;\n\tt.end();\n});\n",
        # a declared function shadows what the old tests name (hoisted over
        # the module: `require('tape')` now calls it)
        "\nfunction require() {\n\treturn function () { return {}; };\n}\n",
        # an assignment to something outside the new test is rigging as before
        "\ntest('x', function (t) {\n\tparse = function () {};\n\tt.end();\n});\n",
        # a declaration that overwrites a second name on the same line
        "\ntest('x', function (t) {\n\tvar a = parse = null;\n\tt.end();\n});\n",
    ]
    for appended in rigged:
        _tree, exam = _exam(repo, start, contract, {"test/num.js": TAPE_TEST + appended})
        assert [c.what for c in exam.changes] == ["edited"], appended
