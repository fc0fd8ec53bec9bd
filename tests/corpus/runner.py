"""Fetching a corpus project from its registry and running corral on it:
draft a contract with the conventions lane, run its setup in one worktree
(cold), run it again in a second worktree (reused), remove the first (as a
baseline's disposable worktree is), and baseline the checks in the second;
then a scripted agent's correct change and a scripted regression, each
through `corral run` (tests/corpus/session.py). Used by
tests/corpus/test_corpus.py and bench/corpus.py."""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
import subprocess
import tarfile
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from corral.supervisor.contracts.checks import run_contract
from corral.supervisor.contracts.conventions import draft_contract
from corral.supervisor.contracts.drafting import DraftingError
from corral.supervisor.contracts.environment import Environments
from corral.supervisor.models import CheckResult, OutcomeContract, SetupOutcome

from .session import (
    Edit,
    Recheck,
    SessionResult,
    agent_scripts,
    corral_run,
    independent_recheck,
    verified_from_fresh_clone,
)

PROJECTS = Path(__file__).with_name("projects.toml")


def cache_dir() -> Path:
    """Downloads live outside the clone, shared by every run on this machine."""
    raw = os.environ.get("CORRAL_CORPUS_CACHE")
    return Path(raw) if raw else Path.home() / ".cache" / "corral-corpus"


@dataclass(frozen=True)
class Project:
    name: str
    registry: str
    version: str
    shape: str
    expect: str
    reason: str = ""
    # the scripted work: a function added to `module_file` (imported as
    # `module`) with a test in `test_dir` (PyPI), or an export added to
    # `main` with an assertion appended to `test_file` (npm); `regress`
    # empties `module_file` / `main` unless it lists its own edits
    module: str = ""
    module_file: str = ""
    test_dir: str = "tests"
    test_style: str = "unittest"  # or "pytest": a plain test function
    main: str = "index.js"
    test_file: str = "test.js"
    regress: tuple[Edit, ...] = ()
    # the project's own change: edits of its existing code in its style plus a
    # test (`old`/`new` replacements, `append`, `write`), and the intent it
    # is asked with; empty: the generic doubling helper
    edit: tuple[Edit, ...] = ()
    intent: str = ""
    # a Debian package's source tree inside it (a Go module's import path);
    # empty: the one crate under usr/share/cargo/registry
    unpacked: str = ""
    # programs the project's checks run that not every machine has (`go`,
    # `cargo`): without them the project is left out, saying which is missing
    needs: tuple[str, ...] = ()
    # tests that fail on the untouched tree, as gate 1 must list them; and
    # tests that fail only on some hosts (this host's data), listed when they do
    already_failing: tuple[str, ...] = ()
    may_fail: tuple[str, ...] = ()
    # lines the drafted setup must hold (a tox compile step, a runner pin)
    setup_has: tuple[str, ...] = ()
    # whether today's drafted contract delivers the correct change, and why not
    delivers: bool = True
    why_not: str = ""
    # whether today's drafted contract refuses the regression, and why not
    refuses_regression: bool = True
    why_missed: str = ""
    # chosen by the unseen rule (bench/README.md), not for its shape: its
    # rates are reported apart, as measured on the first run
    unseen: bool = False
    # a monorepo: the project lives in `subdir` of the repository, beside
    # other registry packages (`siblings`: registry, name, version, dir)
    subdir: str = ""
    siblings: tuple[dict[str, str], ...] = ()
    # a fragment of the test the regression breaks: a catch must name it
    breaks: str = ""

    def missing_tools(self) -> list[str]:
        return [tool for tool in self.needs if shutil.which(tool) is None]

    @property
    def id(self) -> str:
        return f"{self.name}-{self.version}"

    @property
    def state_name(self) -> str:
        """The id, short enough for the tmux socket path under its state dir."""
        if len(self.id) <= 24:
            return self.id
        return f"{self.name[:16]}-{hashlib.sha1(self.id.encode()).hexdigest()[:7]}"

    def change(self) -> list[Edit]:
        """A small real edit plus a test of it: the project's own where
        projects.toml writes one, else a doubling helper appended."""
        if self.edit:
            return [dict(e) for e in self.edit]
        if self.registry == "debian" and self.main.endswith(".go"):  # a Go package
            package = self.module
            return [
                {
                    "path": self.main,
                    "append": "\n// CorralDouble is twice n.\nfunc CorralDouble(n int) int {\n"
                    "\treturn 2 * n\n}\n",
                },
                {
                    "path": "corral_double_test.go",
                    "write": f'package {package}\n\nimport "testing"\n\n'
                    "func TestCorralDouble(t *testing.T) {\n"
                    "\tif got := CorralDouble(21); got != 42 {\n"
                    '\t\tt.Fatalf("CorralDouble(21) = %d, want 42", got)\n\t}\n}\n',
                },
            ]
        if self.registry == "debian":  # a Rust crate: a function and a unit test of it
            return [
                {
                    "path": self.main,
                    "append": "\n/// Twice n.\npub fn corral_double(n: u64) -> u64 {\n    2 * n\n}\n"
                    "\n#[cfg(test)]\nmod corral_double_tests {\n    #[test]\n"
                    "    fn doubles() {\n        assert_eq!(super::corral_double(21), 42);\n    }\n}\n",
                }
            ]
        if self.registry == "npm":
            depth = self.test_file.count("/")
            target = ("../" * depth or "./") + self.main
            return [
                {
                    "path": self.main,
                    "append": "\nmodule.exports.corralDouble = function (n) {\n"
                    "\treturn n * 2;\n};\n",
                },
                {
                    "path": self.test_file,
                    "append": f"\nrequire('assert').strictEqual("
                    f"require({target!r}).corralDouble(21), 42);\n",
                },
            ]
        test = (
            f"from {self.module} import corral_double\n\n\n"
            "def test_doubles():\n"
            "    assert corral_double(21) == 42\n"
            if self.test_style == "pytest"
            else f"import unittest\n\nfrom {self.module} import corral_double\n\n\n"
            "class CorralDouble(unittest.TestCase):\n"
            "    def test_doubles(self):\n"
            "        self.assertEqual(corral_double(21), 42)\n"
        )
        return [
            {
                "path": self.module_file,
                "append": '\n\ndef corral_double(n):\n    """Twice n."""\n    return 2 * n\n',
            },
            {"path": f"{self.test_dir}/test_corral_double.py", "write": test},
        ]

    def regression(self) -> list[Edit]:
        """An edit that breaks what the project's own tests cover."""
        if self.regress:
            return [dict(e) for e in self.regress]
        if self.registry == "npm":
            return [{"path": self.main, "write": "module.exports = function () {}\n"}]
        return [{"path": self.module_file, "write": ""}]


def projects() -> list[Project]:
    data: dict[str, Any] = tomllib.loads(PROJECTS.read_text(encoding="utf-8"))
    rows = [
        dict(
            row,
            regress=tuple(row.get("regress", ())),
            edit=tuple(row.get("edit", ())),
            needs=tuple(row.get("needs", ())),
            already_failing=tuple(row.get("already_failing", ())),
            may_fail=tuple(row.get("may_fail", ())),
            setup_has=tuple(row.get("setup_has", ())),
            siblings=tuple(row.get("siblings", ())),
        )
        for row in data["project"]
    ]
    return [Project(**row) for row in rows]


def _run(argv: list[str], cwd: Path) -> None:
    subprocess.run(argv, cwd=cwd, check=True, capture_output=True, text=True, timeout=600)


def fetch(project: Project) -> Path:
    """The project's sdist (PyPI) or tarball (npm), downloaded once."""
    where = cache_dir() / project.registry
    where.mkdir(parents=True, exist_ok=True)
    if project.registry == "pypi":
        names = {project.name.lower(), project.name.lower().replace("-", "_")}
        for path in where.glob("*.tar.gz"):
            stem = path.name.removesuffix(".tar.gz")
            base, _, version = stem.rpartition("-")
            if version == project.version and base.lower() in names:
                return path
        _run(
            [
                *("pip", "download", "-q", "--no-deps", "--no-binary", ":all:"),
                *(f"{project.name}=={project.version}", "-d", str(where)),
            ],
            where,
        )
        return fetch(project)
    if project.registry == "debian":  # a crate's or Go module's source as Debian packages it
        found = sorted(where.glob(f"{project.name}_{project.version}_*.deb"))
        if found:
            return found[0]
        _run(["apt-get", "download", "-q", f"{project.name}={project.version}"], where)
        return fetch(project)
    tarball = where / f"{project.name}-{project.version}.tgz"
    if not tarball.is_file():
        _run(["npm", "pack", "-q", f"{project.name}@{project.version}"], where)
    return tarball


def git(cwd: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        GIT_CONFIG_NOSYSTEM="1",
        GIT_AUTHOR_NAME="corpus",
        GIT_AUTHOR_EMAIL="corpus@example.com",
        GIT_COMMITTER_NAME="corpus",
        GIT_COMMITTER_EMAIL="corpus@example.com",
    )
    proc = subprocess.run(
        ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True
    )
    return proc.stdout


def as_repo(project: Project, into: Path) -> Path:
    """The unpacked project as a one-commit git repository (a monorepo's
    package in its subdir, its siblings beside it)."""
    repo = into / project.id
    shutil.rmtree(repo, ignore_errors=True)
    if project.subdir:
        repo.mkdir(parents=True)
        _unpack(project, into).rename(repo / project.subdir)
        for sibling in project.siblings:
            other = Project(**{k: v for k, v in sibling.items() if k != "dir"}, shape="", expect="")
            _unpack(other, into).rename(repo / sibling["dir"])
    else:
        _unpack(project, into).rename(repo)
    for junk in ("__pycache__", ".pytest_cache"):  # stray caches some sdists ship
        for path in list(repo.rglob(junk)):
            shutil.rmtree(path, ignore_errors=True)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A", "-f")
    git(repo, "commit", "-q", "-m", f"{project.id} from {project.registry}")
    return repo


def _unpack(project: Project, into: Path) -> Path:
    """The project's archive unpacked: its top directory, under `into`."""
    archive = fetch(project)
    unpack = into / f"{project.id}-unpacked"
    shutil.rmtree(unpack, ignore_errors=True)
    unpack.mkdir(parents=True)
    if project.registry == "debian":
        _run(["dpkg-deb", "-x", str(archive), str(unpack)], unpack)
        if project.unpacked:  # a Go module: under its import path
            top = unpack / project.unpacked
        else:
            [top] = list((unpack / "usr/share/cargo/registry").iterdir())
    else:
        with tarfile.open(archive) as tar:
            tar.extractall(unpack, filter="data")
        [top] = list(unpack.iterdir())
    moved = into / f"{project.id}-top"
    shutil.rmtree(moved, ignore_errors=True)
    top.rename(moved)
    shutil.rmtree(unpack)
    return moved


@dataclass
class Outcome:
    """What gate 1 would show for one project."""

    project: Project
    contract: OutcomeContract
    cold: SetupOutcome | None
    cached: SetupOutcome | None
    cold_secs: float
    cached_secs: float
    baseline: list[CheckResult] = field(default_factory=list)
    change: SessionResult | None = None
    recheck: Recheck = field(default_factory=lambda: Recheck(False, "not run"))
    attested: tuple[bool, str] = (False, "not run")  # `corral verify` from a fresh clone
    regress: SessionResult | None = None

    @property
    def reverified(self) -> tuple[bool, str]:
        return self.recheck.ok, self.recheck.why

    @property
    def delivered(self) -> bool:
        """The correct change was delivered and passes when re-checked
        independently (fresh clone, fresh environment, the contract verbatim)."""
        return self.change is not None and self.change.delivered and self.recheck.ok

    @property
    def regression_refused(self) -> bool:
        """Not delivered, for whatever reason."""
        return self.regress is not None and not self.regress.delivered

    @property
    def regression_caught(self) -> bool:
        """Not delivered because a check failed at verification and named the
        broken test: where projects.toml gives `breaks`, that test (a catch
        naming only others is not this regression's)."""
        if self.regress is None or not self.regress.caught:
            return False
        return not self.project.breaks or self.regress.names(self.project.breaks)

    def delivery(self) -> str:
        """One line: how the correct change fared."""
        if self.change is None:
            return "not run"
        if self.delivered:
            extra = " (red before too)" if self.recheck.red_before else ""
            return f"delivered ({self.change.secs:.0f}s), re-checked independently{extra}"
        if self.change.delivered:
            return f"delivered, but the independent re-check fails: {self.recheck.why}"
        return f"exit {self.change.exit_code}: {self.change.why_not()}"

    @property
    def already_failing(self) -> list[str]:
        """Tests gate 1 lists as failing on the untouched tree, not blocking."""
        return sorted(t for r in self.baseline for t in r.already_failing)

    @property
    def verdicts(self) -> set[str]:
        return {str(r.verdict) for r in self.baseline}

    def verdict(self) -> str:
        """`passes` when every check passes, else the worst verdict and why."""
        if not self.baseline:
            return f"no checks: {self.contract.description}"
        blocked = [r for r in self.baseline if r.cannot_run]
        if blocked:
            return f"cannot_run ({blocked[0].name}: {blocked[0].reason})"
        failing = [r for r in self.baseline if not r.passed]
        if failing:
            return f"fails ({failing[0].name}: {failing[0].reason})"
        return "passes"


async def run_project(
    project: Project, work: Path, state: Path, *, sessions: bool = True
) -> Outcome:
    """Draft, set up twice (two worktrees), baseline in the second; then (with
    `sessions`) the scripted change and regression through `corral run`, in
    the same state dir (`state/<project>`): its sessions find the environment
    the first setup built."""
    home = state / project.state_name
    outcome = await _gate_one(project, work, Environments(home))
    if sessions:
        await _sessions(outcome, work, home)
    return outcome


async def _sessions(outcome: Outcome, work: Path, home: Path) -> None:
    project = outcome.project
    repo = work / project.id
    change, regress = agent_scripts(
        work / f"{project.id}-agent", project.change(), project.regression()
    )
    intent = project.intent or f"Add a doubling helper to {project.name}, with a test"
    outcome.change = await asyncio.to_thread(corral_run, repo, home, intent, change)
    if outcome.change.delivered and outcome.change.contract is not None:
        outcome.recheck = await asyncio.to_thread(
            independent_recheck,
            repo,
            outcome.change.branch,
            outcome.change.contract,
            work / f"{project.id}-clean",
        )
        outcome.attested = await asyncio.to_thread(
            verified_from_fresh_clone, repo, outcome.change.branch, work / f"{project.id}-verify"
        )
    outcome.regress = await asyncio.to_thread(
        corral_run, repo, home, f"Simplify {project.name}", regress
    )


async def _gate_one(project: Project, work: Path, envs: Environments) -> Outcome:
    repo = as_repo(project, work)
    try:
        contract = draft_contract(repo, f"keep {project.name} working")
    except DraftingError as exc:
        return Outcome(project, OutcomeContract(description=str(exc)), None, None, 0.0, 0.0)
    first = work / f"{project.id}-wt1"
    second = work / f"{project.id}-wt2"
    git(repo, "worktree", "add", "-q", "--detach", str(first))
    git(repo, "worktree", "add", "-q", "--detach", str(second))
    started = time.monotonic()
    cold = await envs.prepare(contract, first)
    cold_secs = time.monotonic() - started
    # the first worktree goes away, as a baseline's disposable one does
    git(repo, "worktree", "remove", "--force", str(first))
    started = time.monotonic()
    again = await envs.prepare(contract, second)
    cached_secs = time.monotonic() - started
    if again is not None and not again.outcome.ok:
        from corral.supervisor.contracts.environment import setup_reason
        from corral.supervisor.contracts.verdicts import setup_failed

        baseline = [setup_failed(c.name, setup_reason(again.outcome)) for c in contract.checks]
    else:
        environment = again.environment if again is not None else None
        baseline = await run_contract(contract, second, environment=environment, untouched=True)
    return Outcome(
        project=project,
        contract=contract,
        cold=cold.outcome if cold is not None else None,
        cached=again.outcome if again is not None else None,
        cold_secs=cold_secs,
        cached_secs=cached_secs,
        baseline=baseline,
    )


def run_all(
    work: Path,
    state: Path,
    only: list[str] | None = None,
    *,
    parallel: int = 1,
    sessions: bool = True,
    on_done: Callable[[Outcome], None] | None = None,
) -> list[Outcome]:
    """Every chosen project, `parallel` at a time (timings are honest only at 1);
    `on_done` hears each project as it finishes (a long run stopped early
    keeps what it measured)."""
    chosen = [p for p in projects() if not only or p.name in only]
    if only:  # in the order asked (the quick ones first on a loaded machine)
        chosen.sort(key=lambda p: only.index(p.name))
    for project in chosen:  # downloads first, one at a time
        fetch(project)
    gate = asyncio.Semaphore(parallel)

    async def one(project: Project) -> Outcome:
        async with gate:
            outcome = await run_project(project, work, state, sessions=sessions)
        if on_done is not None:
            on_done(outcome)
        return outcome

    async def main() -> list[Outcome]:
        return list(await asyncio.gather(*(one(p) for p in chosen)))

    return asyncio.run(main())
