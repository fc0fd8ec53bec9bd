"""The conventions lane: drafting a contract with no model, always available.

It reads the repository as it is on disk — build manifests, test layouts, CI
workflows, AGENTS.md/CLAUDE.md — and proposes the project's own test runners
as checks. It can only ever show that the existing suites still pass, never
that the asked-for behaviour exists, so every contract it drafts says so under
"Not verified by this contract:" and points the operator at `/check`.

The scanning helpers (`summarize_repo`, `project_context`, `ci_job_names`,
`available_tooling`) are also the grounding a model drafter puts in its prompt
(the same inputs, so both lanes see one repo). Everything here is blocking filesystem
work; `ConventionsDrafter` pushes it onto a thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shlex
import shutil
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from ..models import (
    DEFAULT_SETUP_TIMEOUT_SECS,
    MAX_CHECK_TIMEOUT_SECS,
    ContractCheck,
    OutcomeContract,
)
from .absent_servers import LeftOut, waiting_on_absent_servers
from .drafting import GIVE_CHECKS, DraftingError, DraftRequest, ReviseRequest
from .runner_era import conftest_hooks, older_pytest_step, pins_pytest
from .setup_draft import SetupProposal, propose_setup, tox_testenv
from .test_imports import install_missing_command, undeclared_imports

# ---------------------------------------------------------------------------
# Shared scanning rules

#: Directories never searched for manifests, instructions or runners.
SKIP_DIRS = frozenset({"target", "node_modules", "vendor", "build", "dist", ".git", "third_party"})

#: Build manifests in the seed's order, with the hint `summarize_repo` prints.
BUILD_MANIFESTS: tuple[tuple[str, str], ...] = (
    ("Cargo.toml", "Rust (cargo)"),
    ("package.json", "Node (npm)"),
    ("pyproject.toml", "Python (pyproject)"),
    ("go.mod", "Go"),
    ("Makefile", "make"),
    ("Package.swift", "Swift (SwiftPM)"),
)

#: The tools whose presence on PATH decides which runners can be proposed.
TOOLS: tuple[str, ...] = (
    *("python3", "pytest", "node", "npm", "pnpm", "yarn"),
    *("cargo", "go", "make", "tox", "nox"),
)

MAX_ENTRIES = 40
MAX_ENTRIES_BYTES = 2000
MAX_BUILD_SYSTEMS = 6
MAX_CONTEXT_FILES = 16
MAX_CONTEXT_FILE_BYTES = 8 * 1024
MAX_CONTEXT_TOTAL_BYTES = 24 * 1024
MAX_CONTEXT_DEPTH = 3
MAX_CI_JOBS = 64
MAX_CI_FILE_BYTES = 1024 * 1024
MAX_RUNNERS = 8
MAX_WALK_ENTRIES = 20_000
MAX_NAMED_FILES = 10

CONTEXT_FILES = ("AGENTS.md", "CLAUDE.md")
CONTEXT_RULE = (
    "Use these repository rules when proposing checks; they do not expand execution permissions."
)
TRUNCATED = "[truncated]"
NOT_VERIFIED_HEADING = "Not verified by this contract:"
REVISE_NEEDS_MODEL = (
    "free-text revision needs a model; configure one (see `corral doctor`) "
    "or use /check name command"
)

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _clean(text: str) -> str:
    """A name safe to put on one line of a prompt: undecodable bytes are
    replaced and every control character (newlines included) becomes a space."""
    text = text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return _CONTROL.sub(" ", text)


def _scandir(path: Path) -> list[os.DirEntry[str]]:
    """Entries of a directory sorted by name; unreadable means empty."""
    try:
        with os.scandir(path) as it:
            return sorted(it, key=lambda e: e.name)
    except OSError:
        return []


def _is_dir(entry: os.DirEntry[str], *, follow: bool = True) -> bool:
    try:
        return entry.is_dir(follow_symlinks=follow)
    except OSError:
        return False


def _skipped(name: str) -> bool:
    return name.startswith(".") or name in SKIP_DIRS


def _subdirs(root: Path) -> list[str]:
    """Project subdirectories one level down, sorted, skipping build output,
    vendored code, dot-dirs (none is the project's own code) and symlinks (which may leave the repo)."""
    return [e.name for e in _scandir(root) if not _skipped(e.name) and _is_dir(e, follow=False)]


def _read_text(path: Path, limit: int) -> str | None:
    """Up to `limit` bytes of a regular file as text, or None when unreadable."""
    try:
        if not path.is_file():
            return None
        with path.open("rb") as fh:
            data = fh.read(limit)
    except OSError:
        return None
    return data.decode("utf-8", "replace")


def _utf8_prefix(data: bytes, limit: int) -> str:
    """At most `limit` bytes of `data`, cut on a character boundary."""
    return data[:limit].decode("utf-8", "ignore")


# ---------------------------------------------------------------------------
# summarize_repo


def summarize_repo(root: Path) -> str:
    """Two lines of grounding: the top-level entries and the build systems.

    Entries are sorted, exclude `.git`, are limited to 40 and sanitised (a
    newline in a name becomes a space) and joined with ", " within 2000
    bytes, with a ", …" marker when cut. Build systems are looked for at the
    root and one level down (monorepos keep projects in subfolders).
    """
    names = [_clean(e.name) for e in _scandir(root) if e.name != ".git"]
    cut = len(names) > MAX_ENTRIES
    listing = ""
    for name in names[:MAX_ENTRIES]:
        candidate = f"{listing}, {name}" if listing else name
        if len(candidate.encode("utf-8")) > MAX_ENTRIES_BYTES:
            if not listing:  # one name alone is over the cap
                listing = _utf8_prefix(candidate.encode("utf-8"), MAX_ENTRIES_BYTES)
            cut = True
            break
        listing = candidate
    if cut:
        listing += ", …"

    found: list[str] = []
    for directory in ["", *_subdirs(root)]:
        base = root / directory if directory else root
        for manifest, hint in BUILD_MANIFESTS:
            if len(found) >= MAX_BUILD_SYSTEMS:
                break
            if (base / manifest).is_file():
                found.append(f"{hint} in {_clean(directory)}/" if directory else hint)
    systems = ", ".join(found) if found else "none recognized"
    return f"Top-level entries: {listing}\nBuild systems detected: {systems}"


# ---------------------------------------------------------------------------
# project_context


def _instruction_files(root: Path) -> list[Path]:
    """Root then nested AGENTS.md / CLAUDE.md (depth ≤ 3, breadth-first,
    sorted), never through a symlink leaving the repository, each target once."""
    try:
        real_root = root.resolve()
    except OSError:
        return []
    found: list[Path] = []
    seen: set[Path] = set()
    queue: list[tuple[Path, int]] = [(root, 0)]
    visited = 0
    while queue and len(found) < MAX_CONTEXT_FILES + 1:
        directory, depth = queue.pop(0)
        entries = _scandir(directory)
        visited += len(entries)
        for name in CONTEXT_FILES:
            path = directory / name
            try:
                target = path.resolve()
            except OSError:
                continue
            if not path.is_file() or target in seen or not target.is_relative_to(real_root):
                continue
            seen.add(target)
            found.append(path)
        if depth < MAX_CONTEXT_DEPTH and visited < MAX_WALK_ENTRIES:
            queue.extend(
                (directory / e.name, depth + 1)
                for e in entries
                if not _skipped(e.name) and _is_dir(e, follow=False)
            )
    return found


def project_context(root: Path) -> str:
    """The repository's own instructions (AGENTS.md / CLAUDE.md), each under
    a heading naming its path, then the rule that they grant no permissions.

    At most 16 files; each is capped at 8 KiB and all of them at 24 KiB, with
    a visible "[truncated]" marker wherever text was left out. Empty when the
    repository has none.
    """
    files = _instruction_files(root)
    if not files:
        return ""
    sections: list[str] = []
    budget = MAX_CONTEXT_TOTAL_BYTES
    for path in files[:MAX_CONTEXT_FILES]:
        rel = _clean(path.relative_to(root).as_posix())
        if budget <= 0:
            sections.append(f"{TRUNCATED} {rel} and any later instruction files were left out.")
            break
        try:
            with path.open("rb") as fh:
                data = fh.read(MAX_CONTEXT_FILE_BYTES + 1)
        except OSError:
            continue
        limit = min(MAX_CONTEXT_FILE_BYTES, budget)
        text = _utf8_prefix(data, limit).rstrip("\n")
        if len(data) > limit:
            text += f"\n{TRUNCATED}"
        budget -= min(len(data), limit)
        sections.append(f"## {rel}\n\n{text}")
    else:
        if len(files) > MAX_CONTEXT_FILES:
            sections.append(f"{TRUNCATED} more instruction files were left out.")
    return "\n\n".join(sections) + "\n\n" + CONTEXT_RULE


# ---------------------------------------------------------------------------
# ci_job_names

_YAML_KEY = re.compile(
    r"""^(?:"([^"]*)"|'([^']*)'|([^\s#'"?:{}\[\]&*!|>%@`-][^:#]*?))\s*:(?:\s+(.*))?$"""
)
_GITLAB_RESERVED = frozenset(
    [
        "after_script",
        "before_script",
        "cache",
        "default",
        "image",
        "include",
        "services",
        "spec",
        "stages",
        "types",
        "variables",
        "workflow",
    ]
)


def _yaml_key(text: str) -> tuple[str, str] | None:
    """`key: value` on one (already de-indented) line, or None."""
    m = _YAML_KEY.match(text.rstrip())
    if not m:
        return None
    key = next(g for g in m.groups()[:3] if g is not None).strip()
    return (key, m.group(4) or "") if key else None


def _yaml_scalar(value: str) -> str:
    """A one-line scalar without quotes or a trailing comment."""
    value = value.strip()
    if value[:1] in {'"', "'"}:
        end = value.find(value[0], 1)
        return value[1:end] if end > 0 else value[1:]
    return re.split(r"\s#", value, maxsplit=1)[0].strip()


def _content_lines(text: str) -> Iterator[tuple[int, str]]:
    """(indent, stripped text) of lines that are neither blank nor comments."""
    for raw in text.splitlines():
        stripped = raw.strip()
        if not stripped or stripped.startswith("#") or stripped in {"---", "..."}:
            continue
        yield len(raw) - len(raw.lstrip(" ")), stripped


def _github_jobs(text: str) -> list[str]:
    """Job names under a workflow's top-level `jobs:` (their `name:` if set)."""
    jobs: list[str] = []
    in_jobs = False
    job_indent: int | None = None
    child_indent: int | None = None
    current: int | None = None  # index in `jobs` of the job being read
    for indent, line in _content_lines(text):
        if indent == 0:
            in_jobs = re.fullmatch(r"jobs\s*:(\s+#.*)?", line) is not None
            job_indent = child_indent = current = None
            continue
        if not in_jobs:
            continue
        if job_indent is None:
            job_indent = indent
        if indent < job_indent:
            current = None  # malformed: shallower than the first job
            continue
        if indent == job_indent:
            key = _yaml_key(line)
            current = None if key is None else len(jobs)
            if key is not None:
                jobs.append(key[0])
            child_indent = None
            continue
        if child_indent is None:
            child_indent = indent
        if indent == child_indent and current is not None:
            key = _yaml_key(line)
            if key is not None and key[0] == "name":
                name = _yaml_scalar(key[1])
                if name and not name.startswith(("|", ">")):
                    jobs[current] = name
    return jobs


def _gitlab_jobs(text: str) -> list[str]:
    """Top-level keys of .gitlab-ci.yml that are jobs (not keywords or templates)."""
    jobs: list[str] = []
    for indent, line in _content_lines(text):
        if indent != 0:
            continue
        key = _yaml_key(line)
        if key is None:
            continue
        name, value = key[0], _yaml_scalar(key[1])
        if name.startswith(".") or name in _GITLAB_RESERVED:
            continue
        if value and not value.startswith(("&", "{")):
            continue  # a scalar setting, not a job mapping
        jobs.append(name)
    return jobs


def ci_job_names(root: Path) -> list[str]:
    """CI job names: keys under `jobs:` in .github/workflows/*.yml|*.yaml (or
    their `name:`), then .gitlab-ci.yml's top-level jobs. At most 64, each
    once. An indentation scan, not a YAML parser: a malformed file yields
    what it can and never raises."""
    sources: list[tuple[Path, bool]] = []
    workflows = root / ".github" / "workflows"
    sources += [
        (workflows / e.name, True)
        for e in _scandir(workflows)
        if e.name.endswith((".yml", ".yaml"))
    ]
    sources.append((root / ".gitlab-ci.yml", False))
    names: list[str] = []
    for path, github in sources:
        text = _read_text(path, MAX_CI_FILE_BYTES)
        if text is None:
            continue
        try:
            found = _github_jobs(text) if github else _gitlab_jobs(text)
        except (ValueError, IndexError, StopIteration):  # defensive: never fail a draft
            continue
        for name in found:
            name = _clean(name).strip()[:120]
            if name and name not in names:
                names.append(name)
            if len(names) >= MAX_CI_JOBS:
                return names
    return names


# ---------------------------------------------------------------------------
# CI jobs that matter, and the steps that can run here

#: Jobs that publish, label, deploy or tidy: no contract could or should run them.
_CI_IGNORED = re.compile(
    r"releas|publish|deploy|label|stale|dependabot|renovate|pages|triage|greet|welcome|"
    r"backport|changelog|\block\b|merge|upload|pypi|npmjs|sponsor|milestone|assign|notify|"
    r"announce|\btag|codeql|scorecard|close|comment|sync|update",
    re.I,
)
#: What a job that verifies the code is called or runs.
_CI_MATTERS = re.compile(
    r"test|lint|check|type|mypy|pyright|build|\bci\b|tox|nox|ruff|flake8|eslint|compile|"
    r"coverage|format|style|clippy|vet|unit|integration|e2e|pre-commit",
    re.I,
)
#: `run:` commands that work offline in the setup's environment, by first words.
_RUNNABLE = re.compile(
    r"^(?:python3? -m )?(pytest|ruff|mypy|pyright|flake8|black|isort|pylint)\b"
    r"|^(npm|pnpm|yarn) (?:run )?(test|lint|build|typecheck|check)\b"
    r"|^(cargo) (test|clippy|fmt --check|build)\b"
    r"|^(go) (test|vet|build)\b"
)


@dataclass(frozen=True)
class CiJob:
    """A CI job: its name, whether it verifies the code, and its plain `run:` steps."""

    name: str
    matters: bool
    runs: tuple[str, ...] = ()

    def runnable(self) -> list[tuple[str, str]]:
        """(tool, command) of the steps a check could run here: one line, no
        CI expressions, starting with a test, lint, type-check or build tool."""
        out: list[tuple[str, str]] = []
        for command in self.runs:
            if "${{" in command or "\n" in command.strip():
                continue
            m = _RUNNABLE.match(command.strip())
            if m:
                tool = next(g for g in m.groups() if g)
                out.append((tool, command.strip()))
        return out


def _steps_runs(lines: list[tuple[int, str]]) -> list[str]:
    """The `run:` commands among a job's lines (block scalars joined by newlines)."""
    runs: list[str] = []
    i = 0
    while i < len(lines):
        indent, line = lines[i]
        text = line[2:].lstrip() if line.startswith("- ") else line
        key = _yaml_key(text)
        i += 1
        if key is None or key[0] != "run":
            continue
        value = key[1].strip()
        if value[:1] in {"|", ">"}:
            block: list[str] = []
            while i < len(lines) and lines[i][0] > indent:
                block.append(lines[i][1])
                i += 1
            runs.append("\n".join(block))
        elif value:
            runs.append(_yaml_scalar(value))
    return runs


def _github_job_details(text: str, workflow: str) -> list[CiJob]:
    jobs: list[CiJob] = []
    lines = list(_content_lines(text))
    in_jobs = False
    job_indent: int | None = None
    current: tuple[str, list[tuple[int, str]]] | None = None
    found: list[tuple[str, list[tuple[int, str]]]] = []
    for indent, line in lines:
        if indent == 0:
            in_jobs = re.fullmatch(r"jobs\s*:(\s+#.*)?", line) is not None
            job_indent = None
            current = None
            continue
        if not in_jobs:
            continue
        if job_indent is None:
            job_indent = indent
        if indent == job_indent:
            job_key = _yaml_key(line)
            current = (job_key[0], []) if job_key is not None else None
            if current is not None:
                found.append(current)
            continue
        if current is not None and indent > job_indent:
            current[1].append((indent, line))
    for key, body in found:
        name: str = key
        child = min((i for i, _ in body), default=0)
        for indent, line in body:
            kv = _yaml_key(line)
            if indent == child and kv is not None and kv[0] == "name":
                scalar = _yaml_scalar(kv[1])
                if scalar and not scalar.startswith(("|", ">")):
                    name = scalar
        runs = tuple(_steps_runs(body))
        label = f"{workflow} {key} {name}"
        matters = not _CI_IGNORED.search(label) and (
            bool(_CI_MATTERS.search(label)) or any(_RUNNABLE.match(r.strip()) for r in runs)
        )
        jobs.append(CiJob(name=_clean(name).strip()[:120], matters=matters, runs=runs))
    return jobs


def ci_jobs(root: Path) -> list[CiJob]:
    """GitHub workflow jobs with their purpose and `run:` steps, then GitLab
    jobs by name (at most 64). A release/publish/label/deploy/stale-bot job
    does not matter; one that tests, lints, type-checks or builds does."""
    out: list[CiJob] = []
    workflows = root / ".github" / "workflows"
    for e in _scandir(workflows):
        if not e.name.endswith((".yml", ".yaml")):
            continue
        text = _read_text(workflows / e.name, MAX_CI_FILE_BYTES)
        if text is None:
            continue
        try:
            out += _github_job_details(text, e.name)
        except (ValueError, IndexError, StopIteration):  # defensive: never fail a draft
            continue
    text = _read_text(root / ".gitlab-ci.yml", MAX_CI_FILE_BYTES)
    if text is not None:
        for name in _gitlab_jobs(text):
            ignored = _CI_IGNORED.search(name)
            out.append(CiJob(name=_clean(name)[:120], matters=not ignored))
    unique: dict[str, CiJob] = {}
    for job in out:
        if job.name and job.name not in unique:
            unique[job.name] = job
    return list(unique.values())[:MAX_CI_JOBS]


# ---------------------------------------------------------------------------
# Runners


def available_tooling(path: str | None = None) -> tuple[list[str], list[str]]:
    """Which of TOOLS resolve on PATH (or on `path`), and which do not."""
    available = [t for t in TOOLS if shutil.which(t, path=path)]
    return available, [t for t in TOOLS if t not in available]


@dataclass(frozen=True)
class Runner:
    """A test runner found on disk, as a check it would become.

    `tools` must all be on PATH for the runner to be proposed; `missing`
    names those that were not, and such a runner is only reported under
    "Not verified by this contract:".
    """

    name: str
    command: str
    why: str
    timeout_secs: int = 900
    tools: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    directory: str = ""
    kind: str = ""
    # what in it needs the network (`pip install …` in a make target's
    # recipe): checks run without one, so it is no required check beside
    # another runner, and is drafted with `network = true` when it is the only one
    network: str = ""
    # test files the check leaves out (`--ignore=`): they wait on a server
    # this machine lacks (contracts/absent_servers.py); said at gate 1
    left_out: tuple[LeftOut, ...] = ()

    @property
    def available(self) -> bool:
        return not self.missing


_PYTEST = "python3 -m pytest -q -p no:cacheprovider"
_PY_MANIFESTS = ("pyproject.toml", "setup.py", "setup.cfg", "pytest.ini", "tox.ini")
_NPM_DEFAULT_TEST = "no test specified"
_MAKE_TARGET = re.compile(r"^(test|check)\s*:(?!=)", re.MULTILINE)
_MAKE_RULE = re.compile(r"^([A-Za-z0-9_.\-]+(?:\s+[A-Za-z0-9_.\-]+)*)\s*::?(?!=)(.*)$")
_MAKE_CALL = re.compile(r"(?:\$\(MAKE\)|\bmake)\s+(?:-\S+\s+)*([A-Za-z0-9_.\-]+)")
#: Commands that fetch from the network: a check running them fails offline
#: (a check has no network), whatever the change.
_FETCHES = re.compile(
    r"\b(?:pip3?|python3?\s+-m\s+pip|uv\s+pip|pipx)\s+install\b|\buv\s+(?:sync|run)\b|"
    r"\b(?:poetry|pipenv|pdm)\s+(?:install|sync)\b|\bhatch\s+(?:run|env\s+create)\b|"
    r"\b(?:npm|pnpm|yarn)\s+(?:install|ci|i|add)\b|"
    r"\b(?:curl|wget)\s|\bgit\s+(?:clone|fetch|pull|submodule)\b|"
    r"\bgo\s+(?:get|install|mod\s+download)\b|\bcargo\s+install\b|"
    r"\bdocker(?:-compose)?\s|\btox\b|\bnox\b"
)


def make_recipes(text: str) -> dict[str, list[str]]:
    """Each target's recipe lines in a Makefile, and its prerequisites as
    `$<name>` entries (read, never run: variables stay unexpanded)."""
    recipes: dict[str, list[str]] = {}
    current: list[list[str]] = []
    for line in text.splitlines():
        if line.startswith("\t"):
            for recipe in current:
                recipe.append(line.strip())
            continue
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        rule = _MAKE_RULE.match(line)
        if rule is None:
            current = []
            continue
        prerequisites = rule.group(2).split(";", 1)[0].split()
        current = []
        for target in rule.group(1).split():
            recipe = recipes.setdefault(target, [])
            recipe += [f"${p}" for p in prerequisites if not p.startswith("$")]
            current.append(recipe)
    return recipes


def make_target_fetches(text: str, target: str) -> str:
    """The first recipe line that fetches from the network among what
    `make target` runs (its recipe, its prerequisites' and the targets it
    calls with `$(MAKE)`), or "" when nothing does."""
    recipes = make_recipes(text)
    seen: set[str] = set()
    todo = [target]
    while todo and len(seen) < 32:
        name = todo.pop(0)
        if name in seen:
            continue
        seen.add(name)
        for line in recipes.get(name, []):
            if line.startswith("$") and not line.startswith("$("):
                todo.append(line[1:])
                continue
            if _FETCHES.search(line):
                return line.lstrip("@-+ ")[:120]
            todo += _MAKE_CALL.findall(line)
    return ""


def _pytest_config(base: Path) -> str | None:
    """Why this directory is a pytest project, from its configuration."""
    text = _read_text(base / "pyproject.toml", MAX_CI_FILE_BYTES)
    if text is not None:
        try:
            tool = tomllib.loads(text).get("tool", {})
            if isinstance(tool, dict) and "pytest" in tool:
                return "pyproject.toml configures pytest"
        except tomllib.TOMLDecodeError:
            if "[tool.pytest" in text:
                return "pyproject.toml configures pytest"
    if (base / "pytest.ini").is_file():
        return "pytest.ini"
    for name, section in (("setup.cfg", "[tool:pytest]"), ("tox.ini", "[pytest]")):
        text = _read_text(base / name, MAX_CI_FILE_BYTES)
        if text is not None and section in text:
            return f"{name} has {section}"
    for conftest in ("conftest.py", "tests/conftest.py"):
        if (base / conftest).is_file():
            return conftest
    return None


_TEST_FILE = re.compile(r"test.*\.py|.*_test\.py")
_PYTEST_FILE = re.compile(r"test_.*\.py|.*_test\.py")  # what pytest collects by default
TEST_DIRS = ("tests", "test")


def _test_places(base: Path) -> list[str]:
    """Where tests may live, relative to `base`: tests/ and test/, then a
    package's own tests/ or test/ (`pkg/tests`, `src/pkg/tests`) and its
    `tests.py` module."""
    places = [*TEST_DIRS, *(f"src/{name}" for name in TEST_DIRS)]  # src/tests: a src layout's
    for parent in ("", "src"):
        for e in _scandir(base / parent if parent else base):
            if _skipped(e.name) or not _is_dir(e, follow=False) or e.name in TEST_DIRS:
                continue
            package = f"{parent}/{e.name}" if parent else e.name
            if not (base / package / "__init__.py").is_file():
                continue
            places += [f"{package}/{name}" for name in TEST_DIRS]
            if (base / package / "tests.py").is_file():
                places.append(f"{package}/tests.py")
    return places


def _test_files(base: Path) -> list[Path]:
    """Test modules (test*.py, *_test.py) in the places tests live (one level
    of subpackages too), or at the root (a flat layout's single test module)."""
    found: list[Path] = []
    for place in _test_places(base):
        where = base / place
        if where.is_file():
            found.append(where)
            continue
        for e in _scandir(where):
            if _TEST_FILE.fullmatch(e.name):
                found.append(where / e.name)
            elif _is_dir(e, follow=False) and not _skipped(e.name):
                found += _nested_test_files(where / e.name, depth=3)
        if len(found) >= 50:
            break
    found += [
        base / e.name
        for e in _scandir(base)
        if re.fullmatch(r"(test_.*|.*_test|tests)\.py", e.name)
    ]
    return found[:50]


def _nested_test_files(where: Path, depth: int) -> list[Path]:
    """test_*.py / *_test.py files in a test directory's subpackages, `depth`
    levels down (smdebug-rulesconfig keeps its tests in tests/core/actions/),
    never following links; at most 50."""
    found: list[Path] = []
    for e in _scandir(where):
        if _PYTEST_FILE.fullmatch(e.name):
            found.append(where / e.name)
        elif depth > 1 and _is_dir(e, follow=False) and not _skipped(e.name):
            found += _nested_test_files(where / e.name, depth - 1)
        if len(found) >= 50:
            break
    return found[:50]


def _tests_dir(files: list[Path], base: Path) -> str | None:
    """The place the first test modules are in (tests/, test/, pkg/tests, …), if any."""
    for place in _test_places(base):
        if any(f == base / place or f.is_relative_to(base / place) for f in files):
            return place
    return None


def _tox_runner(base: Path) -> Runner | None:
    """tox.ini's own test commands, run in the setup's environment."""
    tox = tox_testenv(base)
    if tox is not None and not tox.commands and tox.script and not _test_files(base):
        # a script of the project's own runs the tests and pytest would
        # collect none: the script is the check, judged by its exit code
        command = (
            f"cd {shlex.quote(tox.changedir)} && {tox.script}" if tox.changedir else tox.script
        )
        why = "tox.ini [testenv]'s last command (a script of its own), in the setup's environment"
        return Runner("tests", command, why, 1800, ("python3",), kind="python")
    if tox is None or not tox.commands:
        return None
    command = tox.check_command()
    why = "tox.ini [testenv] commands, in the setup's environment"
    return Runner("tests", command, why, 1800, ("python3",), kind="python")


_NOX_RUN = re.compile(r"session\.run\(\s*((?:[\"'][^\"'\n]*[\"']\s*,?\s*)+)\)")


def _nox_runner(base: Path) -> Runner | None:
    """A noxfile session's `session.run("pytest", ...)` with literal arguments."""
    text = _read_text(base / "noxfile.py", MAX_CI_FILE_BYTES)
    if text is None:
        return None
    for m in _NOX_RUN.finditer(text):
        words = re.findall(r"[\"']([^\"'\n]*)[\"']", m.group(1))
        if words and words[0] in ("pytest", "python") and "pytest" in " ".join(words[:3]):
            command = " ".join(shlex.quote(w) for w in words)
            return Runner("tests", command, "noxfile.py runs it", 1800, ("python3",), kind="python")
    return None


_TEST_SUITE = re.compile(r"""test_suite\s*=\s*['"]?([A-Za-z_][\w.]*)""")
_DECLARES_PYTEST = re.compile(
    r"""(tests_require|setup_requires)\s*=[^\]\n]*(pytest)|^\s*test\s*=\s*pytest""", re.M
)


def _setup_test_settings(base: Path) -> tuple[str | None, str | None]:
    """(why setup.py/setup.cfg say pytest runs the tests, the test suite's
    directory they name), each None when they say nothing."""
    why: str | None = None
    suite: str | None = None
    for name in ("setup.cfg", "setup.py"):
        text = _read_text(base / name, MAX_CI_FILE_BYTES)
        if text is None:
            continue
        if why is None and _DECLARES_PYTEST.search(text):
            why = f"{name} declares pytest for its tests"
        m = _TEST_SUITE.search(text)
        if suite is None and m:
            rel = m.group(1).replace(".", "/")
            if (base / rel).is_dir() and not _CONTROL.search(rel):
                suite = rel
    return why, suite


def _python_runners(base: Path, available: set[str], path: str | None = None) -> list[Runner]:
    return [_without_absent_servers(base, r, path) for r in _python_runners_found(base, available)]


def _without_absent_servers(base: Path, runner: Runner, path: str | None) -> Runner:
    """A drafted pytest check that leaves out the test files waiting on a
    server this machine lacks, noticed before anything runs (cachelib's
    mongod, redis-server and local DynamoDB tests each waited out a client
    timeout: the suite ran past its limit on the untouched tree)."""
    if not runner.command.startswith(_PYTEST):
        return runner
    files = _test_files(base)
    left = waiting_on_absent_servers(
        base,
        files,
        _conftests(base, files),
        on_path=lambda program: shutil.which(program, path=path) is not None,
    )
    if not left:
        return runner
    ignores = " ".join(shlex.quote(f"--ignore={f.path}") for f in left)
    return replace(runner, command=f"{runner.command} {ignores}", left_out=tuple(left))


def _python_runners_found(base: Path, available: set[str]) -> list[Runner]:
    own = _tox_runner(base) or _nox_runner(base)
    if own is not None and "python3" in available:
        return [own]  # the runner the maintainers use, as they run it
    why = _pytest_config(base)
    setup_why, suite = _setup_test_settings(base)
    if suite is not None and why is None:  # the suite setup.py/setup.cfg name
        reason = setup_why or f"setup's test_suite is {suite}"
        command = f"{_PYTEST} {shlex.quote(suite)}"
        return [Runner("tests", command, reason, 900, ("python3", "pytest"), kind="python")]
    why = why or (setup_why if _test_files(base) else None)
    if why is not None:
        return [Runner("tests", _PYTEST, why, 900, ("python3", "pytest"), kind="python")]
    files = _test_files(base)
    if not files:
        return []
    folder = _tests_dir(files, base)
    in_folder = [f for f in files if folder and f.is_relative_to(base / folder)]
    unittest_only = not any(_PYTEST_FILE.fullmatch(f.name) for f in in_folder)
    if folder and in_folder and unittest_only and not folder.endswith(".py"):
        # test*.py only: unittest's default pattern, not pytest's; a tests
        # package below the root (src/tests) is imported from its parent, as
        # a package (its test.py is never the standard library's `test`)
        top = str(Path(folder).parent)
        package = top != "." and (base / folder / "__init__.py").is_file()
        command = f"python3 -m unittest discover -s {shlex.quote(folder)}" + (
            f" -t {shlex.quote(top)} -v" if package else " -v"
        )
        why = f"{folder}/ holds test*.py modules pytest does not collect by default"
        return [Runner("unittest", command, why, 900, ("python3",), kind="python")]
    if "pytest" not in available:
        uses_unittest = any(
            re.search(r"^\s*(import unittest|from unittest\b)", _read_text(f, 65536) or "", re.M)
            for f in files
        )
        if uses_unittest:
            if folder is None or (base / folder / "__init__.py").is_file():
                command = "python3 -m unittest -v"
            else:
                command = f"python3 -m unittest discover -s {shlex.quote(folder)} -v"
            why = f"{folder or '.'}/ holds unittest test modules and nothing configures pytest"
            return [Runner("unittest", command, why, 900, ("python3",), kind="python")]
    why = f"{folder}/ holds test modules" if folder else "test modules at the root"
    command = _PYTEST if folder in (None, "tests") else f"{_PYTEST} {shlex.quote(folder)}"
    if folder is None and not all(_PYTEST_FILE.fullmatch(f.name) for f in files):
        # a root `tests.py` is no name pytest collects by default (jsonpointer):
        # run bare, pytest would collect nothing; named, pytest runs any file
        named = " ".join(shlex.quote(f.relative_to(base).as_posix()) for f in files)
        command = f"{_PYTEST} {named}"
        why = (
            f"test modules at the root, named (pytest collects only test_*.py by default): {named}"
        )
    return [Runner("tests", command, why, 900, ("python3", "pytest"), kind="python")]


_PLACEHOLDER_STEP = re.compile(r"(echo|printf)(\s.*)?|exit(\s+\d+)?|true|:|")


def is_placeholder_script(script: str) -> bool:
    """Whether a package.json test script runs no tests: empty, npm's
    "no test specified", or only `echo`/`exit`/`true` steps (a script that
    prints a URL where its tests would be)."""
    if not script.strip() or _NPM_DEFAULT_TEST in script:
        return True
    steps = re.split(r"&&|\|\||;", script)
    return all(_PLACEHOLDER_STEP.fullmatch(step.strip()) for step in steps)


# A project with no tests at all gets one check: the tests the work adds.
# Red until the work adds a passing test, never *cannot run* (the runner's
# "no tests" exit becomes a plain failure saying so).
NO_TESTS_YET = "[corral] the project has no tests yet: the work must add one"
_ADDED_PYTEST = f"{{pytest}}; s=$?; [ $s != 5 ] || {{{{ echo '{NO_TESTS_YET}'; s=1; }}}}; exit $s"
_ADDED_NODE_TESTS = (
    "set -o pipefail; node --test 2>&1 | awk '{print} /^# tests 0$/ {z=1} "
    f'END {{if (z) {{print "{NO_TESTS_YET}"; exit 1}}}}\''
)


def added_tests_runner(root: Path, *, python: bool, available: set[str]) -> Runner | None:
    """The check for a Python or Node project that has no tests: it runs the
    tests the work adds (pytest's or Node's own discovery)."""
    if python:
        command = _ADDED_PYTEST.format(pytest=_PYTEST)
        tools: tuple[str, ...] = ("python3", "pytest")
    elif (root / "package.json").is_file():
        command = _ADDED_NODE_TESTS
        tools = ("node",)
    else:
        return None
    why = "the project has no tests: this runs those the work adds, red until it adds one"
    runner = Runner("added_tests", command, why, 900, tools, kind="added")
    return replace(runner, missing=tuple(t for t in tools if t not in available))


#: Programs a test script may run that no package provides.
_SHELL_PROGRAMS = frozenset(
    {
        "node",
        "npm",
        "npx",
        "yarn",
        "pnpm",
        "corepack",
        "sh",
        "bash",
        "make",
        "cd",
        "echo",
        "exit",
        "true",
        "false",
        "env",
        "rm",
        "mkdir",
        "cp",
        "mv",
        "set",
        "export",
        "test",
        "[",
        "cat",
        "exec",
        "time",
        "sleep",
        "git",
        "python",
        "python3",
    }
)
#: A program's package, where the names differ.
_BIN_PACKAGE = {"tsc": "typescript", "lab": "@hapi/lab", "_mocha": "mocha", "ts-node": "ts-node"}
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=\S*")
#: Runners a test file names (`require('tape')`, `from 'node:test'`), and how each runs a directory.
_FILE_RUNNERS: tuple[tuple[str, re.Pattern[str], str], ...] = (
    ("node:test", re.compile(r"""(require\(|from\s+)['"]node:test['"]"""), "node --test {dir}"),
    ("tape", re.compile(r"""(require\(|from\s+)['"]tape['"]"""), "npx --no tape '{dir}/**/*.js'"),
    ("tap", re.compile(r"""(require\(|from\s+)['"]tap['"]"""), "npx --no tap '{dir}'"),
    ("ava", re.compile(r"""(require\(|from\s+)['"]ava['"]"""), "npx --no ava"),
    ("mocha", re.compile(r"^\s*(describe|it)\(", re.M), "npx --no mocha '{dir}'"),
)
_NODE_TEST_DIRS = ("test", "tests", "__tests__", "spec")


def _script_programs(script: str) -> list[str]:
    """The program each step of a package.json script runs (env assignments
    and `node_modules/.bin/` left off)."""
    programs: list[str] = []
    for step in re.split(r"&&|\|\||;|\|", script):
        words = [w for w in step.split() if not _ASSIGNMENT.fullmatch(w)]
        if words:
            programs.append(words[0].rsplit("node_modules/.bin/", 1)[-1])
    return programs


def _declared(manifest: object) -> set[str]:
    names: set[str] = set()
    if not isinstance(manifest, dict):
        return names
    for key in ("dependencies", "devDependencies", "optionalDependencies", "peerDependencies"):
        deps = manifest.get(key)
        if isinstance(deps, dict):
            names |= set(deps)
    return names


def _undeclared_program(
    base: Path, root: Path, manifest: dict[str, object], script: str
) -> str | None:
    """A program the test script runs that the project does not provide: not
    a dependency (of the package or of the workspace root), not in a
    node_modules/.bin, not on PATH (`expresso`). A manifest that declares no
    dependency at all says nothing either way."""
    declared = _declared(manifest)
    if not declared:
        return None
    if root != base:
        with contextlib.suppress(ValueError):
            declared |= _declared(json.loads(_read_text(root / "package.json", 1 << 20) or "{}"))
    for program in _script_programs(script):
        if program in _SHELL_PROGRAMS or "/" in program or program.startswith("$"):
            continue
        if _BIN_PACKAGE.get(program, program) in declared or program in declared:
            continue
        if any((where / "node_modules" / ".bin" / program).exists() for where in (base, root)):
            continue
        if shutil.which(program):
            continue
        return program
    return None


def _runner_the_tests_use(base: Path, manifest: dict[str, object]) -> tuple[str, str] | None:
    """(the runner the test files name, the command that runs them with it),
    for a runner the project declares (node's own needs none)."""
    declared: set[str] = set()
    for key in ("dependencies", "devDependencies"):
        deps = manifest.get(key)
        if isinstance(deps, dict):
            declared |= set(deps)
    for directory in _NODE_TEST_DIRS:
        files = [
            base / directory / e.name
            for e in _scandir(base / directory)
            if re.fullmatch(r"[\w.-]+\.(c|m)?js", e.name)
        ][:50]
        if not files:
            continue
        texts = [_read_text(f, 65536) or "" for f in files]
        for name, pattern, command in _FILE_RUNNERS:
            if name != "node:test" and name not in declared:
                continue
            if any(pattern.search(text) for text in texts):
                return name, command.format(dir=directory)
    return None


_AUDITS = re.compile(r"\baud\b|\bnpm\s+audit\b|\bnsp\s+check\b|\bsnyk\b|\bbetter-npm-audit\b")


def _fetching_hooks(scripts: dict[str, object]) -> list[str]:
    """The `pretest`/`posttest` scripts that reach the network (an audit, an install)."""
    return [
        hook
        for hook in ("pretest", "posttest")
        if isinstance(text := scripts.get(hook), str)
        and (_AUDITS.search(text) or _FETCHES.search(text))
    ]


def _node_runner(base: Path, root: Path) -> Runner | None:
    text = _read_text(base / "package.json", MAX_CI_FILE_BYTES)
    if text is None:
        return None
    try:
        manifest = json.loads(text)
        scripts = manifest.get("scripts")
    except (ValueError, AttributeError):
        return None
    test = scripts.get("test") if isinstance(scripts, dict) else None
    if not isinstance(test, str) or is_placeholder_script(test):
        return None
    manager = "npm"
    for where in (base, root):
        if (where / "pnpm-lock.yaml").is_file():
            manager = "pnpm"
            break
        if (where / "yarn.lock").is_file():
            manager = "yarn"
            break
        if (where / "package-lock.json").is_file():
            break
    why = f"package.json has a test script ({manager} by lockfile)"
    hooks = _fetching_hooks(scripts)
    if hooks and manager == "npm":
        # npm runs pretest/posttest around the tests; one that reaches the
        # network (an audit) fails offline whatever the change: left out
        why += f"; without its {' and '.join(hooks)} script, which needs the network"
        return Runner(
            "npm_test", "npm test --ignore-scripts", why, 900, ("node", "npm"), kind="node"
        )
    absent = _undeclared_program(base, root, manifest, test)
    if absent is not None:
        used = _runner_the_tests_use(base, manifest)
        said = f"package.json's test script runs {absent}, which the project does not declare"
        if used is None:  # nothing here can run them: said, never drafted
            why = f"{said}, and its test files name no runner corral knows"
            return Runner(
                f"{manager}_test",
                f"{manager} test",
                why,
                900,
                ("node", manager, absent),
                kind="node",
            )
        runner, command = used
        why = f"{said}: its test files use {runner}, which runs them instead"
        tools = ("node",) if command.startswith("node ") else ("node", "npm")
        return Runner("node_tests", command, why, 900, tools, kind="node")
    command = f"{manager} test"
    # npm hands what follows `--` to the script; pnpm would pass the `--` on
    report = _json_report_args(test) if manager == "npm" else ""
    if report:
        # jest's default reporter names no passing test (and vitest's only on a
        # terminal): its JSON report does, into the check's private directory
        command = f"{command} -- {report}"
        why += "; its JSON report read per test"
    return Runner(f"{manager}_test", command, why, 900, ("node", manager), kind="node")


#: What asks a lone jest / vitest test script for its JSON report: written to
#: $CORRAL_TEST_REPORT where corral runs it, to a file in the checkout by hand.
_JSON_REPORT_ARGS = {
    "jest": '--ci --json --outputFile="${CORRAL_TEST_REPORT:-jest-report.json}"',
    "vitest": (
        "--run --reporter=default --reporter=json "
        '--outputFile.json="${CORRAL_TEST_REPORT:-vitest-report.json}"'
    ),
}


def _json_report_args(script: str) -> str:
    """The arguments `npm test -- …` appends for a script that is one jest or
    vitest run (appended to its last word, so only a single step), else ""."""
    if re.search(r"&&|\|\||;|\||\boutputFile\b|--json\b|--reporter", script):
        return ""
    programs = _script_programs(script)
    if len(programs) != 1:
        return ""
    return _JSON_REPORT_ARGS.get(programs[0], "")


def _runners_in(
    base: Path, root: Path, available: set[str], path: str | None = None
) -> list[Runner]:
    """Every runner one directory offers, in a fixed order."""
    found = _python_runners(base, available, path)
    if (base / "tox.ini").is_file():
        found.append(Runner("tox", "tox -q", "tox.ini", 1800, ("tox",), kind="tox"))
    if (base / "noxfile.py").is_file():
        found.append(Runner("nox", "nox", "noxfile.py", 1800, ("nox",), kind="nox"))
    node = _node_runner(base, root)
    if node is not None:
        found.append(node)
    if (base / "Cargo.toml").is_file():
        found.append(
            # not --quiet: libtest then prints no per-test lines to judge by
            Runner("cargo_test", "cargo test", "Cargo.toml", 1800, ("cargo",), kind="cargo")
        )
    if (base / "go.mod").is_file():
        found.append(Runner("go_test", "go test ./...", "go.mod", 1200, ("go",), kind="go"))
    makefile = _read_text(base / "Makefile", MAX_CI_FILE_BYTES)
    if makefile is not None:
        targets = set(_MAKE_TARGET.findall(makefile))
        target = "test" if "test" in targets else "check" if "check" in targets else None
        if target is not None:
            why = f"Makefile has a {target}: target"
            fetches = make_target_fetches(makefile, target)
            found.append(
                Runner(
                    f"make_{target}",
                    f"make {target}",
                    why,
                    1800,
                    ("make",),
                    kind="make",
                    network=f"`make {target}` runs `{fetches}`" if fetches else "",
                )
            )
    return [replace(r, missing=tuple(t for t in r.tools if t not in available)) for r in found]


def _check_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]+", "_", text).strip("_") or "dir"


def _is_subproject(base: Path) -> bool:
    manifests = (*_PY_MANIFESTS, "noxfile.py", "package.json", "Cargo.toml", "go.mod", "Makefile")
    return any((base / m).is_file() for m in manifests)


def detect_runners(
    root: Path, *, path: str | None = None, provided: frozenset[str] = frozenset()
) -> list[Runner]:
    """The test runners the repository offers: at the root, then one level
    down for monorepos (sorted subdirs with a manifest of their own, skipping
    build output, vendored code and dot-dirs; commands prefixed with
    `cd <dir> && `). A subdir runner of a kind the root already runs is left
    out (a workspace root covers its members). Runners whose tools are not
    on PATH are returned with `missing` set; callers must not propose them.
    Names are unique check names; at most 8 runners. `provided` names tools
    the setup's environment will supply (a venv supplies python3 and pytest).
    """
    available = set(available_tooling(path)[0]) | provided
    runners = _runners_in(root, root, available, path)
    root_kinds = {r.kind for r in runners}
    for directory in _subdirs(root):
        if len(runners) >= MAX_RUNNERS:
            break
        base = root / directory
        if _CONTROL.search(directory) or not _is_subproject(base):
            continue
        runners += [
            replace(
                r,
                name=f"{_check_name(directory)}_{r.name}",
                command=f"cd {shlex.quote(directory)} && {r.command}",
                why=f"{r.why} in {directory}/",
                directory=directory,
            )
            for r in _runners_in(base, root, available, path)
            if r.kind not in root_kinds
        ]
    unique: list[Runner] = []
    taken: set[str] = set()
    for r in runners[:MAX_RUNNERS]:
        name, n = r.name, 1
        while name in taken:
            n += 1
            name = f"{r.name}_{n}"
        taken.add(name)
        unique.append(replace(r, name=name))
    return unique


# ---------------------------------------------------------------------------
# Files named in the intent

_PATHLIKE = re.compile(r"[A-Za-z0-9_./\-]+")
_BASENAME = re.compile(r"\.?[A-Za-z0-9_\-]+(\.[A-Za-z0-9_\-]+)*\.[A-Za-z0-9]+")


def _walk_files(root: Path, limit: int = MAX_WALK_ENTRIES) -> Iterator[Path]:
    """Files under root (relative), breadth-first, skipping build/vendor and
    dot-dirs, never following symlinked directories, bounded."""
    queue = [Path()]
    seen = 0
    while queue:
        rel = queue.pop(0)
        for e in _scandir(root / rel):
            seen += 1
            if seen > limit:
                return
            if _is_dir(e, follow=False):
                if not _skipped(e.name) and len(rel.parts) < 8:
                    queue.append(rel / e.name)
            else:
                yield rel / e.name


def named_files(root: Path, intent: str) -> list[str]:
    """Repository paths the intent names, as paths (`src/app.py`) or bare
    file names (`app.py`, looked up anywhere in the repository)."""
    paths: list[str] = []
    basenames: list[str] = []
    for token in _PATHLIKE.findall(intent):
        token = token.rstrip(".-").removeprefix("./").rstrip("/")
        if not token or token.startswith("/") or ".." in token.split("/"):
            continue
        if "/" in token:
            if (root / token).exists() and token not in paths:
                paths.append(token)
        elif _BASENAME.fullmatch(token) and token not in basenames:
            basenames.append(token)
    if basenames:
        wanted = set(basenames)
        for rel in _walk_files(root):
            if rel.name in wanted:
                posix = rel.as_posix()
                if posix not in paths:
                    paths.append(posix)
            if len(paths) >= MAX_NAMED_FILES:
                break
    return [_clean(p) for p in paths[:MAX_NAMED_FILES]]


# ---------------------------------------------------------------------------
# The drafter


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(_clean(text).split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _normalise_job(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


def draft_contract(
    root: Path,
    intent: str,
    *,
    constraints: list[str] | None = None,
    path: str | None = None,
    max_timeout_secs: int = MAX_CHECK_TIMEOUT_SECS,
) -> OutcomeContract:
    """The blocking body of `ConventionsDrafter.draft`."""
    proposal = drafted_setup(root, path=path)
    provided = frozenset({"python3", "pytest"}) if proposal.python else frozenset()
    runners = detect_runners(root, path=path, provided=provided)
    # tox and nox build their own environments from the network, which checks
    # do not have: with a setup, its environment runs the tests instead.
    own_envs = [r for r in runners if proposal.python and r.kind in ("tox", "nox")]
    runners = [r for r in runners if r not in own_envs]
    # a runner that fetches from the network fails offline whatever the
    # change: beside another runner it is left out (said below), alone it
    # runs with the network (network = true, said at gate 1)
    offline = [r for r in runners if r.available and not r.network]
    online = [r for r in runners if r.available and r.network]
    left_online = online if offline else []
    runners = [r for r in runners if r not in left_online]
    usable = [r for r in runners if r.available]
    missing = [r for r in runners if not r.available]
    where = _one_line(str(root), 200)
    jobs = [j for j in ci_jobs(root) if j.matters]
    base_checks = [
        ContractCheck(
            name=r.name,
            command=r.command,
            timeout_secs=max(1, min(r.timeout_secs, max_timeout_secs)),
            network=bool(r.network),
        )
        for r in usable
    ]
    offered = _ci_checks(jobs, base_checks, proposal, root, path, max_timeout_secs)
    if not runners and not own_envs and not offered:
        available = set(available_tooling(path)[0]) | provided
        added = added_tests_runner(root, python=proposal.python, available=available)
        if added is not None:
            runners = [added]
            usable = [added] if added.available else []
            missing = [] if added.available else [added]
            base_checks = [
                ContractCheck(
                    name=r.name,
                    command=r.command,
                    timeout_secs=max(1, min(r.timeout_secs, max_timeout_secs)),
                )
                for r in usable
            ]
    if not usable and not offered:  # CI's own `run:` steps are runners too
        if missing:
            unusable = "; ".join(
                f"`{r.command}` needs {', '.join(r.missing)}, which is not on PATH" for r in missing
            )
            raise DraftingError(f"no usable test runner in {where} ({unusable}); {GIVE_CHECKS}")
        raise DraftingError(
            f"no test runner or build system was recognised in {where}; {GIVE_CHECKS}",
            no_checks=True,
        )

    checks = [*base_checks, *(check for check, _ in offered)]
    no_tests = [r.kind for r in usable] == ["added"]
    lines = [
        "Drafted from the repository's conventions, without a model. "
        + (
            "This project has no tests, so nothing shows its code still works: "
            "this contract asks the work to add tests, and runs them:"
            if no_tests
            else "This contract verifies that the project's existing test suites still pass:"
        ),
        *(
            f"- {r.name}: `{r.command}` ({r.why})"
            + (
                f" — with the network (network = true): {r.network}, and a check has no "
                "network otherwise"
                if r.network
                else ""
            )
            for r in usable
        ),
        *(f"- {c.name}: `{c.command}` (CI job {job!r} runs it)" for c, job in offered),
        "Passing these shows the tests the work adds pass; it does not show they test "
        "the requested change."
        if no_tests
        else "Passing these shows nothing regressed; it does not show the requested change "
        "was made.",
    ]
    if proposal.commands:
        lines.append(
            "Setup (runs before the baseline and before every verification, with the network, "
            "writing only corral's environment dir; checks then run inside it without the "
            "network): " + "; ".join(proposal.notes)
        )
    else:
        lines += [f"Setup: {note}" for note in proposal.notes]
    files = named_files(root, intent)
    if files:
        lines.append(
            "Files the intent names (no check targets them specifically): " + ", ".join(files)
        )

    gaps = [
        f"- the specific behaviour asked for: {_one_line(intent)} "
        "(add a check that fails now and passes when it is done: /check name command)"
    ]
    gaps += [f"- agreed constraint: {_one_line(c)}" for c in constraints or [] if c.strip()]
    covered = {c.name for c in checks}
    by_ci = {job for _, job in offered}
    runs_pytest = any("pytest" in c.command for c in checks)
    gaps += [
        f"- CI job {job.name!r}: no check runs it"
        for job in jobs
        if _normalise_job(job.name) not in covered
        and job.name not in by_ci
        and not (runs_pytest and any(tool == "pytest" for tool, _ in job.runnable()))
    ]
    gaps += [
        f"- {r.name}: `{r.command}` ({r.why}) — {', '.join(r.missing)} not on PATH" for r in missing
    ]
    gaps += [line for r in usable for line in _left_out_lines(r)]
    gaps += [
        f"- {r.name}: `{r.command}` ({r.why}) — it needs the network ({r.network}), which "
        "checks do not have; the checks above run the tests offline. To run it anyway: "
        f'--contract FILE with {{"name": "{r.name}", "command": "{r.command}", '
        '"network": true}'
        for r in left_online
    ]
    gaps += [
        f"- {r.name}: `{r.command}` ({r.why}) — it builds its own environments from the "
        "network; the setup's environment runs the tests instead"
        for r in own_envs
    ]
    description = "\n".join([*lines, "", NOT_VERIFIED_HEADING, *gaps])
    return OutcomeContract(
        description=description,
        setup=proposal.commands,
        setup_timeout_secs=min(DEFAULT_SETUP_TIMEOUT_SECS, max_timeout_secs),
        checks=checks,
    )


def _left_out_lines(runner: Runner) -> list[str]:
    """Gate 1's words for the test files a check leaves out: which, why,
    and how to put them back."""
    if not runner.left_out:
        return []
    lines = [
        f"- {f.path}: left out of {runner.name} (`--ignore={f.path}`): {f.why}; its tests "
        "cannot pass here, and would fail or wait out a client's timeout"
        for f in runner.left_out
    ]
    programs = sorted({f.program for f in runner.left_out if f.program})
    ignores = " ".join(shlex.quote(f"--ignore={f.path}") for f in runner.left_out)
    whole = runner.command.removesuffix(f" {ignores}")
    install = f"install {', '.join(programs)} (a fixture starts it), or " if programs else ""
    lines.append(
        f"  To put them back: {install}start the server in the check's own command (a "
        "check runs in a network namespace of its own, where only what it starts "
        f"listens), then run the whole suite: --check {shlex.quote(whole)}"
    )
    return lines


def _conftests(root: Path, tests: list[Path]) -> list[Path]:
    """The conftest.py files pytest loads for these test files: the root's
    and those of every directory between it and a test."""
    dirs = {root} | {parent for test in tests for parent in test.parents if root in parent.parents}
    return [d / "conftest.py" for d in sorted(dirs) if (d / "conftest.py").is_file()]


def drafted_setup(root: Path, *, path: str | None = None) -> SetupProposal:
    """The setup both drafting lanes propose: what the repository declares,
    and (for a pip setup) what its tests import that nothing declares."""
    proposal = propose_setup(root, path=path)
    if not proposal.python or proposal.installs is None:
        return proposal
    python = '"$CORRAL_ENV/bin/python"'
    tests = _test_files(root)
    # the conftest files pytest loads first: one importing a module nothing
    # installs (azure's `dotenv`) stops every test before it runs
    modules = undeclared_imports(root, [*tests, *_conftests(root, tests)])
    if modules:
        proposal.commands.append(install_missing_command(python, modules))
        proposal.notes.append(
            f"the tests import {', '.join(modules)}: each installed by name (from PyPI) when "
            "the project's install does not bring it"
        )
    hooks = conftest_hooks(root, tests)
    if hooks and not pins_pytest(proposal.installs):  # a project's own pin is its choice
        proposal.commands.append(older_pytest_step(python, list(hooks)))
        named = "; ".join(
            f"{'' if d == '.' else d + '/'}conftest.py: {', '.join(h[:3])}"
            for d, h in hooks.items()
        )
        proposal.notes.append(
            f"the suite's conftest defines pytest hooks ({named}): if the installed pytest "
            "rejects them (written for an older pytest), the pytest below its major version "
            "is installed"
        )
    return proposal


def _declares(root: Path, tool: str, proposal: SetupProposal) -> bool:
    """Whether the setup will install `tool`: among the requirements the pip
    path installs, or (when a project tool installs what it decides) named in
    the project's manifests."""
    known = proposal.installs_tool(tool)
    if known is not None:
        return known
    for name in ("pyproject.toml", "setup.cfg", "setup.py", "tox.ini", "package.json"):
        text = _read_text(root / name, MAX_CI_FILE_BYTES) or ""
        if re.search(rf"[\"'\s\[,]{re.escape(tool)}\b", text):
            return True
    return False


def _ci_checks(
    jobs: list[CiJob],
    checks: list[ContractCheck],
    proposal: SetupProposal,
    root: Path,
    path: str | None,
    max_timeout_secs: int,
) -> list[tuple[ContractCheck, str]]:
    """CI steps offered as checks: a plain `run:` of a test, lint or
    type-check tool the setup installs (or that is on PATH), not already
    covered by a proposed check."""
    have_pytest = any("pytest" in c.command for c in checks)
    taken = {c.name for c in checks}
    out: list[tuple[ContractCheck, str]] = []
    for job in jobs:
        for tool, command in job.runnable():
            if tool == "pytest" and have_pytest:
                continue
            if any(c.command == command for c, _ in out) or _FETCHES.search(command):
                continue  # a step that fetches fails offline, whatever the change
            python_tool = tool not in ("npm", "pnpm", "yarn", "cargo", "go")
            installed = shutil.which(tool, path=path) is not None
            if python_tool and proposal.python:
                installed = _declares(root, tool, proposal)
            if not installed:
                continue
            name = f"ci_{_check_name(tool)}"
            n = 1
            while name in taken:
                n += 1
                name = f"ci_{_check_name(tool)}_{n}"
            taken.add(name)
            timeout = max(1, min(600, max_timeout_secs))
            out.append((ContractCheck(name=name, command=command, timeout_secs=timeout), job.name))
            if len(out) >= 4:
                return out
    return out


class ConventionsDrafter:
    """Drafts from what is on disk; needs no model and no network.

    `path` overrides PATH for tool lookups (tests); `max_timeout_secs` clamps
    check timeouts to the supervisor's ceiling.
    """

    name = "conventions"

    def __init__(
        self, *, path: str | None = None, max_timeout_secs: int = MAX_CHECK_TIMEOUT_SECS
    ) -> None:
        self.path = path
        self.max_timeout_secs = max_timeout_secs

    async def draft(self, request: DraftRequest) -> OutcomeContract:
        root = request.worktree if request.worktree and request.worktree.is_dir() else request.repo
        return await asyncio.to_thread(
            draft_contract,
            root,
            request.intent,
            constraints=list(request.constraints),
            path=self.path,
            max_timeout_secs=self.max_timeout_secs,
        )

    async def revise(self, request: ReviseRequest) -> OutcomeContract:
        raise DraftingError(REVISE_NEEDS_MODEL)
