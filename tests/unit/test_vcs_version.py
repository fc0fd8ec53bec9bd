"""A project versioned from git tags (setuptools-scm, hatch-vcs) in a
checkout without tags installs as the version its sdist metadata or its
version file says, not `0.1.dev…` (which sent pip back to a pytest from
2017 and the suite to "missing module: UserDict"); gate 1 says so."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from corral.supervisor.contracts.setup_draft import propose_setup
from tests.conftest import git, init_repo

SCM_PYPROJECT = (
    "[build-system]\nrequires = ['setuptools>=64', 'setuptools-scm>=8']\n"
    "build-backend = 'setuptools.build_meta'\n\n"
    "[project]\nname = 'tagged.lib'\ndynamic = ['version']\n\n"
    "[tool.setuptools_scm]\nversion_file = 'tagged_lib/_version.py'\n"
)


def _repo(tmp_path: Path, pyproject: str = SCM_PYPROJECT) -> Path:
    repo = init_repo(tmp_path / "repo")
    (repo / "pyproject.toml").write_text(pyproject)
    (repo / "tagged_lib").mkdir()
    (repo / "tagged_lib" / "__init__.py").write_text("")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "lib")
    return repo


def _pip_line(root: Path) -> str:
    proposal = propose_setup(root)
    return next(c for c in proposal.commands if "pip install" in c)


def test_an_sdist_without_tags_installs_as_its_pkg_info_version(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    (repo / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: tagged.lib\nVersion: 2.3.1\n")
    proposal = propose_setup(repo)
    line = next(c for c in proposal.commands if "pip install" in c)
    assert line.startswith("SETUPTOOLS_SCM_PRETEND_VERSION_FOR_TAGGED_LIB=2.3.1 ")
    note = next(n for n in proposal.notes if "git tags" in n)
    assert "installed as 2.3.1, read from PKG-INFO" in note


def test_the_version_file_is_read_when_there_is_no_pkg_info(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    (repo / "tagged_lib" / "_version.py").write_text(
        "__version__ = version = '4.0.2.dev3+g1234abc'\n"
    )
    assert _pip_line(repo).startswith("SETUPTOOLS_SCM_PRETEND_VERSION_FOR_TAGGED_LIB=4.0.2.dev3 ")


def test_a_checkout_with_a_tag_keeps_its_own_version(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    (repo / "PKG-INFO").write_text("Version: 2.3.1\n")
    git(repo, "tag", "v2.3.1")
    assert "PRETEND" not in _pip_line(repo)
    worktree = tmp_path / "wt"  # a worktree reads the shared tags
    git(repo, "worktree", "add", "-q", str(worktree))
    (worktree / "PKG-INFO").write_text("Version: 2.3.1\n")
    assert "PRETEND" not in _pip_line(worktree)


def test_a_hostile_version_is_never_put_in_the_setup(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    (repo / "PKG-INFO").write_text("Version: 1.0;touch${IFS}/tmp/pwned\n")
    line = _pip_line(repo)
    assert "PRETEND" not in line and "pwned" not in line
    notes = " ".join(propose_setup(repo).notes)
    assert "tag the checkout" in notes and "SETUPTOOLS_SCM_PRETEND_VERSION" in notes


@pytest.mark.slow
def test_the_drafted_setup_really_installs_the_pkg_info_version(tmp_path: Path) -> None:
    """Real pip and setuptools-scm from PyPI: the installed metadata says 2.3.1."""
    repo = _repo(tmp_path)
    (repo / "PKG-INFO").write_text("Version: 2.3.1\n")
    env = dict(os.environ, CORRAL_ENV=str(tmp_path / "env"))
    for command in propose_setup(repo).commands:
        done = subprocess.run(
            command, shell=True, cwd=repo, env=env, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stderr[-2000:]
    python = tmp_path / "env" / "bin" / "python"
    read = "import importlib.metadata as m; print(m.version('tagged.lib'))"
    shown = subprocess.run([python, "-c", read], capture_output=True, text=True, check=True)
    assert shown.stdout.strip() == "2.3.1"
