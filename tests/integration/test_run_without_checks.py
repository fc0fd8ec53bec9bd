"""A headless `corral run` in a repository where nothing says how to check
the work stops at gate 1 (exit 3) and says how to continue, with flags a
headless run can use."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import git, init_repo
from tests.integration.test_cli import corral


@pytest.mark.slow
def test_nothing_recognised_stops_at_gate_one_and_names_the_flags(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "repo")
    (repo / "README.md").write_text("just words\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "readme")
    home = tmp_path / "home"
    out = corral(
        "run", "--repo", str(repo), "--intent", "x", "--engine", "external:demo", home=home
    )
    assert out.returncode == 3, out.stderr
    assert "stopped at gate 1" in out.stderr
    assert '--check "CMD"' in out.stderr and "--contract FILE" in out.stderr
    assert "/check name command" not in out.stderr.splitlines()[-1]  # not a console command

    # and the way it names works: the same run with a --check gets past drafting
    given = corral(
        "run",
        "--repo",
        str(repo),
        "--intent",
        "x",
        "--engine",
        "external:demo",
        "--check",
        "test -e README.md",
        home=home,
    )
    assert given.returncode == 3, given.stderr  # at the contract gate, with a contract
    assert "stopped at gate 1: nothing" not in given.stderr
