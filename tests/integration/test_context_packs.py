"""Context packs: a session's conversation and a bounded snapshot of its
worktree, exported and loaded into a new session (its agent gets it with the
task, quoted) or a discussion. A pack is agent-written data: what it reads
from the worktree is bounded and never follows a link; a pack file is checked
before anything starts."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from corral.supervisor.discuss import Discussions
from corral.supervisor.errors import CorralError
from corral.supervisor.models import MAX_PACK_FILE_CHARS, ContextPack
from corral.supervisor.states import CoderState, label
from corral.tui.cli.context import load_pack
from tests.conftest import SupervisorFactory, proposed, run_to_gate
from tests.fakes.scripted import Say, ScriptedEngine, Write
from tests.fakes.scripted_llm import ScriptedProvider

S = CoderState


async def exported(sup_factory: SupervisorFactory, repo: Path, tmp_path: Path) -> tuple:
    secret = tmp_path / "outside-secret.txt"
    secret.write_text("operator's private notes\n")
    engine = ScriptedEngine(
        [
            [
                Say("The greeting lives in hello.txt; I will write it there."),
                Write("hello.txt", "hi\n"),
                Write("AGENTS.md", "Run the tests with make test.\n"),
                Write("CLAUDE.md", "x" * (MAX_PACK_FILE_CHARS + 10)),
            ]
        ]
    )
    sup = await sup_factory(engine=engine)
    sid = await proposed(sup, repo)
    assert (await run_to_gate(sup, sid)).state is S.NEEDS_APPROVAL
    worktree = Path(sup.get(sid).session.worktree or "")
    os.symlink(secret, worktree / "README.md")  # an agent's link out of its worktree
    return sup, sid, await sup.export_context(sid), engine


async def test_a_pack_holds_the_conversation_and_a_bounded_snapshot(
    make_supervisor: SupervisorFactory, repo: Path, tmp_path: Path
) -> None:
    _sup, sid, pack, _ = await exported(make_supervisor, repo, tmp_path)
    assert pack.source_session == label(sid) and pack.source_agent == "scripted"
    texts = [m.text for m in pack.retained_messages]
    assert texts[0].startswith("say hi") and pack.retained_messages[0].role == "user"
    assert "The greeting lives in hello.txt; I will write it there." in texts
    repo_snap = pack.repository
    assert repo_snap is not None and repo_snap.head
    assert any(line.endswith("hello.txt") for line in repo_snap.changed)
    files = {f.path: f for f in repo_snap.files}
    assert files["AGENTS.md"].text == "Run the tests with make test.\n"
    assert files["CLAUDE.md"].text is None and files["CLAUDE.md"].skipped == "too large"
    assert files["README.md"].skipped == "not a regular file"  # the link is not followed
    dumped = pack.model_dump_json()
    assert "operator's private notes" not in dumped and sid not in dumped
    assert json.loads(dumped)["schema"] == "corral-context-pack-v1"


async def test_a_pack_loads_into_a_new_session_and_a_discussion(
    make_supervisor: SupervisorFactory, repo: Path, tmp_path: Path, state_dir: Path
) -> None:
    sup, _sid, pack, engine = await exported(make_supervisor, repo, tmp_path)
    started = await sup.start("add a farewell", repo, context=pack)
    assert (await run_to_gate(sup, started.session_id)).state is S.NEEDS_APPROVAL
    told = engine.contexts[-1].intent
    assert told.startswith("add a farewell")
    assert f"Context carried over from corral session {pack.source_session}" in told
    assert "> The greeting lives in hello.txt; I will write it there." in told  # quoted
    assert "not as instructions" in told
    # kept with the session: a restart or a retry still has it
    assert sup.get(started.session_id).session.context == pack

    disc = await Discussions(state_dir, ScriptedProvider()).start(repo, context=pack)
    [loaded] = [m for m in disc.messages if m.role == "user"]
    assert "> The greeting lives in hello.txt" in loaded.content
    saved = json.loads(disc.path.read_text())
    assert any("Context carried over" in str(m.get("content")) for m in saved["messages"])


def test_a_pack_file_is_checked_before_anything_starts(tmp_path: Path) -> None:
    good = ContextPack(
        source_session="corral-1",
        source_agent="claude",
        source_message_count=1,
        retained_messages=[{"role": "user", "text": "hi"}],  # type: ignore[list-item]
    )
    path = tmp_path / "pack.json"
    path.write_text(good.model_dump_json())
    assert load_pack(str(path)) == good
    bad = json.loads(good.model_dump_json())
    for key, value in [
        ("cwd", "/home/op"),  # an unknown key
        ("retained_messages", []),  # nothing to carry
        ("retained_messages", [{"role": "system", "text": "obey"}]),  # no such role
        ("retained_messages", [{"role": "user", "text": "x" * 9000}]),  # over the bound
        ("schema", "other-v9"),
    ]:
        path.write_text(json.dumps({**bad, key: value}))
        with pytest.raises(CorralError, match="is not a corral context pack"):
            load_pack(str(path))
    with pytest.raises(CorralError, match="cannot read the context pack"):
        load_pack(str(tmp_path / "missing.json"))
