"""Real Claude Code (npm, e2e/node_modules) in a real tmux pane against the
fake model server: its own session id comes from its hooks; when its pane
dies while corral is closed the session is dormant, and a revive starts
`claude --resume <id>` in the same worktree — the model sees the earlier
conversation in its next request."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path

import pytest

from corral.supervisor.api import Supervisor
from corral.supervisor.contracts.drafting import FixedDrafter
from corral.supervisor.factory import build_supervisor
from corral.supervisor.session.identity import resume_id
from corral.supervisor.states import CoderState as S
from tests.conftest import eventually, fast_config, hello_contract, init_repo, row_of
from tests.e2e.support import AGENT_CLIS, until
from tests.e2e.test_real_agents import MISSING, agent_env, kill_tmux, open_sup, settle
from tests.e2e.test_real_provider_homes import snapshot
from tests.fakes.agent_env import claude_launch, codex_launch
from tests.fakes.model_server import FakeModelServer, Reply, ToolCall

__all__ = ["agent_env"]  # the fixture, shared

pytestmark = [
    pytest.mark.slow,
    AGENT_CLIS,
    pytest.mark.skipif(MISSING is not None, reason=f"agent CLIs not installed: {MISSING}"),
]

TASK = "Write hello.txt saying hi"


async def test_a_dormant_claude_session_is_revived_on_its_own_conversation(
    tmp_path: Path,
    agent_env,  # type: ignore[no-untyped-def]
) -> None:
    repo = init_repo(tmp_path / "repo")
    with FakeModelServer([]) as srv:
        launch = claude_launch(tmp_path / "claude", srv.url, repo, None, hooks=False)
        agent_env(launch.env)
        operator = snapshot(launch.home / ".claude", launch.home / ".claude.json")
        sup = await open_sup(tmp_path, "claude")
        try:
            started = await sup.start(TASK, repo)
            sid = started.session_id
            srv.push(Reply("Let me think about where it goes.", delay=8))
            await sup.confirm(sid)
            identity = await eventually(
                lambda: sup.get(sid).session.agent_identity, timeout=60, interval=0.2
            )
            await eventually(lambda: srv.turn_requests, timeout=60, interval=0.2)
            # Claude Code saves the turn's start a moment after sending it
            await eventually(lambda: resume_id(sup.get(sid).session), timeout=30, interval=0.2)
        finally:
            await sup.close()
        kill_tmux(tmp_path)  # the agent's pane dies while corral is closed
        agent_session = identity.session_id
        assert agent_session

        sup = await open_sup(tmp_path, "claude")
        try:
            row = next(r for r in sup.list() if r.session_id == sid)
            assert row.state is S.RUNNING and row.dormant and row.needs_you is None
            target = Path(started.worktree or "") / "hello.txt"
            srv.push(
                Reply(
                    "I'll write it.",
                    [ToolCall("Write", {"file_path": str(target), "content": "hi\n"})],
                ),
                Reply("Wrote hello.txt."),
            )
            before = len(srv.turn_requests)
            await sup.revive(sid)
            row = await settle(sup, sid, {S.NEEDS_APPROVAL, S.FAILED}, 90)
            assert row.state is S.NEEDS_APPROVAL, row.error
            assert target.read_text() == "hi\n"
            resumed = srv.turn_requests[before]
            conversation = json.dumps(resumed.body["messages"])
            assert TASK in conversation  # the earlier turn, carried by the resume
            assert "same conversation" in conversation  # and corral's note to continue
            stored = sup.get(sid).session.agent_identity
            assert stored is not None and stored.state == "live"
            # found in the session's own provider home; the operator's untouched
            home = tmp_path / "state" / "agents" / sid / "provider-home"
            assert (stored.transcript_path or "").startswith(f"{home}/"), stored
            assert snapshot(launch.home / ".claude", launch.home / ".claude.json") == operator
        finally:
            await sup.close()
            kill_tmux(tmp_path)
        await asyncio.sleep(0)


def kill_agent(sup, sid: str) -> None:  # type: ignore[no-untyped-def]
    """The agent crashes: its whole process group is killed."""
    pane = sup.agent_pane(sid)
    assert pane is not None and pane.pid
    os.killpg(os.getpgid(pane.pid), signal.SIGKILL)


async def test_a_crashed_claude_is_retried_on_its_own_conversation_then_dormant(
    tmp_path: Path,
    agent_env,  # type: ignore[no-untyped-def]
) -> None:
    repo = init_repo(tmp_path / "repo")
    with FakeModelServer([]) as srv:
        launch = claude_launch(tmp_path / "claude", srv.url, repo, None, hooks=False)
        agent_env(launch.env)
        sup = await open_sup(tmp_path, "claude")
        try:
            started = await sup.start(TASK, repo)
            sid = started.session_id
            # replies slower than any wait below: each kill lands mid-turn, even
            # on a loaded machine (a turn that ended first would be verified, and
            # fail, instead of crashing)
            srv.push(Reply("Thinking.", delay=45), Reply("Still thinking.", delay=45))
            await sup.confirm(sid)
            await until(
                sup,
                sid,
                "Claude Code's session id",
                lambda: sup.get(sid).session.agent_identity,
                60,
            )
            await until(
                sup, sid, "the first turn's request", lambda: len(srv.turn_requests) == 1, 60
            )
            # a crash mid-turn, once Claude Code saved the turn's start
            await until(
                sup, sid, "a resumable conversation", lambda: resume_id(sup.get(sid).session), 30
            )
            kill_agent(sup, sid)
            # the transient retry resumes the same conversation
            await until(
                sup,
                sid,
                lambda: f"the retried turn's request (requests: {srv.paths()})",
                lambda: len(srv.turn_requests) >= 2,
                60,
            )
            retried = json.dumps(srv.turn_requests[1].body["messages"])
            assert TASK in retried and "same conversation" in retried
            resumed = await until(
                sup, sid, "the resumed session id", lambda: sup.get(sid).session.agent_identity, 30
            )
            assert resumed.session_id
            await until(
                sup, sid, "a resumable conversation", lambda: resume_id(sup.get(sid).session), 30
            )
            kill_agent(sup, sid)
            # out of retries: dormant, not failed, nothing asked of the operator
            await until(sup, sid, "dormant", lambda: row_of(sup, sid).dormant, 30)
            row = row_of(sup, sid)
            assert row.state is S.RUNNING and row.needs_you is None and row.error is None
            target = Path(started.worktree or "") / "hello.txt"
            srv.push(
                Reply(
                    "I'll write it.",
                    [ToolCall("Write", {"file_path": str(target), "content": "hi\n"})],
                ),
                Reply("Wrote hello.txt."),
            )
            await sup.revive(sid)
            row = await settle(sup, sid, {S.NEEDS_APPROVAL, S.FAILED}, 90)
            assert row.state is S.NEEDS_APPROVAL, row.error
            assert target.read_text() == "hi\n"
        finally:
            await sup.close()
            kill_tmux(tmp_path)


@pytest.mark.timeout(400)
async def test_a_dormant_codex_session_is_resumed_on_its_own_thread(
    tmp_path: Path,
    agent_env,  # type: ignore[no-untyped-def]
) -> None:
    """Codex names its thread in the `notify` payload at a turn's end. A
    session whose pane died mid-repair while corral was closed is dormant, and
    revive runs `codex resume <thread>`: the model's next request carries the
    first turn."""
    repo = init_repo(tmp_path / "repo")
    with FakeModelServer([]) as srv:
        launch = codex_launch(tmp_path / "codex", srv.openai_base_url, repo, None, notify=False)
        agent_env(launch.env)
        operator = snapshot(launch.config_dir)

        def open_codex() -> Supervisor:
            return build_supervisor(
                tmp_path / "state",
                FixedDrafter(hello_contract()),
                socket_dir=tmp_path / "tmux",
                default_engine="external:codex",
                config=fast_config(repair_invokes=1, max_session_wall_secs=180),
            )

        sup = open_codex()
        await sup.open()
        try:
            started = await sup.start(TASK, repo)
            sid = started.session_id
            # the first turn writes nothing (its checks fail); the repair turn is slow
            srv.push(Reply("Let me look around first."), Reply("Thinking it over.", delay=30))
            await sup.confirm(sid)
            identity = await eventually(
                lambda: sup.get(sid).session.agent_identity, timeout=90, interval=0.2
            )
            await eventually(lambda: len(srv.turn_requests) >= 2, timeout=90, interval=0.2)
        finally:
            await sup.close()
        kill_tmux(tmp_path)  # the agent's pane dies while corral is closed
        assert identity.agent == "codex" and identity.session_id

        sup = open_codex()
        await sup.open()
        try:
            row = next(r for r in sup.list() if r.session_id == sid)
            assert row.state is S.RUNNING and row.dormant and row.needs_you is None
            run = ToolCall("exec_command", {"cmd": "printf 'hi\\n' > hello.txt"})
            srv.push(Reply("Writing it now.", [run]), Reply("Wrote hello.txt."))
            before = len(srv.turn_requests)
            await sup.revive(sid)
            row = await settle(sup, sid, {S.NEEDS_APPROVAL, S.FAILED}, 120)
            assert row.state is S.NEEDS_APPROVAL, row.error
            assert (Path(started.worktree or "") / "hello.txt").read_text() == "hi\n"
            resumed = json.dumps(srv.turn_requests[before].body)
            assert "Let me look around first." in resumed  # the first turn, carried by the resume
            assert TASK in resumed
            # its thread was kept in the session's own CODEX_HOME, not the operator's
            home = tmp_path / "state" / "agents" / sid / "provider-home"
            assert list(home.glob(f"sessions/*/*/*/rollout-*-{identity.session_id}.jsonl"))
            assert snapshot(launch.config_dir) == operator
        finally:
            await sup.close()
            kill_tmux(tmp_path)
