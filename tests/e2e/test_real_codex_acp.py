"""Codex through Zed's ACP adapter (`codex-acp`, pinned in e2e/), driven by
corral over stdio against the fake OpenAI (Responses) server, on the model
the session pins (the adapter offers its models as a config option, set
with `session/set_config_option` before the first prompt): the model runs a
shell command that writes a file (no permission asked: Codex's own sandbox
is off inside corral's), the turn ends with `end_turn`, and the runtime
verifies the file (gate 2 unchanged). Codex's own sandbox cannot nest in corral's: the preset tells
it so (`-c sandbox_mode="danger-full-access"`), and corral's confines it.

A first turn that leaves the check red gets a repair turn: corral's runtime
sends the repair prompt as a second `session/prompt` on the same ACP session
(one agent process), the model fixes the file, and the session is verified.

The adapter announces `loadSession`: when its process is killed (kill -9)
mid-turn the session goes dormant, and a revive starts it again with
`session/load` on the same session id; the model's next request carries
the earlier turns."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from corral.supervisor.events import AgentStartedData, ConversationData, PlanTextData
from corral.supervisor.states import CoderState as S
from tests.conftest import init_repo, row_of
from tests.e2e.support import AGENT_CLIS, agent_pids, open_sup, settle, until
from tests.fakes.agent_env import BIN_DIR, codex_launch, missing_cli
from tests.fakes.model_server import FakeModelServer, Reply, ToolCall

pytestmark = [pytest.mark.slow, AGENT_CLIS]

ADAPTER = BIN_DIR / "codex-acp"
NO_ADAPTER = missing_cli(ADAPTER, "npm ci --prefix e2e")
needs_adapter = pytest.mark.skipif(NO_ADAPTER is not None, reason=f"adapter: {NO_ADAPTER}")
OWN = ("PATH", "TERM", "SHELL", "USER")
REPAIR = "corral re-ran the contract"  # how the repair prompt starts


def use_codex(tmp_path: Path, srv: FakeModelServer, repo: Path, mp: pytest.MonkeyPatch) -> None:
    """The supervisor's environment (inherited, then scrubbed) points Codex at
    a hermetic home and the fake server; the adapter on PATH."""
    launch = codex_launch(tmp_path / "codex", srv.openai_base_url, repo, None, notify=False)
    for key, value in launch.env.items():
        if key not in OWN:
            mp.setenv(key, value)
    mp.setenv("PATH", f"{BIN_DIR}:{os.environ['PATH']}")


@needs_adapter
async def test_codex_over_acp_runs_its_shell_tool_and_the_file_is_verified(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = init_repo(tmp_path / "repo")
    run = ToolCall("exec_command", {"cmd": "printf 'hi\\n' > hello.txt"})
    with FakeModelServer([]) as srv:
        use_codex(tmp_path, srv, repo, monkeypatch)
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


@needs_adapter
async def test_a_red_check_after_codex_turn_is_repaired_by_a_second_prompt_on_the_same_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = init_repo(tmp_path / "repo")
    wrong = ToolCall("exec_command", {"cmd": "printf 'bye\\n' > hello.txt"})
    right = ToolCall("exec_command", {"cmd": "printf 'hi\\n' > hello.txt"})
    with FakeModelServer([]) as srv:
        use_codex(tmp_path, srv, repo, monkeypatch)
        sup = await open_sup(tmp_path, "codex", repairs=1)
        try:
            started = await sup.start("Write hello.txt saying hi", repo, engine="codex-acp")
            sid = started.session_id
            srv.push(
                Reply("Writing the file.", [wrong]),
                Reply("Wrote hello.txt."),
                Reply("Fixing the file.", [right]),
                Reply("Fixed hello.txt."),
            )
            await sup.confirm(sid)
            row = await settle(sup, sid, {S.NEEDS_APPROVAL, S.FAILED}, 120)
            events = [e.data for e in sup.replay(sid)]
            assert row.state is S.NEEDS_APPROVAL, (row.error, events[-30:])
            worktree = Path(sup.get(sid).session.worktree or "")
            assert (worktree / "hello.txt").read_text() == "hi\n"
            # two turns, each a session/prompt answered with its own stopReason
            said = [d for d in events if isinstance(d, ConversationData)]
            prompts = [d.text for d in said if d.part == "prompt"]
            assert len(prompts) == 2 and prompts[1].startswith(REPAIR), prompts
            assert "## hello (exit 1)" in prompts[1]
            assert [d.text for d in said if d.part == "turn_end"] == ["end_turn", "end_turn"]
            # on the same ACP session: one agent process, no new session or load
            assert len([d for d in events if isinstance(d, AgentStartedData)]) == 1
            # the model saw the repair only in the second turn, after the first
            carried = [REPAIR in json.dumps(r.body) for r in srv.turn_requests]
            assert carried == [False, False, True, True], carried
            second = json.dumps(srv.turn_requests[2].body)
            assert "Write hello.txt saying hi" in second and "Wrote hello.txt." in second
        finally:
            await sup.close()


def is_codex_acp(argv: list[str]) -> bool:
    """The adapter's own binary (its npm launcher is a node script)."""
    return Path(argv[0]).name == "codex-acp"


@needs_adapter
async def test_a_killed_codex_adapter_goes_dormant_and_revives_with_session_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = init_repo(tmp_path / "repo")
    task = "Write hello.txt saying hi"
    with FakeModelServer([]) as srv:
        use_codex(tmp_path, srv, repo, monkeypatch)
        sup = await open_sup(tmp_path, "codex", repairs=1)
        try:
            started = await sup.start(task, repo, engine="codex-acp")
            sid = started.session_id
            # the first turn writes nothing (red check); the repair turn is slow
            srv.push(Reply("Let me look around first."), Reply("Thinking it over.", delay=60))
            await sup.confirm(sid)
            await until(
                sup, sid, "the repair turn's request", lambda: len(srv.turn_requests) == 2, 90
            )
            first = sup.get(sid).session.agent_identity
            assert first is not None and first.session_id
            killed = agent_pids(sup, sid, is_codex_acp)
            assert killed, "no codex-acp process under the session's agent"
            for pid in killed:
                os.kill(pid, signal.SIGKILL)
            await until(sup, sid, "dormant", lambda: row_of(sup, sid).dormant, 30)
            row = row_of(sup, sid)
            assert row.state is S.RUNNING and row.needs_you is None, row
            right = ToolCall("exec_command", {"cmd": "printf 'hi\\n' > hello.txt"})
            srv.push(Reply("Writing it now.", [right]), Reply("Wrote hello.txt."))
            before = len(srv.turn_requests)
            await sup.revive(sid)
            row = await settle(sup, sid, {S.NEEDS_APPROVAL, S.FAILED}, 90)
            events = [e.data for e in sup.replay(sid)]
            assert row.state is S.NEEDS_APPROVAL, (row.error, events[-30:])
            worktree = Path(sup.get(sid).session.worktree or "")
            assert (worktree / "hello.txt").read_text() == "hi\n"
            said = [d.text for d in events if isinstance(d, PlanTextData)]
            loading = f"conversation {first.session_id} (session/load)"
            assert any(loading in t for t in said), said[-10:]
            again = sup.get(sid).session.agent_identity
            assert again is not None and again.session_id == first.session_id
            # the conversation the adapter replays while loading is not journaled twice
            told = [d.text for d in events if isinstance(d, ConversationData)]
            # (Codex's own notices stream as the same message, so a line may hold more)
            assert sum("Let me look around first." in t for t in told) == 1, told
            resumed = json.dumps(srv.turn_requests[before].body)
            assert task in resumed and "Let me look around first." in resumed
            assert "same conversation" in resumed
        finally:
            await sup.close()
