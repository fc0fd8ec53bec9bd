"""The pinned model reaches the real agent CLIs: Claude Code is started
with `--model <the configured entry's model id>`, Codex with `-m <a name only
Codex knows>`, and the model requests the fake server receives name it."""

from __future__ import annotations

from pathlib import Path

import pytest

from corral.supervisor.states import CoderState as S
from tests.conftest import init_repo
from tests.e2e.support import AGENT_CLIS, kill_tmux, open_sup, settle
from tests.e2e.test_real_agents import MISSING, agent_env
from tests.fakes.agent_env import claude_launch, codex_launch
from tests.fakes.model_server import FakeModelServer, Reply, ToolCall

__all__ = ["agent_env"]  # the fixture, shared with the other real-agent tests

pytestmark = [
    pytest.mark.slow,
    AGENT_CLIS,
    pytest.mark.skipif(MISSING is not None, reason=f"agent CLIs not installed: {MISSING}"),
]

CATALOG = """
[[llm.models]]
name = "pinned"
provider = "anthropic"
base_url = "{url}"
model = "claude-pinned-test-1"
api_key_env = "ANTHROPIC_API_KEY"
"""


async def test_claude_code_is_given_the_pinned_models_id(
    tmp_path: Path, agent_env, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    repo = init_repo(tmp_path / "repo")
    with FakeModelServer([]) as srv:
        config = tmp_path / "config.toml"
        config.write_text(CATALOG.format(url=srv.url))
        monkeypatch.setenv("CORRAL_CONFIG", str(config))
        launch = claude_launch(tmp_path / "claude", srv.url, repo, None, hooks=False)
        agent_env(launch.env)
        sup = await open_sup(tmp_path, "claude")
        try:
            started = await sup.start("Write hello.txt saying hi", repo, model="pinned")
            target = Path(started.worktree or "") / "hello.txt"
            srv.push(
                Reply(
                    "Writing.", [ToolCall("Write", {"file_path": str(target), "content": "hi\n"})]
                ),
                Reply("Wrote hello.txt."),
            )
            await sup.confirm(started.session_id)
            row = await settle(sup, started.session_id, {S.NEEDS_APPROVAL, S.FAILED}, 60)
            assert row.state is S.NEEDS_APPROVAL, row.error
            main = srv.turn_requests
            assert main and all(r.body["model"] == "claude-pinned-test-1" for r in main)
            session = sup.get(started.session_id).session
            assert session.model == "pinned" and session.model_id == "claude-pinned-test-1"
            assert "pinned" in session.authored_by
        finally:
            await sup.close()
            kill_tmux(tmp_path)


async def test_codex_is_given_a_model_name_it_knows(
    tmp_path: Path, agent_env, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    repo = init_repo(tmp_path / "repo")
    monkeypatch.setenv("CORRAL_CONFIG", str(tmp_path / "none.toml"))
    run = ToolCall("exec_command", {"cmd": "printf 'hi\\n' > hello.txt"})
    with FakeModelServer([]) as srv:
        launch = codex_launch(tmp_path / "codex", srv.openai_base_url, repo, None, notify=False)
        agent_env(launch.env)
        sup = await open_sup(tmp_path, "codex")
        try:
            started = await sup.start("Write hello.txt saying hi", repo, model="gpt-pinned-test")
            srv.push(Reply("Writing the file.", [run]), Reply("Wrote hello.txt."))
            await sup.confirm(started.session_id)
            row = await settle(sup, started.session_id, {S.NEEDS_APPROVAL, S.FAILED}, 90)
            assert row.state is S.NEEDS_APPROVAL, row.error
            main = srv.turn_requests
            assert main and all(r.body["model"] == "gpt-pinned-test" for r in main)
        finally:
            await sup.close()
            kill_tmux(tmp_path)
