"""A check that passed only on its immediate re-run (a test failed, then
passed: flaky) is delivered only on a person's explicit acknowledgement, on
every path: the approval gate holds it (`accept_flaky`), so the facade, the
control socket, `corral approve`, `corral run --on-question approve` and the
console all stop there. A flake is exactly where work rigged on state or
timing hides (tests/fakes/flaky.py: real pytest, a marker beside the code in
the checkout the checks run in). On the old code every path but a headless
`corral run` delivered it without anyone having been shown the failure."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from corral.supervisor.control.server import ControlServer
from corral.supervisor.errors import FlakyPassHeld
from corral.supervisor.remote import AsyncControlClient
from corral.supervisor.states import CoderState, short_id
from tests.conftest import SupervisorFactory, git, plan_texts
from tests.fakes.flaky import (
    FLAKY_TEST,
    INTENT,
    PY,
    calc_contract,
    calc_project,
    flaky_session,
    rigged,
    rigged_agent,
)
from tests.fakes.headless import corral_home
from tests.fakes.scripted import ScriptedDrafter, ScriptedEngine, Write

pytestmark = pytest.mark.usefixtures("interpreter_visible")
S = CoderState
ACCEPTED = "Delivered on the acknowledgement of the operator"


def _held(refusal: BaseException, sid: str) -> None:
    said = str(refusal)
    assert "is not delivered" in said and FLAKY_TEST in said, said
    assert "passed only on an immediate re-run" in said
    assert f"corral approve {short_id(sid)} --accept-flaky" in said


@pytest.mark.slow
async def test_an_approve_without_the_acknowledgement_is_held_and_one_with_it_delivers(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    sup, sid = await flaky_session(make_supervisor, repo)
    for delivery in ("branch", "checkout"):  # what `--yes`, the board's quick approve sent
        with pytest.raises(FlakyPassHeld) as held:
            await sup.approve(sid, delivery=delivery)
        _held(held.value, sid)
    assert sup.get(sid).session.state is S.NEEDS_APPROVAL
    assert git(repo, "branch", "--list", "corral/*").strip() == ""
    assert (repo / "calc.py").read_text() != rigged()
    result = await sup.approve(sid, delivery="branch", accept_flaky=True)
    assert result.state is S.MERGED and result.branch
    # who let it through, and what they were shown, is said where it is kept
    said = [t for t in plan_texts(sup, sid) if t.startswith(ACCEPTED)]
    assert len(said) == 1 and FLAKY_TEST in said[0], plan_texts(sup, sid)
    message = git(repo, "log", "-1", "--format=%B", result.branch)
    assert f"Corral-Flaky: tests passed on its re-run after {FLAKY_TEST} failed" in message


@pytest.mark.slow
async def test_the_socket_call_is_held_alike_and_says_so_by_its_kind(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    sup, sid = await flaky_session(make_supervisor, repo)
    server = ControlServer(sup)
    await server.start()
    client = await AsyncControlClient.connect(sup.state_dir)
    try:
        with pytest.raises(FlakyPassHeld) as held:  # its kind crosses the socket
            await client.call("approve", session_id=sid, delivery="branch")
        _held(held.value, sid)
        assert sup.get(sid).session.state is S.NEEDS_APPROVAL
        result = await client.call("approve", session_id=sid, accept_flaky=True)
    finally:
        await client.close()
        await server.close()
    assert result["state"] == "merged"
    assert git(repo, "branch", "--list", "corral/*").strip() != ""


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_corral_run_through_an_owner_then_corral_approve_need_the_acknowledgement(
    repo: Path, tmp_path: Path
) -> None:
    calc_project(repo)
    (tmp_path / "c.json").write_text(json.dumps(calc_contract().model_dump(mode="json")))
    agent = rigged_agent(tmp_path / "agent.py")
    with corral_home(tmp_path / "home") as corral, corral.serving(tmp_path):

        def cli(*args: str) -> subprocess.CompletedProcess[str]:
            return corral(*args, cwd=tmp_path, timeout=240)

        out = cli(
            "run", "--repo", str(repo), "--intent", INTENT, "--contract", str(tmp_path / "c.json"),
            "--agent", f"oneshot:{PY} {agent}", "--yes", "--deliver", "branch",
            "--on-question", "approve", "--json",
        )  # fmt: skip
        assert out.returncode == 10, (out.returncode, out.stdout[-1500:], out.stderr[-1500:])
        assert FLAKY_TEST in out.stderr and "--accept-flaky" in out.stderr
        sid = json.loads(out.stdout.splitlines()[-1])["session_id"]
        shown = cli("get", sid)
        assert "passed only on an immediate re-run" in shown.stdout
        assert f"    tests: {FLAKY_TEST} failed, then passed" in shown.stdout
        refused = cli("approve", sid, "--delivery", "branch")
        assert refused.returncode == 2 and "--accept-flaky" in refused.stderr, refused.stderr
        assert git(repo, "branch", "--list", "corral/*").strip() == ""
        accepted = cli("approve", sid, "--delivery", "branch", "--accept-flaky")
        assert accepted.returncode == 0, accepted.stderr
        assert accepted.stdout.startswith("passed only on an immediate re-run")  # shown first
        assert "delivered" in accepted.stdout
        watched = cli("get", sid, "--json")
    assert git(repo, "branch", "--list", "corral/*").strip() != ""
    assert json.loads(watched.stdout)["session"]["state"] == "merged"


@pytest.mark.slow
async def test_a_delivery_tree_that_passes_only_on_its_rerun_is_held_too(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    """The verified tree carries the marker (its checks pass at once); the
    part approved leaves it out, so the checks on that part pass only on
    their re-run: held like any flaky pass, delivered on the acknowledgement."""
    calc_project(repo)
    sup = await make_supervisor(
        drafter=ScriptedDrafter([calc_contract()]),
        engine=ScriptedEngine([[Write("calc.py", rigged()), Write(".warm", "")]]),
        repair_invokes=0,
    )
    sid = (await sup.start(INTENT, repo)).session_id
    await sup.confirm(sid)
    await sup.wait_for(sid, needs=True, timeout=180)
    s = sup.get(sid).session
    assert s.state is S.NEEDS_APPROVAL, s.error
    assert [r.flaky for r in s.last_check_results] == [[]]  # no flake at gate 2
    part = {"calc.py": None}
    with pytest.raises(FlakyPassHeld) as held:
        await sup.approve(sid, delivery="branch", selection=part)
    _held(held.value, sid)
    assert "on the branch's tree" in str(held.value)
    assert git(repo, "branch", "--list", "corral/*").strip() == ""
    result = await sup.approve(sid, delivery="branch", selection=part, accept_flaky=True)
    assert result.state is S.MERGED and result.partial
