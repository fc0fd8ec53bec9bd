"""A suite whose conftest hooks only an older pytest accepts: the drafted
setup finds the pytest it was written for, and never overrides a project
that pins its own."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from corral.supervisor.contracts.conventions import draft_contract

OLD_HOOK = (
    "def pytest_pycollect_makemodule(path, parent):\n    return None\n\n\n"
    "def pytest_configure(config):\n    pass\n"
)
# A stand-in for the environment's python: its "pytest" rejects the hooks
# from major version 9 on; "pip install pytest<N" installs N-1. The real
# pytest and PyPI are what the corpus runs (wrapt 1.16.0); here only the
# step's own logic is under test, without the network.
FAKE_PYTHON = """#!/bin/bash
here=$(dirname "$0")
v=$(cat "$here/pytest-version")
if [ "$1 $2" = "-m pytest" ]; then
  echo "$*" >> "$here/collected"
  if [ "$v" -ge 9 ]; then echo "pluggy._manager.PluginValidationError: Plugin conftest.py"; exit 1; fi
  echo "3 tests collected"; exit 0
fi
if [ "$1" = "-c" ]; then echo "$v"; exit 0; fi
if [ "$1 $2 $3" = "-m pip install" ]; then
  spec="${@: -1}"; echo "$spec" >> "$here/installed"; echo "$(( ${spec#pytest<} - 1 ))" > "$here/pytest-version"; exit 0
fi
exit 2
"""


def _repo(tmp_path: Path, *, conftest: str, extra: dict[str, str] | None = None) -> Path:
    root = tmp_path / "repo"
    files = {
        "setup.py": "from setuptools import setup\nsetup(name='x')\n",
        "tests/test_x.py": "def test_x():\n    pass\n",
        "tests/conftest.py": conftest,
        **(extra or {}),
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


def _env(tmp_path: Path, version: int) -> Path:
    env = tmp_path / "env"
    (env / "bin").mkdir(parents=True)
    python = env / "bin" / "python"
    python.write_text(FAKE_PYTHON, encoding="utf-8")
    python.chmod(0o755)
    (env / "bin" / "pytest-version").write_text(str(version), encoding="utf-8")
    return env


def _run_last_step(root: Path, env: Path) -> subprocess.CompletedProcess[str]:
    step = draft_contract(root, "keep it working").setup[-1]
    return subprocess.run(
        ["bash", "-c", step],
        cwd=root,
        env={"CORRAL_ENV": str(env), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_a_pytest_that_rejects_the_conftest_hooks_is_stepped_down_until_one_accepts(
    tmp_path: Path,
) -> None:
    root = _repo(tmp_path, conftest=OLD_HOOK)
    contract = draft_contract(root, "keep it working")
    assert "tests/conftest.py: pytest_pycollect_makemodule, pytest_configure" in (
        contract.description
    )
    env = _env(tmp_path, version=10)
    done = _run_last_step(root, env)
    assert done.returncode == 0, done.stderr
    # 10 and 9 reject the hooks: two steps down, each said, then 8 accepts
    assert (env / "bin" / "installed").read_text().split() == ["pytest<10", "pytest<9"]
    assert "[corral] pytest 10 rejects the suite's conftest hooks" in done.stdout
    assert "installing pytest<9" in done.stdout
    # only the directories whose conftest defines hooks are collected
    assert all(
        line.endswith(" tests") for line in (env / "bin" / "collected").read_text().splitlines()
    )


def test_a_pytest_that_accepts_the_hooks_is_left_as_installed(tmp_path: Path) -> None:
    root = _repo(tmp_path, conftest=OLD_HOOK)
    env = _env(tmp_path, version=8)
    done = _run_last_step(root, env)
    assert done.returncode == 0, done.stderr
    assert not (env / "bin" / "installed").exists()
    assert done.stdout == ""


@pytest.mark.parametrize(
    ("conftest", "extra"),
    [
        # fixtures only: nothing for a pytest to reject
        ("import pytest\n\n\n@pytest.fixture\ndef thing():\n    return 1\n", None),
        # the project pins its pytest: its choice, never overridden
        (OLD_HOOK, {"requirements-dev.txt": "pytest==9.0.1\n"}),
    ],
    ids=["fixtures-only", "pinned-by-the-project"],
)
def test_no_runner_step_without_hooks_or_against_the_projects_own_pin(
    tmp_path: Path, conftest: str, extra: dict[str, str] | None
) -> None:
    contract = draft_contract(_repo(tmp_path, conftest=conftest, extra=extra), "x")
    assert contract.setup
    assert not any("PluginValidationError" in c for c in contract.setup)
