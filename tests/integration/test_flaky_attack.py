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
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral.supervisor.contracts.checks import run_check
from corral.supervisor.contracts.environment import CheckEnvironment
from corral.supervisor.models import CheckResult, CheckVerdict, ContractCheck
from corral.supervisor.sandbox import SandboxPolicy, active_policy, set_active_policy
from tests.conftest import git
from tests.fakes.scripted import contract

PY = sys.executable
ROOT = Path(__file__).resolve().parents[2]
SUITE = ContractCheck(name="tests", command=f"{PY} -m pytest -q -p no:cacheprovider tests")

CALC = "def add(a, b):\n    return a + b\n"
TEST_CALC = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"

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

PLACES = {
    "home": 'os.environ["HOME"]',
    "tmpdir": 'os.environ["TMPDIR"]',
    "beside the home": 'Path(os.environ["HOME"]).parent',
}


@pytest.fixture(autouse=True)
def interpreter_visible() -> Iterator[None]:
    """Checks get a private /tmp: a venv under /tmp (a CI clone) runs unconfined."""
    before = active_policy()
    if Path(PY).absolute().is_relative_to("/tmp"):
        set_active_policy(SandboxPolicy(enabled=False))
    try:
        yield
    finally:
        set_active_policy(before)


def _confined() -> None:
    if not active_policy().enabled:
        pytest.skip("checks run unconfined here (a venv under /tmp): no private HOME to test")


async def _baseline(tree: Path, env: CheckEnvironment | None = None) -> CheckResult:
    (tree / "tests").mkdir()
    (tree / "calc.py").write_text(CALC)
    (tree / "tests" / "test_calc.py").write_text(TEST_CALC)
    base = await run_check(SUITE, tree, untouched=True, environment=env)
    assert base.passed and base.tests is not None
    assert base.tests.passed == ["tests.test_calc::test_add"]
    return base


@pytest.mark.slow
@pytest.mark.parametrize("place", sorted(PLACES))
async def test_a_marker_the_first_run_lays_in_its_private_dirs_is_gone_on_the_rerun(
    tmp_path: Path, place: str
) -> None:
    _confined()
    base = await _baseline(tmp_path)
    (tmp_path / "calc.py").write_text(RIGGED.format(where=PLACES[place]))
    verified = await run_check(SUITE, tmp_path, before=base)
    # re-run at once (a test that passed on the untouched tree failed), and
    # the re-run found no marker: wrong again, a regression, never "flaky"
    assert not verified.passed and verified.verdict is CheckVerdict.FAILS, verified.output_tail
    assert verified.flaky == []
    assert "tests.test_calc::test_add" in verified.reason


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
    (tree / "calc.py").write_text(RIGGED.format(where='os.environ["CORRAL_ENV"]'))
    verified = await run_check(SUITE, tree, before=base, environment=environment)
    assert not verified.passed and verified.flaky == []
    assert not (env_dir / ".warm").exists()
    assert "Read-only file system" in verified.output_tail


# -- headless: corral run --yes --deliver branch, the marker in the checkout ------------------

AGENT = """import pathlib
pathlib.Path("calc.py").write_text({rigged!r})
"""


@pytest.mark.slow
def test_corral_run_never_delivers_headless_a_check_that_passed_only_on_its_rerun(
    repo: Path, tmp_path: Path
) -> None:
    (repo / "tests").mkdir()
    (repo / "calc.py").write_text(CALC)
    (repo / "tests" / "test_calc.py").write_text(TEST_CALC)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "calc")
    home = tmp_path / "home"
    home.mkdir()
    config = home / "config.toml"
    config.write_text("[supervisor]\nrepair_invokes = 0\n")
    checks = contract(
        ("tests", f"PYTHONPATH=. {PY} -m pytest -q -p no:cacheprovider tests"),
        description="make add faster",
    )
    (tmp_path / "contract.json").write_text(json.dumps(checks.model_dump(mode="json")))
    agent = tmp_path / "agent.py"
    # the marker goes in the exam's checkout, beside calc.py
    agent.write_text(AGENT.format(rigged=RIGGED.format(where="Path(__file__).parent")))
    env = dict(os.environ, CORRAL_HOME=str(home), CORRAL_CONFIG=str(config))
    env["CORRAL_TMUX_SOCKET_DIR"] = str(home / "tmux")
    env["PYTHONPATH"] = str(ROOT)
    argv = [PY, "-m", "corral.tui.cli", "run", "--repo", str(repo), "--intent", "make add faster"]
    argv += ["--contract", str(tmp_path / "contract.json"), "--agent", f"oneshot:{PY} {agent}"]
    argv += ["--yes", "--deliver", "branch", "--on-question", "approve", "--json"]
    try:
        proc = subprocess.run(
            argv,
            cwd=repo,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        for socket in (home / "tmux").glob("*"):
            subprocess.run(["tmux", "-S", str(socket), "kill-server"], capture_output=True)
    assert proc.returncode == 10, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    assert "not delivered" in proc.stderr
    assert "passed only on an immediate re-run (tests.test_calc::test_add failed" in proc.stderr
    assert "corral approve" in proc.stderr
    assert git(repo, "branch", "--list", "corral/*").strip() == ""
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["state"] == "needs_approval" and result["exit_code"] == 10
