"""Codex through Zed's ACP adapter (`codex-acp`, pinned in e2e/), driven by
corral over stdio against the fake OpenAI (Responses) server, on the model
the session pins (the adapter offers its models as a config option, set
with `session/set_config_option` before the first prompt): the model runs a
shell command that writes a file (no permission asked: Codex's own sandbox
is off inside corral's), the turn ends with `end_turn`, and the runtime
verifies the file (gate 2 unchanged). Codex's own sandbox cannot nest in corral's: the preset tells
it so (`-c sandbox_mode="danger-full-access"`), and corral's confines it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from corral.supervisor.events import ConversationData
from corral.supervisor.states import CoderState as S
from tests.conftest import init_repo
from tests.e2e.support import AGENT_CLIS, open_sup, settle
from tests.fakes.agent_env import BIN_DIR, codex_launch, missing_cli
from tests.fakes.model_server import FakeModelServer, Reply, ToolCall

pytestmark = [pytest.mark.slow, AGENT_CLIS]

ADAPTER = BIN_DIR / "codex-acp"
NO_ADAPTER = missing_cli(ADAPTER, "npm ci --prefix e2e")
needs_adapter = pytest.mark.skipif(NO_ADAPTER is not None, reason=f"adapter: {NO_ADAPTER}")
OWN = ("PATH", "TERM", "SHELL", "USER")


@needs_adapter
async def test_codex_over_acp_runs_its_shell_tool_and_the_file_is_verified(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = init_repo(tmp_path / "repo")
    run = ToolCall("exec_command", {"cmd": "printf 'hi\\n' > hello.txt"})
    with FakeModelServer([]) as srv:
        launch = codex_launch(tmp_path / "codex", srv.openai_base_url, repo, None, notify=False)
        for key, value in launch.env.items():
            if key not in OWN:
                monkeypatch.setenv(key, value)
        monkeypatch.setenv("PATH", f"{BIN_DIR}:{os.environ['PATH']}")
        sup = await open_sup(tmp_path, "codex")
        try:
            # a pinned model: Codex's adapter offers its models as a config option
            started = await sup.start(
                "Write hello.txt saying hi", repo, engine="codex-acp", model="gpt-5.4"
            )
            sid = started.session_id
            srv.push(Reply("Writing the file.", [run]), Reply("Wrote hello.txt."))
            await sup.confirm(sid)
            row = await settle(sup, sid, {S.NEEDS_APPROVAL, S.FAILED}, 90)
            events = [e.data for e in sup.replay(sid)]
            assert row.state is S.NEEDS_APPROVAL, (row.error, events[-30:])
            worktree = Path(sup.get(sid).session.worktree or "")
            assert (worktree / "hello.txt").read_text() == "hi\n"
            ends = [
                d.text for d in events if isinstance(d, ConversationData) and d.part == "turn_end"
            ]
            assert ends == ["end_turn"]
            # the pinned model was set before the task's first request
            assert [r.body.get("model") for r in srv.turn_requests] == ["gpt-5.4", "gpt-5.4"]
            row = next(r for r in sup.list() if r.session_id == sid)
            assert row.agent_model == "gpt-5.4"
            models = [
                d.text for d in events if isinstance(d, ConversationData) and d.part == "model"
            ]
            assert "gpt-5.4 (the session's pinned model)" in models
        finally:
            await sup.close()
