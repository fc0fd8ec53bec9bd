"""A real flaky check, for the tests of the flaky re-run and its gate: a
project whose one pytest test passes on the untouched tree, and work that
fails it the first time it runs (laying a marker) and passes once the marker
is there — on the immediate re-run of the check. Where the marker goes
decides what stops it (tests/integration/test_flaky_attack.py); beside
calc.py, in the checkout the checks run in, nothing can: that pass is held
at the approval gate for a person (tests/integration/test_flaky_gate.py)."""

from __future__ import annotations

import sys
from collections.abc import Collection
from pathlib import Path
from typing import Any

from corral.supervisor.api import Supervisor
from corral.supervisor.models import OutcomeContract
from corral.supervisor.states import CoderState, NeedsYou
from tests.conftest import SupervisorFactory, commit_files
from tests.fakes.scripted import ScriptedDrafter, ScriptedEngine, Write, contract

PY = sys.executable
INTENT = "make add faster"
CALC = "def add(a, b):\n    return a + b\n"
TEST_CALC = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
FLAKY_TEST = "tests.test_calc::test_add"  # the test that fails once, then passes

# the rigged work: wrong the first time (laying its marker), right once the
# marker is there — a "flake" the work made
RIGGED = """import os
from pathlib import Path

_MARKER = Path({where}) / ".warm"


def add(a, b):
    if not _MARKER.exists():
        _MARKER.write_text("")
        return a - b
    return a + b
"""
BESIDE_THE_CODE = "Path(__file__).parent"  # the checkout the checks run in

# an agent for `--agent oneshot:python agent.py`: writes the rigged work
AGENT = """import pathlib
pathlib.Path("calc.py").write_text({rigged!r})
"""


def rigged(where: str = BESIDE_THE_CODE) -> str:
    """calc.py that fails once, leaving its marker in `where` (Python)."""
    return RIGGED.format(where=where)


def calc_files(root: Path) -> None:
    """The untouched project: calc.py and its passing test."""
    (root / "tests").mkdir(exist_ok=True)
    (root / "calc.py").write_text(CALC)
    (root / "tests" / "test_calc.py").write_text(TEST_CALC)


def calc_project(repo: Path) -> None:
    """The untouched project, committed in `repo`."""
    commit_files(repo, {"calc.py": CALC, "tests/test_calc.py": TEST_CALC}, "calc")


def calc_contract() -> OutcomeContract:
    """The project's test suite as the one check (judged per test)."""
    return contract(
        ("tests", f"PYTHONPATH=. {PY} -m pytest -q -p no:cacheprovider tests"),
        description=INTENT,
    )


def rigged_agent(path: Path) -> Path:
    """A one-shot agent script at `path` that writes the rigged work."""
    path.write_text(AGENT.format(rigged=rigged()))
    return path


async def flaky_session(
    make_supervisor: SupervisorFactory,
    repo: Path,
    *,
    decided: Collection[NeedsYou] = (),
    **settings: Any,
) -> tuple[Supervisor, str]:
    """A session at gate 2 whose one check passed only on its re-run (the
    needs in `decided` decided ahead, as `corral run --yes --deliver` does)."""
    calc_project(repo)
    sup = await make_supervisor(
        drafter=ScriptedDrafter([calc_contract()]),
        engine=ScriptedEngine([[Write("calc.py", rigged())]]),
        repair_invokes=0,
        **settings,
    )
    sid = (await sup.start(INTENT, repo, decided=decided)).session_id
    await sup.wait_for(sid, needs=True, timeout=60)  # a start that decided ahead did not wait
    await sup.confirm(sid)
    row = await sup.wait_for(sid, needs=True, timeout=180)
    s = sup.get(sid).session
    assert row.state is CoderState.NEEDS_APPROVAL, (row.state, s.error, s.last_check_results)
    assert [r.flaky for r in s.last_check_results] == [[FLAKY_TEST]]
    return sup, sid
