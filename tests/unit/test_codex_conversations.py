"""Codex reports the turns of its own helper threads (the title it gives a
task) through `notify` like the conversation's; only a thread Codex saved is
the conversation a dormant session resumes."""

from __future__ import annotations

import json
from pathlib import Path

from corral.supervisor.agents.profiles import profile_for
from corral.supervisor.models import CoderSession
from corral.supervisor.session.identity import note_hook, resume_id

MAIN = "01a23498-55ba-7663-b23d-1c3a71c61e39"
HELPER = "01a23498-56d4-7e70-9663-64fb0cc18d34"


def test_only_a_saved_codex_thread_becomes_the_sessions_identity(tmp_path: Path) -> None:
    day = tmp_path / "codex-home" / "sessions" / "2026" / "12" / "02"
    day.mkdir(parents=True)
    rollout = day / f"rollout-2026-12-02T02-32-08-{MAIN}.jsonl"
    turn = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}
    rollout.write_text(json.dumps({"type": "response_item", "payload": turn}) + "\n")
    codex = profile_for("codex")
    env = {"CODEX_HOME": str(tmp_path / "codex-home")}

    def locate(thread: str) -> Path | None:
        return codex.conversation_file(thread, env)

    session = CoderSession(id="s", repo="/r", intent="x")
    assert note_hook(session, "codex", {"thread-id": MAIN}, locate)
    # the helper thread's turn ends later: it does not replace the conversation
    assert not note_hook(session, "codex", {"thread-id": HELPER}, locate)
    assert resume_id(session) == MAIN
    assert session.agent_identity is not None
    assert session.agent_identity.transcript_path == str(rollout)
    # a name that is no thread id never globs the sessions tree
    assert codex.conversation_file("*", env) is None


def test_a_transcript_without_a_user_turn_is_not_resumed(tmp_path: Path) -> None:
    """Claude Code writes its transcript's first lines before the prompt; a
    crash then leaves a file `claude --resume` answers with "No conversation
    found". Only a transcript holding a user turn is resumed."""
    transcript = tmp_path / "t.jsonl"
    transcript.write_text('{"type":"summary","summary":"x"}\n')
    session = CoderSession(id="s", repo="/r", intent="x")
    assert note_hook(session, "claude", {"session_id": "abc", "transcript_path": str(transcript)})
    assert resume_id(session) is None
    user = {"type": "user", "message": {"role": "user", "content": "Write hello.txt"}}
    transcript.write_text(transcript.read_text() + json.dumps(user) + "\n")
    assert resume_id(session) == "abc"
