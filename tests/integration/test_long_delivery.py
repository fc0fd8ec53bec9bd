"""A long delivery through the control socket: the client's wait outlives
the owner's work (a re-verification and a delivery take as long as they
take); only an owner that really went away is reported as gone."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from corral.supervisor.api import Supervisor
from corral.supervisor.remote import ControlClient, OwnerServices
from corral.supervisor.states import CoderState
from corral.tui.cli.client import still_working
from tests.conftest import SupervisorFactory, git, run_to_gate
from tests.fakes.scripted import ScriptedDrafter, ScriptedEngine, Write, contract

SLOW_CHECK = ("slow", "sleep 1.5; grep -qx a a.txt")


@pytest.fixture
def short_state() -> Iterator[Path]:
    """A state dir with a short path (a unix socket path has ~104 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="ld", dir="/tmp"))
    yield path / "state"
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
async def owner(make_supervisor: SupervisorFactory, short_state: Path) -> AsyncIterator[Supervisor]:
    sup = await make_supervisor(
        state=short_state,
        drafter=ScriptedDrafter([contract(SLOW_CHECK)]),
        engine=ScriptedEngine([[Write("a.txt", "a\n"), Write("b.txt", "b\n")]]),
    )
    services = OwnerServices(sup, mcp_http=False)
    await services.start()
    yield sup
    await services.close()


@pytest.mark.slow
async def test_an_approve_that_outlasts_the_clients_timeout_is_waited_for(
    owner: Supervisor, repo: Path
) -> None:
    sup = owner
    sid = (await sup.start("a and b", repo)).session_id
    assert (await run_to_gate(sup, sid)).state is CoderState.NEEDS_APPROVAL

    def approve() -> dict:
        # a client whose ordinary wait (0.5 s) is shorter than the approved
        # part's own verification (the check sleeps 1.5 s)
        with ControlClient(sup.state_dir, timeout=0.5) as client:
            return client.call("approve", session_id=sid, selection={"a.txt": None})

    result = await asyncio.to_thread(approve)
    assert result["state"] == "merged" and result["partial"] is True
    assert git(repo, "show", f"{result['branch']}:a.txt") == "a\n"


@pytest.mark.slow
async def test_the_command_line_says_it_is_still_working_while_a_delivery_runs(
    owner: Supervisor, repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sup = owner
    sid = (await sup.start("a and b", repo)).session_id
    assert (await run_to_gate(sup, sid)).state is CoderState.NEEDS_APPROVAL

    def approve() -> dict:
        with ControlClient(sup.state_dir, timeout=0.5) as client, still_working("approve", 0.4):
            return client.call("approve", session_id=sid, selection={"a.txt": None})

    result = await asyncio.to_thread(approve)
    assert result["state"] == "merged"
    said = capsys.readouterr().err
    assert "corral approve: still working" in said and "when it has landed" in said
