"""Reviving a dormant session in real tmux (private socket, the demo agent):
the old agent's dead pane goes before the new one starts, so no stray is
left for `corral panes stop --all`."""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

import pytest

from corral.supervisor.demo import demo_contract, make_demo_repo
from corral.supervisor.models import AgentIdentity, IdentityState
from corral.supervisor.states import CoderState as S
from tests.conftest import eventually
from tests.integration.test_external_engine import SLUG, kill_tmux, open_supervisor
from tests.integration.test_pane_lifecycle import edit_stored, owners, process_ends

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


@pytest.fixture
def demo_repo(tmp_path: Path) -> Path:
    return make_demo_repo(tmp_path)


@pytest.mark.slow
async def test_reviving_a_dormant_session_stops_its_dead_pane(
    tmp_path: Path, demo_repo: Path
) -> None:
    try:
        first = await open_supervisor(tmp_path, demo_contract(SLUG))
        sid = (await first.start(SLUG, demo_repo)).session_id
        await first.confirm(sid)
        await first.wait_for(sid, needs=True, timeout=30)  # its agent asks: it is running
        pane = first.agent_pane(sid)
        assert pane is not None
        owner, pid = pane.owner, pane.pid
        await first.close()
        # the agent dies while no corral runs; it had named its conversation
        os.kill(pid, signal.SIGKILL)
        assert process_ends(pid)
        edit_stored(
            tmp_path,
            sid,
            agent_identity=AgentIdentity(
                agent="demo", session_id="conv-1", state=IdentityState.LIVE
            ),
        )

        second = await open_supervisor(tmp_path, demo_contract(SLUG))
        try:
            row = next(r for r in second.list() if r.session_id == sid)
            assert row.state is S.RUNNING and row.dormant, row
            assert owners(tmp_path).get(owner) is False, "the dead pane is not there to stop"
            await second.revive(sid)
            # the dead pane is gone; the revived agent runs in a pane of its own
            await eventually(lambda: owner not in owners(tmp_path), timeout=15)
            assert all(owners(tmp_path).values()), owners(tmp_path)
        finally:
            await second.close()
    finally:
        kill_tmux(tmp_path)
