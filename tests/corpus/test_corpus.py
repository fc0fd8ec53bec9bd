"""Contracts on real projects: each corpus project (tests/corpus/projects.toml,
fetched from PyPI or npm at its pinned version) becomes a git repository; the
conventions lane drafts its contract and setup; the setup runs in one
worktree and is reused by a second (never rebuilt, whatever its kind); the
project's own tests run in the second worktree. Every check must pass on the
untouched tree, or state a correct *cannot run* with its reason — never a
red that would "prove the work". Then, through `corral run` as a new user
runs it headless (default configuration), a scripted correct change is
delivered (and passes again when re-checked independently: the session's
contract verbatim in fresh clones with fresh environments) exactly where
projects.toml says today's drafting can, and a scripted regression is caught
by a check that fails and names it exactly where it says so (a gap is
recorded with its reason, never hidden)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .runner import Outcome, Project, projects, run_all

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

# `make test` runs a quick set, one project of each shape that runs in about two
# minutes in all; CORRAL_CORPUS_ALL=1 runs every project (a slow project's
# suite runs six times: up to half an hour on two cores, as bench/corpus.py
# does), and CORRAL_CORPUS_ONLY="idna inherits" runs those projects alone.
QUICK = {
    "idna",  # a flat package whose tests pass
    "six",  # a host-dependent cannot-run (no _dbm here)
    "inherits",  # npm with tests
    "concat-map",  # npm, its node_modules reused by the second checkout
    "wrappy",  # npm with a coverage wrapper and no test files
    "lodash.clonedeep",  # npm whose test script only echoes: the work must add tests
    "golang-github-google-shlex-dev",  # a Go module, per-test from `go test -json`
}
ONLY = os.environ.get("CORRAL_CORPUS_ONLY", "").split()
ALL = os.environ.get("CORRAL_CORPUS_ALL", "") == "1"
PROJECTS = [p for p in projects() if (p.name in ONLY if ONLY else ALL or p.name in QUICK)]
# a project whose toolchain is not installed is skipped, saying which (.ci/run installs them)
RUNNABLE = [p for p in PROJECTS if not p.missing_tools()]


def _skip_without_toolchain(project: Project) -> None:
    missing = project.missing_tools()
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed here (.ci/run installs it)")


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    """The whole corpus once, two projects at a time (2 cores)."""
    base = tmp_path_factory.mktemp("corpus")
    done = run_all(base / "work", base / "state", [p.name for p in RUNNABLE], parallel=2)
    return {o.project.name: o for o in done}


@pytest.mark.parametrize("project", PROJECTS, ids=[p.id for p in PROJECTS])
def test_the_drafted_contract_holds_on_the_untouched_project(
    project: Project, outcomes: dict[str, Outcome]
) -> None:
    _skip_without_toolchain(project)
    outcome = outcomes[project.name]
    contract = outcome.contract
    if project.expect == "no_contract":
        assert not contract.checks and project.reason in contract.description
        return
    assert contract.checks, outcome.verdict()
    if project.registry == "pypi":
        assert contract.setup and contract.setup[0] == 'python3 -m venv "$CORRAL_ENV"'
    for line in project.setup_has:  # a step the project's own runner takes before its tests
        assert any(line in step for step in contract.setup), contract.setup
    if contract.setup:
        assert outcome.cold is not None and outcome.cached is not None
        assert outcome.cold.ok, outcome.cold.output_tail
        assert outcome.cached.ok
        # a second worktree of the same tree reuses the environment, whatever its kind
        assert outcome.cached.cached and not outcome.cold.cached
    if project.expect in ("fails", "needs_tests"):
        # `fails`: a known gap, a red that should say why it cannot run;
        # `needs_tests`: a project without tests, red until the work adds one
        failing = [r for r in outcome.baseline if r.verdict == "fails"]
        assert failing and project.reason in failing[0].reason, outcome.verdict()
        return
    # never a red on the untouched tree: only passes, or a stated cannot-run
    assert not any(r.verdict == "fails" for r in outcome.baseline), outcome.verdict()
    # tests failing on the untouched tree are listed at gate 1 by name, never blocking
    listed = set(outcome.already_failing)
    assert set(project.already_failing) <= listed
    assert listed <= {*project.already_failing, *project.may_fail}, listed
    if project.expect == "passes":
        assert outcome.verdict() == "passes", [r.output_tail[-600:] for r in outcome.baseline]
    else:
        blocked = [r for r in outcome.baseline if r.cannot_run]
        assert blocked and project.reason in blocked[0].reason, outcome.verdict()
        assert blocked[0].fix


@pytest.mark.parametrize("project", PROJECTS, ids=[p.id for p in PROJECTS])
def test_a_correct_change_is_delivered_where_the_corpus_says_it_can_be(
    project: Project, outcomes: dict[str, Outcome]
) -> None:
    _skip_without_toolchain(project)
    outcome = outcomes[project.name]
    assert outcome.change is not None
    if project.delivers:
        assert outcome.change.delivered, outcome.delivery()
        # the delivered branch itself, checked out afresh, passes its checks
        assert outcome.reverified[0], outcome.reverified[1]
        # its attestation re-verified by `corral verify` from a fresh clone, state-less
        assert outcome.attested[0], outcome.attested[1]
    else:
        assert not outcome.delivered, f"delivers now: update projects.toml ({project.why_not})"


@pytest.mark.parametrize("project", PROJECTS, ids=[p.id for p in PROJECTS])
def test_a_regression_is_refused_where_the_corpus_says_it_is(
    project: Project, outcomes: dict[str, Outcome]
) -> None:
    _skip_without_toolchain(project)
    outcome = outcomes[project.name]
    assert outcome.regress is not None
    if project.refuses_regression:
        assert outcome.regress.exit_code != 0 and not outcome.regress.branch, outcome.regress
        # caught: a check failed at verification (a timeout, a setup failure or
        # a run left waiting is not a catch)
        assert outcome.regress.caught or outcome.regress.failed_unnamed, outcome.regress.why_not()
        if project.breaks:  # a one-behaviour regression: the check named the test it broke
            assert outcome.regression_caught, outcome.regress.why_not()
            assert outcome.regress.names(project.breaks), outcome.regress.failed_tests
        # the generic regression empties a module, so the runner may crash
        # before it names a test: bench/corpus.py counts those apart ("unnamed")
    else:  # a known gap, recorded with its reason; this fails once it is closed
        assert outcome.regress.delivered, (
            f"refused now: update projects.toml ({project.why_missed})"
        )


def test_the_corpus_list_is_pinned_and_varied() -> None:
    everything = projects()
    shapes = " ".join(p.shape for p in everything)
    assert len(everything) >= 40
    assert len({p.name for p in everything}) == len(everything)
    assert all(p.version.count(".") >= 1 for p in everything)
    for shape in (
        *("src layout", "flat", "tox", "nox", "hatch", "poetry", "C extension"),
        *("version-file", "test/", "coverage wrapper", "without tests", "host-dependent"),
        *("genuinely failing test", "compile step"),
        *("node-tap with directives", "setuptools-scm project without tags", "unittest-only"),
        *("Rust", "Go", "jest", "mocha", "tape", "tox-only", "network-needing"),
        *("monorepo subpackage", "Makefile test target"),
    ):
        assert shape in shapes, shape
    assert sum(p.registry == "npm" for p in everything) >= 5
    assert all(p.why_not for p in everything if not p.delivers)
    assert all(p.why_missed for p in everything if not p.refuses_regression)
    # projects with their own change edit existing code and add a test
    # the unseen projects were chosen by the rule, not for their shape
    assert sum(p.unseen for p in everything) >= 10
    for p in everything:
        if p.edit:
            assert any("old" in e for e in p.edit) and p.intent, p.id
            assert p.regress, p.id  # and a regression of one behaviour
    assert Path(__file__).with_name("projects.toml").is_file()
