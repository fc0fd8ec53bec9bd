"""Contracts on real projects: each corpus project (tests/corpus/projects.toml,
fetched from PyPI or npm at its pinned version) becomes a git repository; the
conventions lane drafts its contract and setup; the setup runs in one
worktree, is reused by a second (a shared environment is not rebuilt), and
the project's own tests run in the second worktree. Every check must pass on
the untouched tree, or state a correct *cannot run* with its reason — never
a red that would "prove the work"."""

from __future__ import annotations

from pathlib import Path

import pytest

from .runner import Outcome, Project, projects, run_all

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

PROJECTS = projects()


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    """The whole corpus once, two projects at a time (2 cores)."""
    base = tmp_path_factory.mktemp("corpus")
    done = run_all(base / "work", base / "state", parallel=2)
    return {o.project.name: o for o in done}


@pytest.mark.parametrize("project", PROJECTS, ids=[p.id for p in PROJECTS])
def test_the_drafted_contract_holds_on_the_untouched_project(
    project: Project, outcomes: dict[str, Outcome]
) -> None:
    outcome = outcomes[project.name]
    contract = outcome.contract
    assert contract.checks, outcome.verdict()
    if project.registry == "pypi":
        assert contract.setup and contract.setup[0] == 'python3 -m venv "$CORRAL_ENV"'
    if contract.setup:
        assert outcome.cold is not None and outcome.cached is not None
        assert outcome.cold.ok, outcome.cold.output_tail
        assert outcome.cached.ok
        # a shared environment is reused by the second worktree, never rebuilt
        assert outcome.cached.cached is outcome.cold.shared
    # never a red on the untouched tree: only passes, or a stated cannot-run
    assert not any(r.verdict == "fails" for r in outcome.baseline), outcome.verdict()
    if project.expect == "passes":
        assert outcome.verdict() == "passes", [r.output_tail[-600:] for r in outcome.baseline]
    else:
        blocked = [r for r in outcome.baseline if r.cannot_run]
        assert blocked and project.reason in blocked[0].reason, outcome.verdict()
        assert blocked[0].fix


def test_the_corpus_list_is_pinned_and_varied() -> None:
    shapes = " ".join(p.shape for p in PROJECTS)
    assert 8 <= len(PROJECTS) <= 10
    assert all(p.version.count(".") >= 1 for p in PROJECTS)
    for shape in ("src layout", "flat", "tox", "nox", "hatch", "poetry", "C extension"):
        assert shape in shapes, shape
    assert sum(p.registry == "npm" for p in PROJECTS) >= 2
    assert Path(__file__).with_name("projects.toml").is_file()
