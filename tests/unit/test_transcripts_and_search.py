"""The agent's transcript as the session screen shows it, and the search
over rows, journals and transcripts that `/` on the board runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from corral.supervisor.agents.profiles import gemini_chats, profile_for
from corral.supervisor.models import AgentIdentity, CoderSession, IdentityState, SessionSummary
from corral.supervisor.session.identity import resume_id
from corral.supervisor.session.search import search
from corral.supervisor.session.transcripts import (
    READ_LIMIT,
    read_transcript,
    resolve,
)
from corral.supervisor.states import CoderState
from tests.fakes.claude_transcript import write_codex_rollout, write_gemini_chat, write_transcript


def test_a_claude_transcript_reads_as_its_user_and_agent_turns(tmp_path: Path) -> None:
    path = write_transcript(tmp_path / "t.jsonl", "Fold accents in slugify", "Done: crème → creme.")
    turns = read_transcript(path, "claude")
    assert [(t.role, t.text) for t in turns] == [
        ("user", "Fold accents in slugify"),
        ("assistant", "I'll read the slug module first.\n→ Read"),
        ("assistant", "Done: crème → creme."),
    ]
    assert turns[0].at == "2026-12-02T01:00:00.000Z"
    assert read_transcript(tmp_path / "missing.jsonl", "claude") == []
    assert [t.text for t in read_transcript(path, "claude", limit=1)] == ["Done: crème → creme."]


def test_a_codex_rollout_is_found_by_its_thread_and_read_as_turns(tmp_path: Path) -> None:
    thread = "01a23399-6fe3-7c12-b6c4-c0440762e36d"
    written = write_codex_rollout(tmp_path / "codex", thread, "Write esc.txt", "Wrote esc.txt.")
    codex, env = profile_for("codex"), {"CODEX_HOME": str(tmp_path / "codex")}
    assert codex.conversation_file(thread, env) == written
    assert codex.conversation_file("0000-other-thread", env) is None
    assert [(t.role, t.text) for t in read_transcript(written, "codex")] == [
        ("user", "Write esc.txt"),  # not the context Codex injects, nor its instructions
        ("assistant", "Need approval."),
        ("assistant", "→ exec_command"),
        ("assistant", "Wrote esc.txt."),
    ]


def test_a_gemini_chat_is_found_by_its_pattern_and_read_as_turns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    sid = "5998ac9d-8ffe-4d0e-9aba-2ac4ebeabf86"
    pattern = gemini_chats(sid)
    assert resolve(pattern) is None
    session = CoderSession(
        id="s1",
        repo="/r",
        intent="x",
        state=CoderState.RUNNING,
        agent_identity=AgentIdentity(
            agent="gemini", session_id=sid, transcript_path=pattern, state=IdentityState.LIVE
        ),
    )
    assert resume_id(session) is None  # nothing saved yet: nothing to resume
    written = write_gemini_chat(tmp_path, sid, "Write hello.txt", "Wrote hello.txt.")
    assert resolve(pattern) == written and resume_id(session) == sid
    assert [(t.role, t.text) for t in read_transcript(written, "gemini")] == [
        ("user", "Write hello.txt"),
        ("assistant", "Writing it.\n→ write_file"),  # its record written again, once
        ("assistant", "Wrote hello.txt."),
    ]


_AIDER = """
# aider chat started at 2026-12-02 01:33:19

> /usr/bin/aider --no-auto-commits --chat-history-file aider.chat.history.md
> Aider v0.86.2

#### Write hello.txt saying hi
####
#### Work only inside this directory.

Here it is.

hello.txt
```
hi
```

> Tokens: 658 sent, 13 received.
> Applied edit to hello.txt

#### thanks

You're welcome.
"""
# Aider ends its own lines (`> …`, `#### …`) with two spaces: markdown line breaks
AIDER_HISTORY = "\n".join(
    line + ("  " if line.startswith((">", "####")) else "") for line in _AIDER.splitlines()
)


def test_an_aider_chat_history_reads_as_typed_and_answered_turns(tmp_path: Path) -> None:
    path = tmp_path / "aider.chat.history.md"
    path.write_text(AIDER_HISTORY, encoding="utf-8")
    assert [(t.role, t.text) for t in read_transcript(path, "aider")] == [
        ("user", "Write hello.txt saying hi\n\nWork only inside this directory."),
        ("assistant", "Here it is.\n\nhello.txt\n```\nhi\n```"),
        ("user", "thanks"),
        ("assistant", "You're welcome."),
    ]


def test_a_huge_transcript_is_read_from_its_end(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    filler = {"type": "user", "message": {"role": "user", "content": "x" * 1000}}
    last = {"type": "assistant", "message": {"role": "assistant", "content": "the latest"}}
    with open(path, "w", encoding="utf-8") as fh:
        for _ in range(READ_LIMIT // 1000 + 50):
            fh.write(json.dumps(filler) + "\n")
        fh.write(json.dumps(last) + "\n")
    turns = read_transcript(path, "claude", limit=3)
    assert turns[-1].text == "the latest" and len(turns) == 3


def _row(sid: str, intent: str) -> SessionSummary:
    return SessionSummary(
        session_id=sid, label=f"corral-{sid}", state=CoderState.RUNNING, intent=intent,
        repo="/r", engine="external:claude", requested_engine=None, engine_ran=None,
        authored_by=[], iterations=0, max_iterations=8, created_at=0, updated_at=0,
        live=False, error=None, needs_you=None, needs_you_label=None,
        steering_available=False, question_prompt=None, auth_message=None,
        auth_wait_secs=None, failure_kind=None, worktree=None, result_branch=None,
        result_commit=None, model=None, discussion_id=None, next_seq=None,
    )  # fmt: skip


def test_search_finds_words_in_rows_journals_and_transcripts(tmp_path: Path) -> None:
    journals = tmp_path / "journals"
    journals.mkdir()
    (journals / "bbbb.events.jsonl").write_text(
        json.dumps({"kind": "check_result", "data": {"name": "Unit_Tests", "output": "TIMEOUT"}})
        + "\n"
    )
    (journals / "cccc.events.jsonl").write_text('{"kind": "plan_text"}\n')
    transcript = write_transcript(tmp_path / "c.jsonl", "fold accents", "Crème brûlée done")
    rows = [_row("aaaa", "Fix the parser"), _row("bbbb", "Other"), _row("cccc", "Third")]
    where = {"cccc": str(transcript)}
    assert search("parser", rows, journals, where) == ["aaaa"]
    assert search("unit_tests timeout", rows, journals, where) == ["bbbb"]  # any case, all words
    assert search("CRÈME", rows, journals, where) == ["cccc"]
    assert search("parser timeout", rows, journals, where) == []
    assert search("  ", rows, journals, where) == []
    assert search("corral-aaaa", rows, journals, {}) == ["aaaa"]
