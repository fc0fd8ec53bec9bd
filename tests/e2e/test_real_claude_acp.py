"""Claude Code through Zed's ACP adapter (`claude-acp`, pinned in e2e/),
driven by corral over stdio against the scripted fake Anthropic server:
the model asks to write a file (with the adapter's own `mcp__acp__Write`
tool: it replaces Claude Code's Write when the client serves files), the
adapter sends `session/request_permission`, the operator allows it through
the API by the option's kind, the file is written through corral's
`fs/write_text_file` in the worktree, the turn ends with
`end_turn`, and the runtime verifies it (gate 2 unchanged). The session pins
a model the adapter offers (`models` in its answer to `session/new`): it is
asked for with `session/set_model`, and the model server sees it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from corral.supervisor.events import ConversationData
from corral.supervisor.states import CoderState as S
from tests.conftest import init_repo
from tests.e2e.support import AGENT_CLIS, open_sup, settle
from tests.fakes.agent_env import BIN_DIR, claude_launch, missing_cli
from tests.fakes.model_server import FakeModelServer, Reply, ToolCall

pytestmark = [pytest.mark.slow, AGENT_CLIS]

ADAPTER = BIN_DIR / "claude-code-acp"
NO_ADAPTER = missing_cli(ADAPTER, "npm ci --prefix e2e")
needs_adapter = pytest.mark.skipif(NO_ADAPTER is not None, reason=f"adapter: {NO_ADAPTER}")
OWN = ("PATH", "TERM", "SHELL", "USER")


@needs_adapter
async def test_claude_over_acp_writes_the_file_through_a_permission_the_operator_grants(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = init_repo(tmp_path / "repo")
    with FakeModelServer([]) as srv:
        launch = claude_launch(tmp_path / "claude", srv.url, repo, None, hooks=False)
        for key, value in launch.env.items():
            if key not in OWN:
                monkeypatch.setenv(key, value)
        monkeypatch.setenv("PATH", f"{BIN_DIR}:{os.environ['PATH']}")
        if os.getuid() == 0:  # the adapter starts Claude Code in a mode root may only use
            monkeypatch.setenv("IS_SANDBOX", "1")  # in a sandbox (as corral's is)
            config = tmp_path / "config.toml"
            config.write_text('[agents.claude]\nenv_allow = ["IS_SANDBOX"]\n')
            monkeypatch.setenv("CORRAL_CONFIG", str(config))
        sup = await open_sup(tmp_path, "claude")
        try:
            started = await sup.start(
                "Write hello.txt saying hi", repo, engine="claude-acp", model="haiku"
            )
            sid = started.session_id
            target = Path(started.worktree or "") / "hello.txt"
            srv.push(
                Reply(
                    "I'll write it.",
                    [ToolCall("mcp__acp__Write", {"file_path": str(target), "content": "hi\n"})],
                ),
                Reply("Wrote hello.txt."),
            )
            await sup.confirm(sid)
            row = await sup.wait_for(sid, needs=True, timeout=90)
            events = [(e.kind.value, e.data) for e in sup.replay(sid)]
            assert row.needs_you == "question", (row.error, "\n".join(str(e) for e in events[-40:]))
            options = sup.question_options(sid)
            assert any(o.endswith("[allow_once]") for o in options), options
            await sup.respond(sid, "allow_once")
            row = await settle(sup, sid, {S.NEEDS_APPROVAL, S.FAILED}, 90)
            assert row.state is S.NEEDS_APPROVAL, row.error
            assert target.read_text() == "hi\n"
            logged = [e.data for e in sup.replay(sid)]
            ends = [
                d.text for d in logged if isinstance(d, ConversationData) and d.part == "turn_end"
            ]
            assert ends == ["end_turn"]
            # what the adapter announced is kept; the pinned model went by session/set_model
            offers = sup.get(sid).session.agent_offers
            assert offers is not None and offers.mode == "default"
            assert {"default", "plan"} <= {m.id for m in offers.modes}
            assert "haiku" in {m.id for m in offers.models} and offers.model == "haiku"
            asked = [str((r.body or {}).get("model")) for r in srv.turn_requests]
            assert asked and all("haiku" in m for m in asked), asked
        finally:
            await sup.close()
