"""The real Claude Code and Codex run one-shot (`claude-p`: `claude -p …
{prompt}`; `codex-exec`: `codex exec … {prompt}`) by corral in a tmux pane
against the fake model server: the model's tool call writes the file in the
worktree, the process exits 0, the runtime verifies, and the session waits
at approval."""

from __future__ import annotations

from pathlib import Path

import pytest

from corral.supervisor.contracts.drafting import FixedDrafter
from corral.supervisor.factory import build_supervisor
from corral.supervisor.states import CoderState as S
from tests.conftest import fast_config, hello_contract, init_repo
from tests.e2e.support import AGENT_CLIS, kill_tmux, settle
from tests.e2e.test_real_agents import agent_env
from tests.e2e.test_real_provider_homes import mentions, snapshot
from tests.fakes.agent_env import claude_bin, claude_launch, codex_bin, codex_launch
from tests.fakes.model_server import FakeModelServer, Reply, ToolCall

pytestmark = [pytest.mark.slow, AGENT_CLIS]
NO_CLAUDE = pytest.mark.skipif(not claude_bin().exists(), reason=f"{claude_bin()} is missing")
NO_CODEX = pytest.mark.skipif(not codex_bin().exists(), reason=f"{codex_bin()} is missing")

__all__ = ["agent_env"]  # the fixture, shared with the interactive e2e tests


@NO_CLAUDE
async def test_claude_p_one_shot_writes_the_file_and_is_verified(tmp_path: Path, agent_env) -> None:  # type: ignore[no-untyped-def]
    repo = init_repo(tmp_path / "repo")
    with FakeModelServer([]) as srv:
        launch = claude_launch(tmp_path / "claude", srv.url, repo, None, hooks=False)
        agent_env(launch.env)
        operator = [launch.home / ".claude", launch.home / ".claude.json"]
        before = snapshot(*operator)
        sup = build_supervisor(
            tmp_path / "state",
            FixedDrafter(hello_contract()),
            socket_dir=tmp_path / "tmux",
            config=fast_config(repair_invokes=0, max_session_wall_secs=120),
        )
        await sup.open()
        try:
            assert ("claude-p", "Claude Code, one-shot (claude -p)") in sup.engine_choices()
            started = await sup.start("Write hello.txt saying hi", repo, engine="claude-p")
            target = Path(started.worktree or "") / "hello.txt"
            srv.push(
                Reply(
                    "I'll write it.",
                    [ToolCall("Write", {"file_path": str(target), "content": "hi\n"})],
                ),
                Reply("Wrote hello.txt."),
            )
            await sup.confirm(started.session_id)
            row = await settle(sup, started.session_id, {S.NEEDS_APPROVAL, S.FAILED}, 60)
            assert row.state is S.NEEDS_APPROVAL, row.error
            assert target.read_text() == "hi\n"
            session = sup.get(started.session_id).session
            assert session.engine == "claude-p"
            assert session.last_check_results and all(r.passed for r in session.last_check_results)
            # the prompt reached the model as the user's message
            assert any("Write hello.txt saying hi" in str(r) for r in srv.requests)
        finally:
            await sup.close()
            kill_tmux(tmp_path)
    # the preset runs in the session's own Claude Code home, as `claude` does:
    # its conversation is there, and the operator's ~/.claude was not written
    own = tmp_path / "state" / "agents" / started.session_id / "provider-home"
    assert mentions(own / "projects", "Write hello.txt saying hi")
    assert snapshot(*operator) == before


@NO_CODEX
async def test_codex_exec_one_shot_runs_its_tool_and_is_verified(tmp_path: Path, agent_env) -> None:  # type: ignore[no-untyped-def]
    repo = init_repo(tmp_path / "repo")
    run = ToolCall("exec_command", {"cmd": "printf 'hi\\n' > hello.txt"})
    with FakeModelServer([]) as srv:
        launch = codex_launch(tmp_path / "codex", srv.openai_base_url, repo, None, notify=False)
        agent_env(launch.env)
        sup = build_supervisor(
            tmp_path / "state",
            FixedDrafter(hello_contract()),
            socket_dir=tmp_path / "tmux",
            config=fast_config(repair_invokes=0, max_session_wall_secs=120),
        )
        await sup.open()
        try:
            started = await sup.start("Write hello.txt saying hi", repo, engine="codex-exec")
            srv.push(Reply("Writing the file.", [run]), Reply("Wrote hello.txt."))
            await sup.confirm(started.session_id)
            row = await settle(sup, started.session_id, {S.NEEDS_APPROVAL, S.FAILED}, 60)
            assert row.state is S.NEEDS_APPROVAL, row.error
            worktree = Path(started.worktree or "")
            assert (worktree / "hello.txt").read_text() == "hi\n"
        finally:
            await sup.close()
            kill_tmux(tmp_path)
