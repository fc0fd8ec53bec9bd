"""`corral run --check CMD` replaces the drafted checks, not the drafted
setup (a pytest check needs the project installed as much as a drafted one
does); `--setup CMD` / `--no-setup` replace the setup of any contract, the
headless way to fix a setup where the console has /setup."""

from __future__ import annotations

from pathlib import Path

import pytest

from corral.supervisor.contracts.drafting import DraftRequest, FixedDrafter, GivenSetup
from corral.supervisor.contracts.files import checks_contract
from corral.supervisor.errors import CorralError
from corral.supervisor.models import ContractCheck, OutcomeContract


def python_project(root: Path) -> Path:
    (root / "tests").mkdir(parents=True)
    (root / "pyproject.toml").write_text("[project]\nname = 'calc'\nversion = '1.0'\n")
    (root / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (root / "tests" / "test_calc.py").write_text("def test_add():\n    pass\n")
    return root


def test_given_checks_keep_the_drafted_setup(tmp_path: Path) -> None:
    root = python_project(tmp_path / "calc")
    contract = checks_contract(["python -m pytest -q"], root=root)
    assert [c.command for c in contract.checks] == ["python -m pytest -q"]
    assert contract.setup[0] == 'python3 -m venv "$CORRAL_ENV"'
    assert any("pip install" in line and "-e ." in line for line in contract.setup)
    assert "Setup drafted from the repository (--setup CMD replaces it" in contract.description


def test_a_given_setup_replaces_the_drafted_one_and_no_setup_drops_it(tmp_path: Path) -> None:
    root = python_project(tmp_path / "calc")
    given = checks_contract(["pytest"], setup=["pip install -e ."], root=root)
    assert given.setup == ["pip install -e ."]
    assert checks_contract(["pytest"], setup=[], root=root).setup == []
    with pytest.raises(CorralError, match="--setup needs a shell command"):
        checks_contract(["pytest"], setup=["  "], root=root)


async def test_a_given_setup_replaces_a_drafted_contracts_setup(tmp_path: Path) -> None:
    drafted = OutcomeContract(
        description="drafted",
        setup=["pip install nothing-that-works"],
        checks=[ContractCheck(name="tests", command="pytest")],
    )
    drafter = GivenSetup(FixedDrafter(drafted), ['"$CORRAL_ENV/bin/python" -m pip install x'])
    request = DraftRequest(session_id="s", intent="x", repo=tmp_path, worktree=None)
    contract = await drafter.draft(request)
    assert contract.setup == ['"$CORRAL_ENV/bin/python" -m pip install x']
    assert contract.checks == drafted.checks
    assert "given with --setup" in contract.description


async def test_setup_add_runs_after_the_drafted_setup(tmp_path: Path) -> None:
    """What a *cannot run* fix says to copy: `--setup-add CMD` keeps the
    drafted setup (the project installed) and installs one thing more."""
    drafted = OutcomeContract(
        description="drafted",
        setup=['python3 -m venv "$CORRAL_ENV"', "pip install -e ."],
        checks=[ContractCheck(name="tests", command="pytest")],
    )
    drafter = GivenSetup(FixedDrafter(drafted), None, ["pip install PyYAML"])
    request = DraftRequest(session_id="s", intent="x", repo=tmp_path, worktree=None)
    contract = await drafter.draft(request)
    assert contract.setup == [*drafted.setup, "pip install PyYAML"]
    assert "added with --setup-add: pip install PyYAML" in contract.description
