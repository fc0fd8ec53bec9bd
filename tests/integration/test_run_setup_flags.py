"""`corral run --check` keeps the drafted setup; `--setup CMD` replaces it
(and a drafted contract's), `--no-setup` drops it: the operator's headless
way out when a check cannot run for its setup."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import git, init_repo
from tests.integration.test_cli import corral


def _events(stdout: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def _proposed_setup(stdout: str) -> list[str]:
    for event in _events(stdout):
        if event.get("kind") == "contract_proposed":
            text = json.dumps(event)
            start = text.index('"setup": ')
            return list(json.loads(text[start + 9 : text.index("]", start) + 1]))
    raise AssertionError("no contract was proposed")


def _python_repo(tmp_path: Path) -> Path:
    repo = init_repo(tmp_path / "repo")
    (repo / "pyproject.toml").write_text("[project]\nname = 'calc'\nversion = '1.0'\n")
    (repo / "tests").mkdir()
    (repo / "tests" / "test_a.py").write_text("def test_a():\n    pass\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "calc")
    return repo


@pytest.mark.slow
def test_a_given_setup_replaces_the_drafted_one(tmp_path: Path) -> None:
    repo = _python_repo(tmp_path)
    run = ("run", "--repo", str(repo), "--intent", "x", "--engine", "external:demo", "--json")
    out = corral(
        *run,
        "--check",
        "test -e tests/test_a.py",
        "--setup",
        "echo given",
        "--setup-add",
        "echo more",
        home=tmp_path,
    )
    assert out.returncode == 3, out.stderr  # at gate 1, with the given setup run
    assert _proposed_setup(out.stdout) == ["echo given", "echo more"]
    both = corral(*run, "--check", "true", "--setup", "x", "--no-setup", home=tmp_path)
    assert both.returncode == 2 and "not both" in both.stderr


@pytest.mark.slow
def test_given_checks_keep_the_drafted_setup(tmp_path: Path) -> None:
    """The issue's case: `--check CMD` dropped the drafted setup, so a pytest
    check had no project installed and the operator's way out failed too."""
    repo = _python_repo(tmp_path)
    out = corral(
        "run",
        "--repo",
        str(repo),
        "--intent",
        "x",
        "--engine",
        "external:demo",
        "--json",
        "--check",
        "true",
        home=tmp_path,
    )
    setup = _proposed_setup(out.stdout)
    assert setup and setup[0] == 'python3 -m venv "$CORRAL_ENV"', out.stderr
