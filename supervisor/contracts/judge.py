"""The files that judge the work, fixed at gate 1, and the exam built from them.

A contract's checks run the project's own tests, test configuration and test
scripts, and those are files in the tree the agent writes. So when a contract
is proposed and confirmed, corral records which files judge the work
(`discover`): the test files of the runners the checks use (by each runner's
conventions, and the modules the untouched tree's per-test report names),
every `conftest.py`, `pytest.ini`, `tox.ini`, `noxfile.py`, the pytest
sections of `setup.cfg` and `pyproject.toml` (section-level: the agent may
still add a dependency), `package.json`'s `scripts` and test-runner keys
(section-level), jest/vitest/mocha/tap/ava and babel config files, jest
snapshots (`__snapshots__/*.snap` beside any test), the files a runner's
configuration or arguments load (a setup file that could patch `expect`), a
Makefile a check calls, and scripts a check command (or an npm script)
names. Each is kept with its blob at the start commit, its section and why
it judges.

Verification then runs the operator's exam (`build_exam`): the tree to
deliver with every judge file put back as it is on the base (a deleted or
edited test file comes back, a judge-like file the agent added — a new
`conftest.py`, `pytest.ini`, a `pytest.py` that shadows the runner — is left
out, a section-level file gets only its section back). The agent's new test
files stay: they are additions. Tests only added to a test file (new test
functions, classes or `test…` methods, anywhere in a Python file and appended
to others; nothing it had changed, nothing that runs at import or around the
file's own tests) are `extended`: the file as it was decides, the agent's version must
pass too, and no person is needed; any other change is a judge change.
Built from git objects in a private index; nothing is written to a worktree.
When the exam tree is the delivered tree (the honest case) nothing else runs.

The same diff is scanned for added lines outside the judge files that reach
into the test harness (`harness_findings`): pytest's internals and report
hooks, unittest's result classes, replacing `pytest` in `sys.modules`,
`os._exit`, an `__eq__` that returns True whatever it is given, the clock
patched at import; on node `Object.is` replaced, `expect` or `assert`
patched, the module loader patched, and a `.only` that focuses the run (a
new file's stand-in for the named test). A match blocks automatic approval
like a judge change; it is a heuristic (code under test can patch the
harness in ways no pattern names) — hidden checks are the defence against
that.

Blocking; call through `asyncio.to_thread`.
"""

from __future__ import annotations

import copy
import json
import logging
import posixpath
import re
import shlex
import sys
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..git.result_tree import Change, Entry, changes_between, quote, unquote
from ..git.run import MAX_OUTPUT_BYTES, git
from ..git.snapshot import PrivateIndex
from ..models import CheckResult, JudgeChange, JudgeFile, OutcomeContract

log = logging.getLogger("corral.supervisor.contracts.judge")

_QUOTED = ["-c", "core.quotePath=true"]
HARNESS = "reaches into the test harness"
EXTENDED = "extended"  # tests added to a test file, nothing it had changed

# -- which runners the checks use -------------------------------------------------------

PYTHON, NODE, GO, CARGO = "python", "node", "go", "cargo"
ALL_RUNNERS = frozenset({PYTHON, NODE, GO, CARGO})
_RUNNER_WORDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        PYTHON,
        re.compile(
            r"\b(pytest|py\.test|unittest|tox|nox|python[\d.]*|hatch|pdm|poetry|uv|nose2|trial)\b"
        ),
    ),
    (NODE, re.compile(r"\b(npm|npx|yarn|pnpm|node|jest|vitest|mocha|tap|ava|bun|deno)\b")),
    (GO, re.compile(r"\bgo\b")),
    (CARGO, re.compile(r"\bcargo\b")),
)


def runners_of(commands: Iterable[str]) -> frozenset[str]:
    """The runners the check commands use; a command that names none (a
    Makefile target, a script) may run any of them."""
    found: set[str] = set()
    for command in commands:
        named = {runner for runner, word in _RUNNER_WORDS if word.search(command)}
        if not named or re.search(r"\bmake\b", command):
            return ALL_RUNNERS
        found |= named
    return frozenset(found) or ALL_RUNNERS


# -- what a path is, by each runner's conventions ----------------------------------------

_PY_TEST = re.compile(r"^(test.*\.py|.*_test\.py)$")
_TEST_DIRS = {"test", "tests", "testing", "__tests__", "spec", "specs"}
_NODE_TEST = re.compile(r"\.(test|spec)\.[cm]?[jt]sx?$")
_NODE_SOURCE = re.compile(r"\.([cm]?[jt]sx?|json|snap)$")
_NODE_CONFIG = re.compile(
    r"^(jest|vitest|vite|ava|karma|playwright|cypress)\.config\.[\w.]+$|^\.mocharc(\.[\w]+)?$|"
    r"^\.taprc$|^\.c8rc(\.json)?$|^\.nycrc(\.json)?$|^\.npmrc$|^\.yarnrc(\.yml)?$|^bunfig\.toml$|"
    # jest runs every test file through babel when the project has a babel config
    r"^babel\.config\.[cm]?js(on)?$|^\.babelrc(\.[cm]?js(on)?)?$"
)
# jest's snapshots: the expected values of `toMatchSnapshot`, wherever the test lives
_SNAPSHOT_DIR = "__snapshots__"
_PY_CONFIG = {
    "conftest.py": "pytest configuration (conftest.py)",
    "pytest.ini": "pytest configuration",
    ".pytest.ini": "pytest configuration",
    "tox.ini": "tox and pytest configuration",
    "noxfile.py": "nox sessions",
    "sitecustomize.py": "Python start-up hook",
    "usercustomize.py": "Python start-up hook",
}
_SKIPPED_DIRS = {"node_modules", ".git", "vendor", "target", "dist", "build", ".venv", "venv"}
# section-level files: (section name, what it holds)
_TOML_SECTION = "tool.pytest"
_CFG_SECTION = "tool:pytest"
_JSON_SECTIONS = ("scripts", "jest", "mocha", "ava", "tap", "c8", "nyc")
_RUNNER_SECTIONS = frozenset(_JSON_SECTIONS) - {"scripts"}
# coverage settings name the code under test (`collectCoverageFrom`, nyc's
# `include`): what they name is not loaded into the run as a judge
_COVERAGE_SECTIONS = frozenset({"c8", "nyc"})
_COVERAGE_CONFIG = re.compile(r"^\.(c8|nyc)rc")
_COVERAGE = re.compile(r"coverage", re.IGNORECASE)


def _parts(path: str) -> list[str]:
    return path.split("/")


def _skipped(path: str) -> bool:
    return any(p in _SKIPPED_DIRS for p in _parts(path)[:-1])


def whole_file_why(path: str, runners: frozenset[str]) -> str | None:
    """Why a file at `path` judges the work (whole file), or None."""
    if _skipped(path):
        return None
    parts = _parts(path)
    name = parts[-1]
    dirs = set(parts[:-1])
    if PYTHON in runners:
        if name in _PY_CONFIG:
            return _PY_CONFIG[name]
        if name.endswith(".py") and _PY_TEST.match(name):
            return "test file (pytest / unittest naming)"
        if name.endswith(".py") and dirs & _TEST_DIRS:
            return "test helper in a test folder"
    if NODE in runners:
        if _NODE_CONFIG.match(name):
            return "test runner configuration"
        if _NODE_TEST.search(name):
            return "test file (*.test.* / *.spec.*)"
        if _SNAPSHOT_DIR in dirs or name.endswith(".snap"):
            return "jest snapshot (the expected values)"
        if dirs & _TEST_DIRS and _NODE_SOURCE.search(name):
            return "test file (test folder)"
    if GO in runners:
        if name.endswith("_test.go"):
            return "Go test file"
        if "testdata" in dirs:
            return "Go test data"
    if CARGO in runners and parts[0] == "tests" and name.endswith(".rs"):
        return "cargo integration test"
    return None


# modules `python -m pytest` / `-m unittest` would import from the checkout
# before the installed ones (the current folder comes first on sys.path): the
# runners, what they import, and the standard library
_RUNNER_MODULES = {
    "pytest",
    "_pytest",
    "pluggy",
    "unittest",
    "py",
    "iniconfig",
    "xdist",
    "packaging",
    "exceptiongroup",
    "tomli",
    "colorama",
    "pygments",
    *sys.stdlib_module_names,
}


def judge_like_added(path: str) -> str | None:
    """A file the agent added that changes how the checks judge (never an
    addition to the exam): test configuration, a module that shadows the
    test runner, a committed `node_modules`; not a test."""
    parts = _parts(path)
    top = parts[0].removesuffix(".py")
    # `X.py` or `X/__init__.py` at the top shadows an installed X (a folder
    # without `__init__.py` does not: a regular module found later wins)
    module = (len(parts) == 1 and parts[0].endswith(".py")) or parts[1:] == ["__init__.py"]
    if module and top in _RUNNER_MODULES and top not in ("test", "tests"):
        return "shadows the test runner"
    if "node_modules" in parts[:-1]:
        return "installed modules (node_modules)"
    if _skipped(path):
        return None
    name = parts[-1]
    if name in _PY_CONFIG and name != "noxfile.py":
        return _PY_CONFIG[name]
    if _NODE_CONFIG.match(name):
        return "test runner configuration"
    return None


def sections_in(path: str, text: str) -> list[str]:
    """The judged sections a section-level file holds (empty: none)."""
    name = _parts(path)[-1]
    if name == "pyproject.toml":
        data = _toml(text)
        tool = data.get("tool") if isinstance(data, dict) else None
        return [_TOML_SECTION] if isinstance(tool, dict) and "pytest" in tool else []
    if name == "setup.cfg":
        return [_CFG_SECTION] if re.search(r"^\s*\[tool:pytest\]", text, re.M) else []
    if name == "package.json":
        data = _json(text)
        return [k for k in _JSON_SECTIONS if isinstance(data, dict) and k in data]
    return []


def _section_file(path: str) -> bool:
    return _parts(path)[-1] in ("pyproject.toml", "setup.cfg", "package.json")


def _judged_section_file(path: str, runners: frozenset[str]) -> bool:
    """A section-level file the checks' runners read: pytest's wherever it is
    (pytest looks for its configuration from the tests' folder up), the root
    `package.json` (`npm test` reads that one)."""
    if not _section_file(path):
        return False
    if path.endswith("package.json"):
        return NODE in runners and "/" not in path
    return PYTHON in runners


def _toml(text: str) -> Any:
    try:
        return tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError):
        return None


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


# -- discovery ------------------------------------------------------------------------------


def tree_entries(repo: Path, rev: str) -> dict[str, Entry]:
    """Every blob of `rev` (submodules left out): path → (mode, id)."""
    out = git(repo, *_QUOTED, "ls-tree", "-r", "--full-tree", rev, timeout=300)
    found: dict[str, Entry] = {}
    for line in out.splitlines():
        meta, _, name = line.partition("\t")
        mode, kind, sha = meta.split(" ")
        if kind == "blob":
            found[unquote(name)] = (mode, sha)
    return found


def _blob_text(repo: Path, sha: str) -> str:
    return git(repo, "cat-file", "blob", sha, timeout=120)


_INTERPRETER = re.compile(
    r"^(ba|z|da|k)?sh$|^python[\d.]*$|^pypy[\d.]*$|^node$|^ruby$|^perl$|^tsx$|^ts-node$|^bun$"
)
_SEPARATOR = re.compile(r"^(;|&&|\|\||\||&)$")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def _segments(command: str) -> list[list[str]]:
    """The simple commands of a shell line, as words (assignments before them dropped)."""
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        lexer.commenters = "#"
        words = list(lexer)
    except ValueError:
        words = command.split()
    segments: list[list[str]] = [[]]
    for word in words:
        if _SEPARATOR.match(word) or word == "\n":
            segments.append([])
        elif segments[-1] or not _ASSIGNMENT.match(word):
            segments[-1].append(word)
    return [s for s in segments if s]


def _in_tree(word: str, tree: dict[str, Entry]) -> str | None:
    candidate = posixpath.normpath(word).removeprefix("./")
    return candidate if candidate in tree else None


def _command_paths(command: str, tree: dict[str, Entry]) -> list[str]:
    """Files of the tree a command runs (`./scripts/test.sh`, `bash ci/run.sh`,
    `python tools/x.py`, the Makefile of `make` / `make -C sub`, what a node
    test runner's arguments load: `mocha --require support/setup.js`); a
    file it only reads (`grep x data.txt`) is not named."""
    found: list[str] = []
    for words in _segments(command):
        first = _in_tree(words[0], tree)
        if first is not None:
            found.append(first)
        if _NODE_RUNNER.match(_runner_name(words)):
            found += _runner_arguments(words, tree)
        for i, word in enumerate(words):
            name = posixpath.basename(word)
            if _INTERPRETER.match(name):
                rest = words[i + 1 :]
                for arg in rest:
                    if arg in ("-c", "-m", "-e", "--eval", "-p"):
                        break  # code or a module follows, not a file
                    if arg.startswith("-"):
                        continue
                    script = _in_tree(arg, tree)
                    if script is not None:
                        found.append(script)
                    break
            if name == "make":
                where = ""
                makefile = None
                for j, arg in enumerate(words[i + 1 :], start=i + 1):
                    if arg == "-C" and j + 1 < len(words):
                        where = posixpath.normpath(words[j + 1]).removeprefix("./").rstrip("/")
                    if arg == "-f" and j + 1 < len(words):
                        makefile = _in_tree(words[j + 1], tree)
                if makefile is not None:
                    found.append(makefile)
                    continue
                for candidate in ("GNUmakefile", "makefile", "Makefile"):
                    path = f"{where}/{candidate}" if where and where != "." else candidate
                    if path in tree:
                        found.append(path)
                        break
    return found


_NODE_RUNNER = re.compile(r"^(jest|mocha|_mocha|tap|ava|vitest|nyc|c8|tape)$")
_LAUNCHERS = {"npx", "pnpx", "bunx"}  # `npx jest …`, `yarn jest …`, `pnpm exec jest …`


def _runner_name(words: list[str]) -> str:
    """The program a simple command runs, past a launcher (`npx jest` → `jest`)."""
    rest = list(words)
    while rest and (
        posixpath.basename(rest[0]) in _LAUNCHERS
        or rest[0] in ("yarn", "pnpm", "exec", "run")
        or (rest[0].startswith("-") and len(rest) > 1)
    ):
        rest = rest[1:]
    return posixpath.basename(rest[0]) if rest else ""


def _runner_arguments(words: list[str], tree: dict[str, Entry]) -> list[str]:
    """Files of the tree a node test runner's arguments name (`mocha --require
    support/setup.js`, `jest --setupFiles=./x.js`): what it loads judges."""
    found: list[str] = []
    for word in words[1:]:
        value = word.split("=", 1)[1] if word.startswith("-") and "=" in word else word
        path = _referenced(value, tree)
        if path is not None:
            found.append(path)
    return found


# a word in a runner's configuration that may name a file: `./jest.setup.js`,
# `<rootDir>/test/setup`, `support/patch.js` (no quotes, colons or spaces)
_CONFIG_WORD = re.compile(r"[\w@<>./-]*[./][\w@<>./-]*")
_MODULE_SUFFIXES = (".js", ".cjs", ".mjs", ".ts", ".cts", ".mts", ".json", "/index.js")


def _referenced(word: str, tree: dict[str, Entry]) -> str | None:
    """The tree file a configuration value names, as node's resolution would
    find it (a module path may leave out `.js`); None when it names none."""
    relative = word.startswith(("./", "<rootDir>/"))
    word = word.removeprefix("<rootDir>/")
    if not word or word.startswith("/") or "*" in word:
        return None
    path = posixpath.normpath(word).removeprefix("./")
    if path.startswith("..") or path == "." or _section_file(path):
        return None
    if path in tree:
        return path
    if relative or "/" in path:
        for suffix in _MODULE_SUFFIXES:
            if path + suffix in tree:
                return path + suffix
    return None


def config_references(text: str, tree: dict[str, Entry]) -> list[str]:
    """The tree files a test runner's configuration names: the setup files,
    reporters, environments, transforms and `require`s it loads into the
    run (jest's `setupFilesAfterEnv`, `.mocharc`'s `require`, `.taprc`'s
    `before`). Read as text (a config may be code; the caller leaves out
    coverage settings, which name the code under test): any other source file
    it names judges too, and the operator can take it out at gate 1."""
    found: list[str] = []
    for word in _CONFIG_WORD.findall(text[:MAX_OUTPUT_BYTES]):
        path = _referenced(word, tree)
        if path is not None and path not in found:
            found.append(path)
    return found


def _report_modules(baseline: list[CheckResult], tree: dict[str, Entry]) -> dict[str, str]:
    """Test files the untouched tree's per-test reports name (pytest's
    `tests.test_mul::test_x`, unittest's `tests.test_mul.TestK`): path → check."""
    found: dict[str, str] = {}
    for result in baseline:
        report = result.tests
        if report is None:
            continue
        for test_id in [*report.passed, *report.failed, *report.skipped]:
            head = test_id.split("::")[0]
            if head.endswith(".py") and head in tree:
                found.setdefault(head, result.name)
                continue
            parts = head.split(".")
            for n in range(len(parts), 0, -1):
                path = "/".join(parts[:n]) + ".py"
                if path in tree:
                    found.setdefault(path, result.name)
                    break
    return found


def discover(
    repo: Path, commit: str, contract: OutcomeContract, baseline: list[CheckResult]
) -> list[JudgeFile]:
    """The files that judge `contract`'s checks at `commit`: the contract's
    own entries (the operator's additions) first, then what corral found,
    less what the operator took out (`not_judged`), each with its blob."""
    tree = tree_entries(repo, commit)
    runners = runners_of(c.command for c in contract.checks)
    found: dict[tuple[str, str | None], JudgeFile] = {}

    def add(path: str, why: str, section: str | None = None) -> None:
        key = (path, section)
        if key not in found:
            entry = tree.get(path)
            found[key] = JudgeFile(
                path=path, blob=entry[1] if entry else None, section=section, why=why
            )

    for given in contract.judge_files:
        add(given.path, given.why or "named by the operator", given.section)
    for path in sorted(tree):
        why = whole_file_why(path, runners)
        if why is not None:
            add(path, why)
    for path, reporter in _report_modules(baseline, tree).items():
        add(path, f"test file the check {reporter} reported on")
    for check in contract.checks:
        for path in _command_paths(check.command, tree):
            if not _section_file(path):
                add(path, f"run by the check {check.name}")
    for path in sorted(p for p in tree if _section_file(p) and not _skipped(p)):
        name = _parts(path)[-1]
        if name == "package.json" and (NODE not in runners or "/" in path):
            continue
        if name != "package.json" and PYTHON not in runners:
            continue
        text = _blob_text(repo, tree[path][1])
        for section in sections_in(path, text):
            add(path, f"test configuration ({section})", section)
            if section == "scripts":  # a script an npm script runs judges too
                scripts = (_json(text) or {}).get("scripts") or {}
                for value in scripts.values() if isinstance(scripts, dict) else []:
                    for named in _command_paths(str(value), tree):
                        if not _section_file(named):
                            add(named, "run by an npm script")
    # what the runners' configuration loads (a setup file that patches `expect`)
    for judged in list(found.values()):
        entry = tree.get(judged.path)
        name = _parts(judged.path)[-1]
        runner_section = judged.section in _RUNNER_SECTIONS
        if entry is None or not (_NODE_CONFIG.match(name) or runner_section):
            continue
        if judged.section in _COVERAGE_SECTIONS or _COVERAGE_CONFIG.match(name):
            continue  # a coverage tool's file lists name the code under test
        text = _blob_text(repo, entry[1])
        if runner_section:
            data = _json(text)
            settings: Any = data.get(judged.section) if isinstance(data, dict) else None
            if isinstance(settings, dict):
                settings = {k: v for k, v in settings.items() if not _COVERAGE.search(k)}
            text = json.dumps(settings)
        else:
            text = "\n".join(line for line in text.splitlines() if not _COVERAGE.search(line))
        for path in config_references(text, tree):
            if path != judged.path:
                add(path, f"loaded by the test runner configuration ({judged.path})")
    removed = [p.rstrip("/") for p in contract.not_judged if p.strip()]
    return [
        f
        for f in found.values()
        if not any(f.path == r or f.path.startswith(r + "/") for r in removed)
    ]


def judged_summary(files: list[JudgeFile], limit: int = 8) -> str:
    """`tests/test_mul.py, conftest.py, pyproject.toml [tool.pytest] and 4 more`."""
    names = [f.path + (f" [{f.section}]" if f.section else "") for f in files]
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


# -- splicing a section back --------------------------------------------------------------


def _toml_pytest(data: Any) -> Any:
    tool = data.get("tool") if isinstance(data, dict) else None
    return tool.get("pytest") if isinstance(tool, dict) else None


def _without_toml_pytest(data: Any) -> Any:
    if not isinstance(data, dict):
        return data
    out = dict(data)
    tool = out.get("tool")
    if isinstance(tool, dict):
        out["tool"] = {k: v for k, v in tool.items() if k != "pytest"}
        if not out["tool"]:
            out.pop("tool")
    return out


_TOML_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")


def _toml_blocks(text: str, keep: bool) -> list[str]:
    """The lines of `text` inside `[tool.pytest…]` tables (`keep`) or outside them."""
    lines = text.splitlines(keepends=True)
    inside = False
    out: list[str] = []
    for line in lines:
        m = _TOML_HEADER.match(line)
        if m:
            name = m.group(1).replace('"', "").replace(" ", "")
            inside = name == "tool.pytest" or name.startswith("tool.pytest.")
        if inside == keep:
            out.append(line)
    return out


def _splice_toml(old: str, new: str) -> str | None:
    """`new` with its `[tool.pytest…]` tables replaced by `old`'s; None
    when the pytest sections are already the same."""
    before, after = _toml(old), _toml(new)
    if after is not None and before is not None and _toml_pytest(before) == _toml_pytest(after):
        return None
    rest = "".join(_toml_blocks(new, keep=False))
    section = "".join(_toml_blocks(old, keep=True))
    spliced = rest + ("\n" if rest and not rest.endswith("\n") else "") + section
    check = _toml(spliced)
    if (
        check is not None
        and before is not None
        and after is not None
        and _toml_pytest(check) == _toml_pytest(before)
        and _without_toml_pytest(check) == _without_toml_pytest(after)
    ):
        return spliced
    return old  # cannot splice it and prove it: the whole file as it was


def _cfg_section(text: str) -> dict[str, str] | None:
    import configparser  # with the first setup.cfg judged, not in the idle console

    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read_string(text)
    except configparser.Error:
        return {"<unreadable>": text}
    return dict(parser[_CFG_SECTION]) if parser.has_section(_CFG_SECTION) else None


_INI_HEADER = re.compile(r"^\s*\[([^\]]*)\]")


def _ini_blocks(text: str, keep: bool) -> list[str]:
    inside = False
    out: list[str] = []
    for line in text.splitlines(keepends=True):
        m = _INI_HEADER.match(line)
        if m:
            inside = m.group(1).strip() == _CFG_SECTION
        if inside == keep:
            out.append(line)
    return out


def _splice_cfg(old: str, new: str) -> str | None:
    if _cfg_section(old) == _cfg_section(new):
        return None
    rest = "".join(_ini_blocks(new, keep=False))
    spliced = (
        rest + ("\n" if rest and not rest.endswith("\n") else "") + "".join(_ini_blocks(old, True))
    )
    return spliced if _cfg_section(spliced) == _cfg_section(old) else old


def _splice_json(old: str, new: str, keys: Iterable[str]) -> str | None:
    before, after = _json(old), _json(new)
    if not isinstance(after, dict):
        return old
    before = before if isinstance(before, dict) else {}
    keys = [k for k in keys]
    if all(before.get(k) == after.get(k) for k in keys):
        return None
    for key in keys:
        if key in before:
            after[key] = before[key]
        else:
            after.pop(key, None)
    return json.dumps(after, indent=2, ensure_ascii=False) + "\n"


def changed_in(path: str, old: str, new: str, sections: list[str]) -> list[str]:
    """Which of the judged `sections` the change touched (`package.json`'s
    keys one by one; a TOML or INI file has one judged section)."""
    if _parts(path)[-1] != "package.json":
        return sections
    before, after = _json(old), _json(new)
    before = before if isinstance(before, dict) else {}
    after = after if isinstance(after, dict) else {}
    return [k for k in sections if before.get(k) != after.get(k)] or sections


def splice(path: str, old: str, new: str, sections: Iterable[str]) -> str | None:
    """`new` with the judged `sections` as in `old` (None: they are the same)."""
    name = _parts(path)[-1]
    if name == "pyproject.toml":
        return _splice_toml(old, new)
    if name == "setup.cfg":
        return _splice_cfg(old, new)
    if name == "package.json":
        return _splice_json(old, new, sections or _JSON_SECTIONS)
    return None if old == new else old


# -- the harness scan ------------------------------------------------------------------------

# (pattern, what, where): "any" line; "code" outside test files only; "top" at
# module level only in a test file (a new test file patching pytest's reports
# at import reaches every test; inside a test function it is that test's own)
_HARNESS_PATTERNS: tuple[tuple[re.Pattern[str], str, str], ...] = (
    (re.compile(r"\b_pytest\b"), "pytest's internals (_pytest)", "top"),
    (
        re.compile(
            r"\bpytest_(runtest_\w+|collection_modifyitems|report_\w+|terminal_summary|"
            r"sessionfinish|collect_file|pycollect_\w+|configure|deselected)\b"
        ),
        "a pytest hook",
        "top",
    ),
    (re.compile(r"\bTestReport\b"), "pytest's TestReport", "top"),
    (
        re.compile(r"\bunittest\.result\b|\bTestResult\b|\bTextTestResult\b"),
        "unittest's results",
        "top",
    ),
    (re.compile(r"\bload_tests\b"), "unittest's load_tests", "any"),
    (re.compile(r"\bpytest11\b"), "a pytest plugin entry point", "any"),
    (
        re.compile(
            r"""sys\.modules\s*\[\s*['"](pytest|_pytest|unittest|time|datetime)['"]\s*\]\s*="""
        ),
        "replacing a module in sys.modules",
        "any",
    ),
    (
        re.compile(r"\bos\._exit\s*\("),
        "os._exit (ends the process before the runner reports)",
        "any",
    ),
    (
        re.compile(
            r"^(time\.(time|monotonic|perf_counter|sleep)|datetime\.(datetime|date)|"
            r"Date\.now|global(This)?\.Date)\s*=[^=]"
        ),
        "the clock patched",
        "any",
    ),
    (re.compile(r"^setattr\(\s*(time|datetime)\s*,"), "the clock patched", "any"),
    (
        re.compile(r"\bObject\.is\s*=[^=]|defineProperty\(\s*Object\s*,\s*['\"]is['\"]"),
        "Object.is replaced (jest's toBe compares with it)",
        "top",
    ),
    (
        re.compile(
            r"^(global(This)?\.)?expect\s*=[^=]|\bglobal(This)?\.expect\b.*=[^=]|"
            r"\bexpect\.(extend|addSnapshotSerializer)\s*\("
        ),
        "jest's expect patched",
        "code",
    ),
    (
        re.compile(
            r"\bassert(\.strict)?\.\w+\s*=[^=]|"
            r"""require\(\s*['"](node:)?assert(/strict)?['"]\s*\)(\.\w+)+\s*=[^=]"""
        ),
        "node's assert patched",
        "top",
    ),
    (
        re.compile(
            r"\.prototype\.(equal|strictEqual|deepEqual|same|ok|pass|fail|toBe|toEqual)\s*=[^=]"
        ),
        "an assertion method replaced",
        "top",
    ),
    (
        re.compile(r"\bModule\._load\s*=[^=]|\bModule\.prototype\.require\s*=[^=]"),
        "node's module loader patched",
        "top",
    ),
    (re.compile(r"\bfreeze_time\s*\(|\bfreezegun\b"), "the clock frozen", "code"),
)
_EQ_DEF = re.compile(r"^\s*def __(eq|ne)__\s*\(")
_CONSTANT_RETURN = re.compile(
    r"^\s*(?:def __(?:eq|ne)__\s*\([^)]*\)\s*(?:->\s*\w+\s*)?:)?\s*return (True|False)\s*$"
)
MAX_FINDINGS = 20
_JS_FILE = re.compile(r"\.[cm]?[jt]sx?$")
# mocha, jest, vitest, jasmine and node's runner run only the focused tests
# when one is: a new file's `it.only` can stand in for the named test
_FOCUS = re.compile(
    r"(?<![\w.$])(it|test|describe|context|suite|specify)\.only\s*\(|"
    r"(?<![\w.$])(fit|fdescribe|fcontext)\s*\("
)


def _added_lines(patch: str) -> dict[str, list[str]]:
    """Per path, the lines a `git diff -U0` adds. A file's `---`/`+++` names
    are read only in its header (before its first `@@`): an added line that
    reads `++ b/other` is a line, never a new file."""
    out: dict[str, list[str]] = {}
    path: str | None = None
    header = False
    for line in patch.splitlines():
        if line.startswith("diff --git "):
            header, path = True, None
            continue
        if header:
            if line.startswith("+++ "):
                target = line[4:].rstrip("\t")  # git ends a name holding a space with a tab
                path = None if target == "/dev/null" else unquote(target).removeprefix("b/")
            elif line.startswith("@@"):
                header = False
            continue
        if path is not None and line.startswith("+"):
            out.setdefault(path, []).append(line[1:])
    return out


def harness_findings(added: dict[str, list[str]]) -> list[JudgeChange]:
    """Added lines that reach into the test harness, one finding per path and kind."""
    findings: list[JudgeChange] = []
    for path, lines in sorted(added.items()):
        seen: set[str] = set()
        test_file = whole_file_why(path, ALL_RUNNERS) is not None
        for i, line in enumerate(lines):
            code = line.split("#", 1)[0] if path.endswith(".py") else line
            top = bool(code.strip()) and not code[0].isspace()
            plain = top and not re.match(r"^(from|import)\s|^@", code)
            for pattern, what, where in _HARNESS_PATTERNS:
                if test_file and (where == "code" or (where == "top" and not plain)):
                    continue
                if what not in seen and pattern.search(code):
                    seen.add(what)
                    findings.append(
                        JudgeChange(path=path, what=HARNESS, detail=f"{what}: {line.strip()[:80]}")
                    )
            if _EQ_DEF.match(code) and "__eq__ always" not in seen:
                body = [line, *lines[i + 1 : i + 3]]
                if any(_CONSTANT_RETURN.match(b) for b in body):
                    seen.add("__eq__ always")
                    findings.append(
                        JudgeChange(
                            path=path,
                            what=HARNESS,
                            detail=f"a comparison that returns a constant: {line.strip()[:80]}",
                        )
                    )
        if _JS_FILE.search(path) and any(_FOCUS.search(line) for line in lines):
            focus = next(line for line in lines if _FOCUS.search(line))
            findings.append(
                JudgeChange(
                    path=path,
                    what=HARNESS,
                    detail=f"runs only the tests it focuses (.only): {focus.strip()[:80]}",
                )
            )
        if len(findings) >= MAX_FINDINGS:
            break
    return findings[:MAX_FINDINGS]


# -- tests added to a test file ----------------------------------------------------------------

_PY_SPECIAL = re.compile(r"^(setup|teardown|setUp|tearDown)|^load_tests$|^pytest_")
_JS_RISKY = re.compile(
    r"\b(Object|Reflect|Proxy|process|global|globalThis|prototype|__proto__|defineProperty|"
    r"require\.cache|mock|stub|spy|sinon|jest|vi|eval|Function|Module)\b"
    r"|(?<![=!<>])=(?![=>])"
)
_JS_DECLARATION = re.compile(r"\b(?:var|let|const)\s+[A-Za-z_$][\w$]*\s*=(?![=>])")
_JS_FUNCTION_HEAD = re.compile(r"\bfunction\s*[\w$]*\s*$")


def _js_code_only(text: str) -> str | None:
    """`text` with its comments blanked and each string literal's content
    made `0`s (the same length, so positions hold), or None where a `/`
    that may start a regex or a template literal makes its structure
    uncertain."""
    out = list(text)
    state, i, n = "code", 0, len(text)
    while i < n:
        ch, nxt = text[i], text[i + 1 : i + 2]
        if state == "line":
            if ch == "\n":
                state = "code"
            else:
                out[i] = " "
        elif state == "block":
            out[i] = ch if ch == "\n" else " "
            if ch == "*" and nxt == "/":
                out[i + 1], state, i = " ", "code", i + 1
        elif state in ("'", '"'):
            if ch == "\\" and nxt:
                out[i] = out[i + 1] = "0"
                i += 1
            elif ch == state or ch == "\n":
                out[i], state = "0", "code"
            else:
                out[i] = "0"
        elif ch == "/" and nxt in ("/", "*"):
            out[i] = out[i + 1] = " "
            state, i = ("line" if nxt == "/" else "block"), i + 1
        elif ch in "/`":
            return None
        elif ch in "'\"":
            out[i], state = "0", ch
        i += 1
    return "".join(out)


def _js_function_body_opens(code: str, brace: int) -> bool:
    """Whether the `{` at `brace` opens a function's body: after `=>`, or
    after the parameter list of `function name(...)`."""
    before = code[:brace].rstrip()
    if before.endswith("=>"):
        return True
    if not before.endswith(")"):
        return False
    depth = 0
    for j in range(len(before) - 1, -1, -1):
        if before[j] == ")":
            depth += 1
        elif before[j] == "(":
            depth -= 1
            if depth == 0:
                return bool(_JS_FUNCTION_HEAD.search(before[:j]))
    return False


def _js_local_declarations_cleared(appended: str) -> str:
    """The appended text with the `=` of each `var|let|const NAME =` inside a
    function body blanked, so `_JS_RISKY` no longer takes a test's own local
    (`var xs = [1, 2]` in a tape or mocha callback) for an assignment that
    could reach the file's older tests: a function's local cannot; comments
    are left out and an `=` inside a string is none. Read with
    comments and strings blanked (`_js_code_only`); where the structure is
    uncertain (a regex, a template literal, a brace closing what the appended
    text did not open) nothing is cleared and every `=` stays risky."""
    code = _js_code_only(appended)
    if code is None:
        return appended
    # comments say nothing and an `=` inside a string assigns nothing (a
    # string's words, `process` or `mock`, stay risky as they were)
    out = [
        " " if c == " " or (c == "0" and a == "=") else a
        for c, a in zip(code, appended, strict=True)
    ]
    braces: list[bool] = []  # per open brace: whether it opens a function body
    for i, ch in enumerate(code):
        if ch == "{":
            braces.append(_js_function_body_opens(code, i))
        elif ch == "}":
            if not braces:
                return appended
            braces.pop()
        elif any(braces) and ch in "vlc" and (i == 0 or not re.match(r"[\w$]", code[i - 1])):
            declared = _JS_DECLARATION.match(code, i)
            if declared:
                out[declared.end() - 1] = " "
    return "".join(out)


def _py_names(tree: Any) -> set[str]:
    import ast

    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
    return names


def _is_main_guard(node: Any) -> bool:
    """`if __name__ == "__main__":` exactly, with no `else`: a block that runs
    only when the file is run as a script, never when a runner imports it.
    Any other test (`!=`, `or True`) could run at import and is no guard."""
    import ast

    if not isinstance(node, ast.If) or node.orelse:
        return False
    test = node.test
    if not (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.Eq)
        and len(test.comparators) == 1
    ):
        return False
    sides = [test.left, test.comparators[0]]
    names = [s.id for s in sides if isinstance(s, ast.Name)]
    texts = [s.value for s in sides if isinstance(s, ast.Constant)]
    return names == ["__name__"] and texts == ["__main__"]


def _py_runs_a_test(node: Any, tests: frozenset[str]) -> bool:
    """A bare call, with no arguments, of one of the file's own module-level
    `test…` functions: what a script-style test file's `__main__` block adds
    for a new test (pox's `test_utils()`); nothing else may be added there."""
    import ast

    if isinstance(node, ast.Pass):
        return True
    if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)):
        return False
    call = node.value
    return (
        isinstance(call.func, ast.Name)
        and call.func.id in tests
        and not call.args
        and not call.keywords
    )


def _py_module_tests(tree: Any) -> frozenset[str]:
    """The module-level `test…` functions a file defines."""
    import ast

    return frozenset(
        n.name
        for n in tree.body
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name.startswith("test")
    )


def _py_new_item_ok(
    node: Any, known: set[str], in_class: bool, tests: frozenset[str] = frozenset()
) -> bool:
    """A statement the change added: a new import, test function or class
    that runs nothing at import and nothing around the file's own tests
    (xunit setup, `load_tests`, fixtures, hooks) and redefines no name the
    file had. Inside an existing class only new `test…` methods count: any
    other name could override what the class inherits (`assertEqual`). At
    module level a new `__main__` guard counts when it only calls the file's
    own test functions (a script-style test file run by hand or by tox)."""
    import ast

    if isinstance(node, ast.Pass) or (
        isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    ):
        return True
    if not in_class and _is_main_guard(node):
        return all(_py_runs_a_test(item, tests) for item in node.body)
    if isinstance(node, ast.Import | ast.ImportFrom) and not in_class:
        return not any(
            a.name == "*" or (a.asname or a.name).split(".")[0] in known for a in node.names
        )
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef) + (() if in_class else (ast.ClassDef,))
    if not isinstance(node, kinds):
        return False
    if node.name in known or _PY_SPECIAL.search(node.name):
        return False
    if in_class and not node.name.startswith("test"):
        return False
    decorators = " ".join(ast.unparse(d) for d in node.decorator_list)
    if "fixture" in decorators or "autouse" in decorators:
        return False
    if isinstance(node, ast.ClassDef):
        for item in node.body:
            if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                if "fixture" in " ".join(ast.unparse(d) for d in item.decorator_list):
                    return False
                continue
            if isinstance(item, ast.Pass) or (
                isinstance(item, ast.Expr) and isinstance(item.value, ast.Constant)
            ):
                continue
            return False
    return True


def _class_head(node: Any) -> str:
    """A class statement without its body: name, bases, keywords, decorators."""
    import ast

    head = copy.copy(node)
    head.body = []
    return ast.dump(head)


def _py_same_or_extended(
    old: Any, new: Any, known: set[str], tests: frozenset[str] = frozenset()
) -> bool:
    """`new` is the statement `old` as it was, the same class (name, bases,
    decorators) with only new test methods among its old body, or the same
    `__main__` guard with only new calls of the file's test functions."""
    import ast

    if ast.dump(old) == ast.dump(new):
        return True
    if _is_main_guard(old) and _is_main_guard(new):
        i = 0
        for item in new.body:
            if i < len(old.body) and ast.dump(old.body[i]) == ast.dump(item):
                i += 1
            elif not _py_runs_a_test(item, tests):
                return False
        return i == len(old.body)
    if not (isinstance(old, ast.ClassDef) and isinstance(new, ast.ClassDef)):
        return False
    if _class_head(old) != _class_head(new):
        return False
    return _py_kept_in_order(old.body, new.body, known, in_class=True)


def _py_kept_in_order(
    before: list[Any],
    after: list[Any],
    known: set[str],
    *,
    in_class: bool,
    tests: frozenset[str] = frozenset(),
) -> bool:
    """Every old statement is still there, as it was and in its order, and
    every statement between them is a safe addition."""
    i = 0
    for node in after:
        if i < len(before) and _py_same_or_extended(before[i], node, known, tests):
            i += 1
            continue
        if not _py_new_item_ok(node, known, in_class, tests):
            return False
    return i == len(before)


def _py_extended_safe(old: str, new: str) -> bool:
    """Whether a Python test file only gained tests: new test functions or
    classes anywhere among its statements, new `test…` methods in its
    classes, new imports of new names, a `__main__` guard that only calls
    the file's test functions (new, or the old one with new calls); nothing
    it had changed or went."""
    import ast

    try:
        before, after = ast.parse(old), ast.parse(new)
    except (SyntaxError, ValueError):
        return False
    return _py_kept_in_order(
        before.body,
        after.body,
        _py_names(before),
        in_class=False,
        tests=_py_module_tests(after),
    )


def _extends(repo: Path, path: str, old: Entry, new: Entry) -> bool:
    """Whether the change only added tests to a test file (Python: new tests
    among its statements and classes, nothing old changed; others: appended
    after its old content) in a way that cannot reach the
    file's own tests; anything else is an edit."""
    name = _parts(path)[-1]
    if old[0] != new[0] or name in _PY_CONFIG or _NODE_CONFIG.match(name):
        return False
    before, after = _blob_text(repo, old[1]), _blob_text(repo, new[1])
    if after == before:
        return False
    if path.endswith(".py"):
        return _py_extended_safe(before, after)
    kept = before.rstrip()
    if not kept or not after.startswith(kept) or after == before:
        return False
    appended = after[len(kept) :]
    if not appended.startswith("\n"):
        return False  # the old last line goes on: that is an edit
    if re.search(r"\.[cm]?[jt]sx?$", path):
        return not _JS_RISKY.search(_js_local_declarations_cleared(appended))
    if path.endswith("_test.go"):
        return not re.search(r"\bfunc\s+(init|TestMain)\b", appended)
    return False


# -- the exam ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Exam:
    """The tree the checks decide on, and what the change did to how it is judged."""

    tree: str  # the delivered tree with the judge files as they were (the same id when untouched)
    changes: list[JudgeChange] = field(default_factory=list)

    @property
    def rewritten(self) -> bool:
        """Whether a judge file changed, so the exam is not the delivered tree."""
        return any(c.what != HARNESS for c in self.changes)

    @property
    def only_extended(self) -> bool:
        """Whether the change only appended tests to test files: both versions
        must pass, and no person is needed."""
        return bool(self.changes) and all(c.what == EXTENDED for c in self.changes)


def _holds_named(repo: Path, path: str, old: Entry | None, must_pass: list[str]) -> bool:
    """Whether the file at `path` (as it was) holds a test the contract names."""
    if not must_pass:
        return False
    for name in must_pass:
        head = name.split("::")[0]
        if head == path or head.replace(".", "/") + ".py" == path:
            return True
        if "::" not in name and path.endswith(".py"):
            module = path.removesuffix(".py").replace("/", ".")
            if name.startswith(module + ".") or name.startswith(module + "::"):
                return True
    if old is None:
        return False
    try:
        text = _blob_text(repo, old[1])
    except Exception as exc:
        log.info("reading the old test file %s failed, taken as not held: %s", old[1], exc)
        return False
    leaves = {re.split(r"::|\.| > ", n)[-1].strip() for n in must_pass}
    return any(leaf and re.search(rf"\b{re.escape(leaf)}\b", text) for leaf in leaves)


def _write_blob(repo: Path, text: str) -> str:
    return git(repo, "hash-object", "-w", "--stdin", input_text=text, timeout=120).strip()


def _scan(repo: Path, base: str, tree: str, judged: set[str]) -> list[JudgeChange]:
    patch = git(
        repo,
        *_QUOTED,
        "diff",
        "--no-color",
        "--no-ext-diff",
        "--no-textconv",
        "--no-renames",
        "-U0",
        base,
        tree,
        "--",
        timeout=300,
        check=False,
    )
    if len(patch) >= MAX_OUTPUT_BYTES:
        patch = patch[:MAX_OUTPUT_BYTES]
    added = {p: lines for p, lines in _added_lines(patch).items() if p not in judged}
    return harness_findings(added)


def build_exam(repo: Path, base: str, tree: str, contract: OutcomeContract) -> Exam:
    """The operator's exam for `tree` (a change made on `base`): every judge
    file as it is on `base`, a judge-like file the change added left out, a
    section-level file with only its section put back; plus what the change
    did to how it is judged (judge changes first, then harness findings)."""
    if not contract.judge_files:
        return Exam(tree)
    changes = changes_between(repo, base, tree)
    if not changes:
        return Exam(tree)
    must_pass = [n for c in contract.checks for n in c.must_pass]
    runners = runners_of(c.command for c in contract.checks)
    whole = {f.path for f in contract.judge_files if f.section is None}
    sectioned: dict[str, list[str]] = {}
    for f in contract.judge_files:
        if f.section is not None:
            sectioned.setdefault(f.path, []).append(f.section)
    put: dict[str, Entry | None] = {}  # path → its entry in the exam (None: left out)
    found: list[JudgeChange] = []
    extended: set[str] = set()  # test files the change only appended tests to
    changed = {c.path: c for c in changes}

    def note(c: Change, what: str, detail: str = "") -> None:
        holds = _holds_named(repo, c.path, c.old, must_pass)
        found.append(JudgeChange(path=c.path, what=what, holds_must_pass=holds, detail=detail))

    for c in changes:
        if c.path in whole:
            put[c.path] = c.old
            if c.old is not None and c.new is not None and _extends(repo, c.path, c.old, c.new):
                extended.add(c.path)
                note(c, EXTENDED, "tests added after the file's own; both versions run")
                continue
            note(c, "deleted" if c.new is None else "added" if c.old is None else "edited")
            continue
        if c.path in sectioned or _judged_section_file(c.path, runners):
            if c.new is None:
                if c.path in sectioned:
                    put[c.path] = c.old
                    note(c, "deleted")
                continue
            old_text = _blob_text(repo, c.old[1]) if c.old else ""
            new_text = _blob_text(repo, c.new[1])
            # the sections judged at gate 1 and any the change added (a `mocha`
            # key new in `package.json` is a runner configuration added)
            sections = sorted(
                {
                    *sectioned.get(c.path, []),
                    *sections_in(c.path, old_text),
                    *sections_in(c.path, new_text),
                }
            )
            if not sections:
                continue
            spliced = splice(c.path, old_text, new_text, sections)
            if spliced is None:
                continue
            mode = c.new[0] if c.new[0] in ("100644", "100755") else "100644"
            put[c.path] = (mode, _write_blob(repo, spliced)) if spliced else None
            changed_sections = changed_in(c.path, old_text, new_text, sections)
            note(c, "added" if c.old is None else "section changed", ", ".join(changed_sections))
            continue
        if c.old is None and (why := judge_like_added(c.path)) is not None:
            put[c.path] = None
            note(c, "added", why)
    # a judge file the change turned into a folder (or whose folder became a file)
    for path in list(put):
        for other in changed:
            if (other.startswith(path + "/") and changed[other].new is not None) or (
                path.startswith(other + "/") and changed[other].old is None
            ):
                put.setdefault(other, None)
    # scanned: what was appended to a test file, and a section-level file
    # outside its judged section (an entry point that installs a pytest plugin)
    judged = (whole | set(put)) - extended - set(sectioned)
    findings = _scan(repo, base, tree, judged)
    if not put:
        return Exam(tree, findings)
    with PrivateIndex(repo, seed_from_repo=False) as index:
        git(repo, "read-tree", tree, env=index.env, timeout=300)
        removals = [f"0 {'0' * 40}\t{quote(p)}\n" for p, e in put.items() if e is None]
        removals += [f"0 {'0' * 40}\t{quote(p)}\n" for p, e in put.items() if e is not None]
        additions = [f"{e[0]} {e[1]}\t{quote(p)}\n" for p, e in put.items() if e is not None]
        git(
            repo,
            "update-index",
            "--index-info",
            input_text="".join(removals + additions),
            env=index.env,
            timeout=300,
        )
        exam_tree = git(repo, "write-tree", env=index.env, timeout=300).strip()
    return Exam(exam_tree, [*found, *findings])


def judge_sentence(changes: list[JudgeChange], limit: int = 5) -> str:
    """`the work changed how it is judged: tests/test_mul.py (edited; holds a named test), …`."""
    rigged = [c for c in changes if c.what not in (HARNESS, EXTENDED)]
    harness = [c for c in changes if c.what == HARNESS]
    extended = [c for c in changes if c.what == EXTENDED]
    parts: list[str] = []
    if extended and not rigged and not harness:
        shown = ", ".join(c.path for c in extended[:limit])
        more = f" and {len(extended) - limit} more" if len(extended) > limit else ""
        parts.append(f"the work added tests to {shown}{more}")
    if rigged:
        shown = ", ".join(c.shown() for c in rigged[:limit])
        more = f" and {len(rigged) - limit} more" if len(rigged) > limit else ""
        parts.append(f"the work changed how it is judged: {shown}{more}")
    if harness:
        shown = ", ".join(c.shown() for c in harness[:limit])
        more = f" and {len(harness) - limit} more" if len(harness) > limit else ""
        parts.append(f"added code reaches into the test harness: {shown}{more}")
    return "; ".join(parts)
