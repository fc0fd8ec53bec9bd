"""The flaky re-run as an attack: work whose code fails the first time and
passes on the immediate re-run, because the first run left a marker the
second one finds. Real pytest, real bubblewrap (the checks' sandbox), real
`corral run`.

Where the marker can go, and what stops it:
- the check's private HOME, temp dir or anything beside them: each run starts
  from an empty private dir, so the re-run fails too (on the old code both
  runs shared it and the work passed as *flaky*);
- the environment (`$CORRAL_ENV`): read-only to a check, the marker cannot be
  laid;
- the checkout itself (or the clock): not made unseeable — a re-run cannot be
  told apart from the first run for sure — so a headless `corral run --yes
  --deliver` never delivers a check that passed only on its re-run: it exits
  10 and the session waits at approval for a person (on the old code it was
  delivered, exit 0).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from corral.supervisor.contracts.checks import run_check
from corral.supervisor.contracts.environment import CheckEnvironment
from corral.supervisor.models import CheckResult, CheckVerdict, ContractCheck
from corral.supervisor.sandbox import active_policy
from tests.conftest import git
from tests.fakes.flaky import (
    FLAKY_TEST,
    INTENT,
    PY,
    calc_contract,
    calc_files,
    calc_project,
    rigged,
    rigged_agent,
)
from tests.fakes.headless import corral_home

pytestmark = pytest.mark.usefixtures("interpreter_visible")
SUITE = ContractCheck(name="tests", command=f"{PY} -m pytest -q -p no:cacheprovider tests")

PLACES = {
    "home": 'os.environ["HOME"]',
    "tmpdir": 'os.environ["TMPDIR"]',
    "beside the home": 'Path(os.environ["HOME"]).parent',
}


def _confined() -> None:
    if not active_policy().enabled:
        pytest.skip("checks run unconfined here (a venv under /tmp): no private HOME to test")


async def _baseline(tree: Path, env: CheckEnvironment | None = None) -> CheckResult:
    calc_files(tree)
    base = await run_check(SUITE, tree, untouched=True, environment=env)
    assert base.passed and base.tests is not None
    assert base.tests.passed == [FLAKY_TEST]
    return base


@pytest.mark.slow
@pytest.mark.parametrize("place", sorted(PLACES))
async def test_a_marker_the_first_run_lays_in_its_private_dirs_is_gone_on_the_rerun(
    tmp_path: Path, place: str
) -> None:
    _confined()
    base = await _baseline(tmp_path)
    (tmp_path / "calc.py").write_text(rigged(PLACES[place]))
    verified = await run_check(SUITE, tmp_path, before=base)
    # re-run at once (a test that passed on the untouched tree failed), and
    # the re-run found no marker: wrong again, a regression, never "flaky"
    assert not verified.passed and verified.verdict is CheckVerdict.FAILS, verified.output_tail
    assert verified.flaky == []
    assert FLAKY_TEST in verified.reason


@pytest.mark.slow
async def test_the_environment_is_read_only_to_a_check_so_no_marker_is_laid_there(
    tmp_path: Path,
) -> None:
    _confined()
    env_dir = tmp_path / "env"
    env_dir.mkdir()
    tree = tmp_path / "tree"
    tree.mkdir()
    environment = CheckEnvironment(env_dir=env_dir, worktree=tree, shared=False)
    base = await _baseline(tree, environment)
    (tree / "calc.py").write_text(rigged('os.environ["CORRAL_ENV"]'))
    verified = await run_check(SUITE, tree, before=base, environment=environment)
    assert not verified.passed and verified.flaky == []
    assert not (env_dir / ".warm").exists()
    assert "Read-only file system" in verified.output_tail


# -- headless: corral run --yes --deliver branch, the marker in the checkout ------------------


@pytest.mark.slow
def test_corral_run_never_delivers_headless_a_check_that_passed_only_on_its_rerun(
    repo: Path, tmp_path: Path
) -> None:
    calc_project(repo)
    (tmp_path / "contract.json").write_text(json.dumps(calc_contract().model_dump(mode="json")))
    agent = rigged_agent(tmp_path / "agent.py")  # the marker goes beside calc.py
    argv = ["run", "--repo", str(repo), "--intent", INTENT]
    argv += ["--contract", str(tmp_path / "contract.json"), "--agent", f"oneshot:{PY} {agent}"]
    argv += ["--yes", "--deliver", "branch", "--on-question", "approve", "--json"]
    with corral_home(tmp_path / "home") as corral:
        proc = corral(*argv, cwd=repo)
    assert proc.returncode == 10, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    assert "not delivered" in proc.stderr
    assert f"passed only on an immediate re-run ({FLAKY_TEST} failed" in proc.stderr
    assert "--accept-flaky" in proc.stderr  # the way on, said by the gate
    assert git(repo, "branch", "--list", "corral/*").strip() == ""
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["state"] == "needs_approval" and result["exit_code"] == 10
