"""Real Gemini CLI and Aider, revived on their own conversations: corral
names Gemini's session at launch (`--session-id <uuid>`) and resumes it with
`--resume <uuid>`; Aider's conversation is its chat history (one file per
corral session), read back with `--restore-chat-history`. The pane dies
while corral is closed, the session is dormant, and after a revive the
model's next request carries the earlier conversation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from corral.supervisor.states import CoderState as S
from tests.conftest import eventually, init_repo
from tests.e2e.support import AGENT_CLIS, kill_tmux, open_sup, settle
from tests.e2e.test_real_gemini_aider import agent_env, needs_aider, needs_gemini
from tests.fakes.agent_env import aider_launch, aider_whole_file, gemini_launch
from tests.fakes.model_server import FakeModelServer, Reply, ToolCall

__all__ = ["agent_env"]  # the fixture, shared

pytestmark = [pytest.mark.slow, AGENT_CLIS]

TASK = "Write hello.txt saying hi"


@needs_gemini
async def test_a_dormant_gemini_session_is_revived_on_its_own_conversation(
    tmp_path: Path,
    agent_env,  # type: ignore[no-untyped-def]
) -> None:
    repo = init_repo(tmp_path / "repo")
    home = tmp_path / "gemini"
    with FakeModelServer([]) as srv:
        agent_env(gemini_launch(home, srv.url, repo, None, approval_mode="auto_edit"))
        sup = await open_sup(tmp_path, "gemini")
        try:
            started = await sup.start(TASK, repo)
            sid = started.session_id
            srv.push(Reply("Let me think about where it goes."))
            await sup.confirm(sid)
            identity = await eventually(
                lambda: sup.get(sid).session.agent_identity, timeout=60, interval=0.2
            )
            assert identity.agent == "gemini" and len(identity.session_id or "") == 36
            # Gemini saves the conversation (chats/session-<time>-<id head>.jsonl)
            # in the session's own provider home (GEMINI_CLI_HOME), never the operator's
            head = (identity.session_id or "")[:8]
            own = tmp_path / "state" / "agents" / sid / "provider-home"
            await eventually(
                lambda: list(own.rglob(f"chats/*{head}*.json*")), timeout=60, interval=0.2
            )
            assert (identity.transcript_path or "").startswith(str(own) + "/"), identity
            assert not list(home.rglob("chats/*")), "a chat was written in the operator's ~/.gemini"
            await eventually(lambda: srv.turn_requests, timeout=60, interval=0.2)
        finally:
            await sup.close()
        kill_tmux(tmp_path)  # the pane dies while corral is closed

        sup = await open_sup(tmp_path, "gemini")
        try:
            row = next(r for r in sup.list() if r.session_id == sid)
            assert row.state is S.RUNNING and row.dormant, row
            target = Path(started.worktree or "") / "hello.txt"
            srv.push(
                Reply(
                    "Writing it.",
                    [ToolCall("write_file", {"file_path": str(target), "content": "hi\n"})],
                ),
                Reply("Wrote hello.txt."),
            )
            before = len(srv.turn_requests)
            await sup.revive(sid)
            row = await settle(sup, sid, {S.NEEDS_APPROVAL, S.FAILED}, 90)
            assert row.state is S.NEEDS_APPROVAL, row.error
            assert target.read_text() == "hi\n"
            conversation = json.dumps(srv.turn_requests[before].body)
            assert TASK in conversation  # the earlier turn, carried by the resume
            assert "same conversation" in conversation  # corral's note to continue
            assert sup.get(sid).session.agent_identity.session_id == identity.session_id  # type: ignore[union-attr]
            # its chat file is the session's transcript: both turns, in order
            turns = [t.text for t in await sup.transcript(sid)]
            assert any(TASK in t for t in turns) and turns[-1] == "Wrote hello.txt.", turns
        finally:
            await sup.close()
            kill_tmux(tmp_path)


@needs_aider
async def test_a_dormant_aider_session_is_revived_with_its_chat_history(
    tmp_path: Path,
    agent_env,  # type: ignore[no-untyped-def]
) -> None:
    repo = init_repo(tmp_path / "repo")
    with FakeModelServer([]) as srv:
        agent_env(aider_launch(tmp_path / "aider", srv.openai_base_url, repo, yes_always=True))
        sup = await open_sup(tmp_path, "aider")
        try:
            started = await sup.start(TASK, repo)
            sid = started.session_id
            srv.push(Reply("Which directory should it go in?"))
            await sup.confirm(sid)
            identity = await eventually(
                lambda: sup.get(sid).session.agent_identity, timeout=60, interval=0.2
            )
            history = Path(identity.transcript_path or "")
            await eventually(
                lambda: history.exists() and "Which directory" in history.read_text(),
                timeout=60,
                interval=0.2,
            )
        finally:
            await sup.close()
        kill_tmux(tmp_path)

        sup = await open_sup(tmp_path, "aider")
        try:
            row = next(r for r in sup.list() if r.session_id == sid)
            assert row.state is S.RUNNING and row.dormant, row
            srv.push(Reply(aider_whole_file("hello.txt", "hi"), delay=1))
            before = len(srv.turn_requests)
            await sup.revive(sid)
            row = await settle(sup, sid, {S.NEEDS_APPROVAL, S.FAILED}, 90)
            assert row.state is S.NEEDS_APPROVAL, row.error
            assert (Path(started.worktree or "") / "hello.txt").read_text() == "hi\n"
            conversation = json.dumps(srv.turn_requests[before].body)
            assert "Which directory should it go in?" in conversation  # restored history
        finally:
            await sup.close()
            kill_tmux(tmp_path)
