"""CI jobs that matter: only jobs that test, lint, type-check or build are
listed as not verified; release, publish, label, docs deployment, stale-bot
and dependabot jobs are ignored; plain `run:` steps of test/lint/type tools
the setup installs are offered as checks."""

from __future__ import annotations

from pathlib import Path

from corral.supervisor.contracts.conventions import ci_jobs, draft_contract

CI = """\
name: CI
on: [push, pull_request]
jobs:
  tests:
    name: Tests (${{ matrix.python }})
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - run: pip install -e .[dev]
      - run: python -m pytest -q
  lint:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - name: ruff
        run: ruff check .
      - run: |
          mypy src
          echo done
  typecheck:
    runs-on: ubuntu-latest
    steps:
      - run: mypy src
  coverage-comment:
    runs-on: ubuntu-latest
    steps:
      - run: echo comment
"""
RELEASE = """\
name: Release
on:
  push:
    tags: ["v*"]
jobs:
  build:
    runs-on: ubuntu-latest
    steps:
      - run: python -m build
  pypi-publish:
    needs: build
    steps:
      - uses: pypa/gh-action-pypi-publish@release/v1
"""
HOUSEKEEPING = """\
jobs:
  label:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/labeler@v5
  stale:
    steps:
      - uses: actions/stale@v9
  dependabot-automerge:
    steps:
      - run: gh pr merge --auto
  deploy-docs:
    steps:
      - run: mkdocs gh-deploy
  build-docs:
    steps:
      - run: sphinx-build -W docs out
"""
PYPROJECT = """\
[project]
name = "lib"
version = "1"
[project.optional-dependencies]
dev = ["pytest", "ruff", "mypy"]
[tool.pytest.ini_options]
testpaths = ["tests"]
"""


def make_repo(root: Path) -> Path:
    workflows = root / ".github" / "workflows"
    workflows.mkdir(parents=True)
    (workflows / "ci.yml").write_text(CI)
    (workflows / "release.yml").write_text(RELEASE)
    (workflows / "housekeeping.yaml").write_text(HOUSEKEEPING)
    (root / "pyproject.toml").write_text(PYPROJECT)
    (root / "src" / "lib").mkdir(parents=True)
    (root / "tests").mkdir()
    return root


def test_only_jobs_that_verify_code_matter(tmp_path: Path) -> None:
    jobs = {j.name: j.matters for j in ci_jobs(make_repo(tmp_path))}
    assert jobs == {
        "Tests (${{ matrix.python }})": True,
        "lint": True,
        "typecheck": True,
        "coverage-comment": False,
        "build": False,  # the release workflow's build is part of publishing
        "pypi-publish": False,
        "label": False,
        "stale": False,
        "dependabot-automerge": False,
        "deploy-docs": False,
        "build-docs": True,
    }


def test_run_steps_are_read_from_one_line_and_block_scalars(tmp_path: Path) -> None:
    lint = next(j for j in ci_jobs(make_repo(tmp_path)) if j.name == "lint")
    assert lint.runs == ("ruff check .", "mypy src\necho done")
    assert lint.runnable() == [("ruff", "ruff check .")]


def test_the_draft_offers_runnable_ci_steps_and_ignores_publishing_jobs(tmp_path: Path) -> None:
    contract = draft_contract(make_repo(tmp_path), "x", path=str(tmp_path / "no-tools"))
    commands = {c.name: c.command for c in contract.checks}
    assert commands == {
        "tests": "python3 -m pytest -q -p no:cacheprovider",
        "ci_ruff": "ruff check .",
        "ci_mypy": "mypy src",
    }
    assert "ci_ruff: `ruff check .` (CI job 'lint' runs it)" in contract.description
    gaps = contract.description.split("Not verified by this contract:")[1]
    assert "'build-docs'" in gaps
    # the tests job runs pytest, which the tests check runs too
    assert "Tests (" not in gaps
    for ignored in (
        "pypi-publish",
        "label",
        "stale",
        "dependabot",
        "deploy-docs",
        "coverage-comment",
    ):
        assert ignored not in gaps
    # lint and typecheck are run by the offered checks, so they are not listed as gaps
    assert "'lint'" not in gaps and "'typecheck'" not in gaps


def test_a_ci_tool_the_setup_does_not_install_is_not_offered(tmp_path: Path) -> None:
    root = make_repo(tmp_path)
    (root / "pyproject.toml").write_text(PYPROJECT.replace(', "ruff", "mypy"', ""))
    contract = draft_contract(root, "x", path=str(tmp_path / "no-tools"))
    assert [c.name for c in contract.checks] == ["tests"]
    gaps = contract.description.split("Not verified by this contract:")[1]
    assert "'lint'" in gaps and "'typecheck'" in gaps


def test_a_ci_tool_only_in_an_extra_the_setup_skips_is_not_offered(tmp_path: Path) -> None:
    root = make_repo(tmp_path)
    (root / "pyproject.toml").write_text(
        PYPROJECT.replace(
            'dev = ["pytest", "ruff", "mypy"]', 'dev = ["pytest", "mypy>=1"]\nlint = ["ruff"]'
        )
    )
    contract = draft_contract(root, "x", path=str(tmp_path / "no-tools"))
    assert [c.name for c in contract.checks] == ["tests", "ci_mypy"]
