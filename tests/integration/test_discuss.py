"""Discussions: read-only, repo-grounded chat → a reviewed intent.

Real temp git repositories and the ScriptedProvider; every read-only check
asserts on what the MODEL receives (its recorded requests), not only on the
operator's event stream.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path

import pytest

from corral.supervisor.discuss import (
    DISCUSS_MAX_TURNS,
    DISCUSS_MESSAGE_MAX_BYTES,
    DISCUSSION_MUTATION_REFUSAL,
    GUIDANCE_LIMIT,
    MAX_OPEN_DISCUSSIONS,
    TRANSCRIPT_MAX_TURNS,
    DiscussAssistantDeltaData,
    Discussion,
    Discussions,
    DiscussToolCallData,
    DiscussToolResultData,
    DiscussTurnCompleteData,
)
from corral.supervisor.errors import CorralError
from corral.supervisor.llm.base import Message, ModelError, ToolCall, Turn
from corral.supervisor.llm.config import NO_MODEL
from tests.conftest import init_repo
from tests.fakes.scripted_llm import ScriptedProvider


def call(name: str, cid: str = "c1", **arguments: object) -> ToolCall:
    return ToolCall(cid, name, dict(arguments))


def tool_turn(*calls: ToolCall, text: str = "") -> Turn:
    return Turn(text, tool_calls=calls, stop_reason="tool_use")


def tool_messages(messages: tuple[Message, ...] | list[Message]) -> list[Message]:
    return [m for m in messages if m.role == "tool"]


def kinds(disc: Discussion) -> list[str]:
    return [e.type for e in disc.events.events()]


async def open_one(
    state: Path, repo: Path, *turns: object
) -> tuple[Discussions, Discussion, ScriptedProvider]:
    provider = ScriptedProvider(list(turns))  # type: ignore[arg-type]
    mgr = Discussions(state, provider)
    disc = await mgr.start(repo)
    return mgr, disc, provider


async def ask(disc: Discussion, text: str = "question") -> None:
    await disc.send(text)
    await asyncio.wait_for(disc.wait(), 10)


# --- streaming and the turn ---------------------------------------------------------


async def test_a_turn_streams_in_order_and_ends_with_turn_complete(repo: Path, state_dir: Path):
    (repo / "notes.txt").write_text("alpha\n")
    mgr, disc, provider = await open_one(
        state_dir,
        repo,
        tool_turn(call("read_file", path="notes.txt"), text="let me look"),
        Turn("It says alpha."),
    )
    assert disc.id.startswith("disc-")
    seq = await disc.send("what is in notes.txt?")
    assert seq == 0
    await disc.wait()
    ks = kinds(disc)
    assert ks[0] == "user_message"
    assert ks[-1] == "turn_complete" and ks.count("turn_complete") == 1
    assert ks.index("tool_call") < ks.index("tool_result") < ks.index("assistant_message")
    assert "assistant_delta" in ks
    deltas = "".join(e.data.text for e in disc.events.events("assistant_delta"))
    assert deltas == "let me lookIt says alpha."
    seqs = [e.seq for e in disc.events.events()]
    assert seqs == list(range(len(seqs)))
    assert disc.events.events("tool_call")[0].data == DiscussToolCallData(
        name="read_file", args={"path": "notes.txt"}
    )
    result = disc.events.events("tool_result")[0].data
    assert isinstance(result, DiscussToolResultData)
    assert result.name == "read_file" and result.ok is True
    # the content reached the model
    tools = tool_messages(provider.calls[1].messages)
    assert len(tools) == 1 and "alpha" in tools[0].content
    # advertised tools: read tools + prepare, nothing that mutates
    names = {t.name for t in provider.calls[0].tools}
    assert names == {"read_file", "list_dir", "find_files", "grep_files", "prepare_coding_task"}
    assert disc.prepared_task is None  # a question prepares nothing
    await mgr.close(disc.id)


async def test_subscribe_replays_inclusively_and_then_follows(repo: Path, state_dir: Path):
    _mgr, disc, _ = await open_one(state_dir, repo, Turn("one"), Turn("two"))
    await ask(disc, "first")
    total = disc.events.next_seq
    sub = disc.subscribe(from_seq=2)
    replayed = sub.get_nowait()
    assert [e.seq for e in replayed] == list(range(2, total))
    await disc.send("second")
    await disc.wait()
    fresh = sub.get_nowait()
    assert [e.seq for e in fresh] == list(range(total, disc.events.next_seq))
    assert fresh[-1].type == "turn_complete"
    wire = fresh[0].to_dict()
    assert wire["type"] == "user_message" and wire["text"] == "second"
    assert wire["discussion_id"] == disc.id and wire["seq"] == total


async def test_a_second_send_while_answering_is_refused(repo: Path, state_dir: Path):
    gate = asyncio.Event()
    provider = ScriptedProvider([Turn("done"), Turn("again")], gate=gate)
    mgr = Discussions(state_dir, provider)
    disc = await mgr.start(repo)
    await disc.send("first")
    assert disc.answering
    with pytest.raises(CorralError, match="still answering the previous message"):
        await disc.send("second")
    with pytest.raises(CorralError, match="still answering"):
        await disc.promote()
    with pytest.raises(CorralError, match="still answering"):
        await disc.constraints_for_start()
    gate.set()
    await disc.wait()
    assert not disc.answering
    await ask(disc, "third")  # usable afterwards
    assert kinds(disc).count("user_message") == 2


async def test_an_oversized_message_is_refused_before_anything(repo: Path, state_dir: Path):
    _mgr, disc, provider = await open_one(state_dir, repo, Turn("ok"))
    with pytest.raises(CorralError, match="the limit is 65536"):
        await disc.send("x" * (DISCUSS_MESSAGE_MAX_BYTES + 1))
    with pytest.raises(CorralError, match="the limit is"):
        await disc.send("é" * (DISCUSS_MESSAGE_MAX_BYTES // 2 + 1))  # bytes, not chars
    with pytest.raises(CorralError, match="empty"):
        await disc.send("   ")
    assert not disc.answering and disc.transcript == [] and kinds(disc) == []
    assert provider.calls == []
    await ask(disc, "x" * DISCUSS_MESSAGE_MAX_BYTES)  # exactly the limit is fine


async def test_a_reply_is_capped_at_twelve_model_rounds(repo: Path, state_dir: Path):
    (repo / "a.txt").write_text("a\n")
    looping = [tool_turn(call("list_dir", f"c{i}", path=".")) for i in range(20)]
    _mgr, disc, provider = await open_one(state_dir, repo, *looping)
    await ask(disc)
    assert len(provider.calls) == DISCUSS_MAX_TURNS
    errors = disc.events.events("error")
    assert len(errors) == 1 and "12 rounds" in errors[0].data.message
    assert kinds(disc)[-1] == "turn_complete"


async def test_cancel_mid_turn_still_completes_the_turn(repo: Path, state_dir: Path):
    gate = asyncio.Event()
    provider = ScriptedProvider([Turn("never")], gate=gate)
    mgr = Discussions(state_dir, provider)
    disc = await mgr.start(repo)
    await disc.send("slow one")
    await asyncio.sleep(0)
    assert disc.cancel()
    await disc.wait()
    ks = kinds(disc)
    assert ks[-1] == "turn_complete" and ks.count("turn_complete") == 1
    assert disc.events.events("turn_complete")[0].data == DiscussTurnCompleteData(cancelled=True)
    assert not disc.answering
    provider.gate = None
    provider.turns = [Turn("back")]  # the parked turn was never served
    await ask(disc, "next")
    assert disc.events.events("assistant_message")[-1].data.text == "back"


async def test_cancel_between_tool_calls_keeps_the_thread_valid(repo: Path, state_dir: Path):
    gate = asyncio.Event()

    async def parked(_messages, _tools):
        await gate.wait()
        return Turn("unreachable")

    provider = ScriptedProvider([tool_turn(call("list_dir", path=".")), parked, Turn("fine")])
    mgr = Discussions(state_dir, provider)
    disc = await mgr.start(repo)
    await disc.send("go")
    for _ in range(50):
        if len(provider.calls) == 2:
            break
        await asyncio.sleep(0.01)
    disc.cancel()
    await disc.wait()
    await ask(disc, "again")
    last = provider.calls[-1].messages
    for m in last:  # every tool call has its result
        for c in m.tool_calls:
            assert any(t.tool_call_id == c.id for t in tool_messages(last))


async def test_model_errors_become_an_error_event_then_turn_complete(repo: Path, state_dir: Path):
    auth = ModelError(
        "the model server at x requires an API key: set CORRAL_LLM_API_KEY", kind="auth"
    )
    _mgr, disc, _ = await open_one(state_dir, repo, auth, Turn("recovered"))
    await ask(disc)
    errors = disc.events.events("error")
    assert errors[0].data.message.endswith("set CORRAL_LLM_API_KEY")
    assert kinds(disc)[-1] == "turn_complete"
    await ask(disc, "again")
    assert kinds(disc)[-1] == "turn_complete"


async def test_no_model_refuses_with_no_model(repo: Path, state_dir: Path):
    mgr = Discussions(state_dir, None)
    disc = await mgr.start(repo)
    with pytest.raises(CorralError) as info:
        await disc.send("hello")
    assert str(info.value) == NO_MODEL
    with pytest.raises(CorralError, match="no model"):
        await disc.promote()


# --- read-only ------------------------------------------------------------------------


async def test_write_edit_and_shell_are_refused_before_running(repo: Path, state_dir: Path):
    (repo / "keep.txt").write_text("original\n")
    turns = [
        tool_turn(
            call("write_file", "w", path="new.txt", content="x"),
            call("edit_file", "e", path="keep.txt", old_text="original", new_text="changed"),
            call("shell", "s", command="touch shelled.txt"),
        ),
        Turn("I cannot change files here."),
    ]
    _mgr, disc, provider = await open_one(state_dir, repo, *turns)
    await ask(disc, "please change keep.txt")
    assert not (repo / "new.txt").exists() and not (repo / "shelled.txt").exists()
    assert (repo / "keep.txt").read_text() == "original\n"
    # what the model received in its next request
    results = tool_messages(provider.calls[1].messages)
    assert [m.content for m in results] == [DISCUSSION_MUTATION_REFUSAL] * 3
    assert all("not a file-permission problem" in m.content for m in results)
    assert [m.tool_call_id for m in results] == ["w", "e", "s"]
    refusals = disc.events.events("refusal")
    assert [e.data.tool for e in refusals] == ["write_file", "edit_file", "shell"]
    assert all(e.data.reason == DISCUSSION_MUTATION_REFUSAL for e in refusals)
    tool_results = disc.events.events("tool_result")
    assert all(e.data.ok is False for e in tool_results)
    assert all("read-only" in e.data.summary for e in tool_results)
    assert kinds(disc)[-1] == "turn_complete"


@pytest.mark.parametrize("how", ["dotdot", "absolute", "symlink", "grep_outside"])
async def test_reads_outside_the_repo_are_refused_to_the_model(
    tmp_path: Path, repo: Path, state_dir: Path, how: str
):
    outside = tmp_path / "secret"
    outside.mkdir()
    (outside / "key.txt").write_text("sk-ant-SECRET\n")
    if how == "dotdot":
        request = call("read_file", path="../secret/key.txt")
    elif how == "absolute":
        request = call("read_file", path=str(outside / "key.txt"))
    elif how == "symlink":
        os.symlink(outside / "key.txt", repo / "link.txt")
        request = call("read_file", path="link.txt")
    else:
        request = call("grep_files", pattern="sk-ant", path=str(outside))
    _mgr, disc, provider = await open_one(state_dir, repo, tool_turn(request), Turn("cannot"))
    await ask(disc)
    received = tool_messages(provider.calls[1].messages)
    assert len(received) == 1
    assert "SECRET" not in received[0].content
    assert "outside the worktree" in received[0].content
    assert "SECRET" not in json.dumps([e.to_dict() for e in disc.events.events()])
    assert disc.events.events("refusal")[0].data.tool == request.name
    assert disc.events.events("tool_result")[0].data.ok is False


async def test_reads_inside_the_repo_reach_the_model(repo: Path, state_dir: Path):
    (repo / "src").mkdir()
    (repo / "src" / "app.py").write_text("def handler():\n    return 42\n")
    turns = [
        tool_turn(
            call("list_dir", "l", path="src"),
            call("grep_files", "g", pattern="return 42"),
            call("read_file", "r", path=str(repo / "src" / "app.py")),  # absolute inside: fine
        ),
        Turn("handler returns 42"),
    ]
    _mgr, disc, provider = await open_one(state_dir, repo, *turns)
    await ask(disc)
    received = {m.tool_call_id: m.content for m in tool_messages(provider.calls[1].messages)}
    assert "app.py" in received["l"]
    assert "return 42" in received["g"]
    assert "def handler" in received["r"]
    assert disc.events.events("refusal") == []


# --- preparing and promoting -------------------------------------------------------------


async def test_prepare_coding_task_records_a_proposal_and_starts_nothing(
    repo: Path, state_dir: Path
):
    turns = [
        tool_turn(
            call(
                "prepare_coding_task",
                intent="  Add a --verbose flag to the CLI  ",
                constraints=["keep the default quiet", " ", 3],
            )
        ),
        Turn("Prepared; review it and start coding when ready."),
    ]
    _mgr, disc, provider = await open_one(state_dir, repo, *turns)
    await ask(disc, "add a verbose flag")
    prepared = disc.events.events("task_prepared")
    assert len(prepared) == 1
    assert prepared[0].data.intent == "Add a --verbose flag to the CLI"
    assert prepared[0].data.constraints == ["keep the default quiet"]
    ks = kinds(disc)
    assert ks.index("assistant_message") < ks.index("task_prepared") < ks.index("turn_complete")
    assert disc.prepared_task is not None
    assert disc.prepared_task.intent == "Add a --verbose flag to the CLI"
    assert "Nothing has started" in tool_messages(provider.calls[1].messages)[0].content
    assert await disc.constraints_for_start() == ["keep the default quiet"]
    edited = disc.edit_prepared("Add --verbose and -v", ["keep the default quiet", "document it"])
    assert edited.constraints == ["keep the default quiet", "document it"]
    assert await disc.constraints_for_start() == ["keep the default quiet", "document it"]
    assert kinds(disc)[-1] == "task_prepared"
    # nothing changed in the repo
    assert sorted(p.name for p in repo.iterdir()) == [".git"]


async def test_a_new_message_clears_the_prepared_task_and_promote_needs_a_conversation(
    repo: Path, state_dir: Path
):
    """A prepared task answers the conversation as it stood: saying more
    drops it (a stale task must not start); promoting nothing is refused."""
    turns = [
        tool_turn(call("prepare_coding_task", intent="Add a flag", constraints=[])),
        Turn("Prepared."),
        Turn("Noted."),
    ]
    _mgr, disc, _provider = await open_one(state_dir, repo, *turns)
    with pytest.raises(CorralError, match="has no turns yet"):
        await disc.promote()
    await ask(disc, "add a flag")
    assert disc.prepared_task is not None
    await ask(disc, "actually, make it an option in the config file")
    assert disc.prepared_task is None
    saved = json.loads((state_dir / "discussions" / f"{disc.id}.json").read_text())
    assert saved.get("prepared_task") is None


async def test_promote_retries_until_strict_json(repo: Path, state_dir: Path):
    good = json.dumps(
        {"proposed_intent": "Cache the parsed config", "constraints": ["no new deps", ""]}
    )
    _mgr, disc, provider = await open_one(
        state_dir, repo, Turn("We could cache it."), Turn("not json at all"), Turn(good)
    )
    with pytest.raises(CorralError, match="no turns yet"):
        await disc.promote()
    await ask(disc, "config parsing is slow, no new deps please")
    task = await disc.promote()
    assert task.intent == "Cache the parsed config"
    assert task.constraints == ["no new deps"]
    assert disc.prepared_task == task
    distill = provider.calls[-1]
    assert distill.temperature == 0.0 and distill.tools == ()
    assert "Operator: config parsing is slow" in distill.prompt
    assert "Assistant: We could cache it." in distill.prompt


async def test_promote_gives_up_after_three_attempts(repo: Path, state_dir: Path):
    _mgr, disc, _ = await open_one(
        state_dir, repo, Turn("sure"), Turn("{}"), Turn("nope"), Turn('{"constraints": []}')
    )
    await ask(disc)
    with pytest.raises(CorralError, match="after 3 attempts: the model returned no proposed"):
        await disc.promote()
    assert disc.prepared_task is None


async def test_constraints_for_start_without_a_proposal(repo: Path, state_dir: Path):
    mgr, disc, provider = await open_one(state_dir, repo)
    assert await disc.constraints_for_start() == []  # no turns: agreed none
    provider.push(Turn("ok"), ModelError("down", kind="unavailable"))
    provider.push(ModelError("down", kind="unavailable"), ModelError("down", kind="server"))
    await ask(disc)
    with pytest.raises(CorralError, match="No task was started"):
        await disc.constraints_for_start()
    provider.push(Turn('{"proposed_intent": "x", "constraints": ["c1"]}'))
    assert await disc.constraints_for_start() == ["c1"]
    await mgr.close(disc.id)


# --- lifecycle ---------------------------------------------------------------------------


async def test_at_most_eight_open_discussions(repo: Path, state_dir: Path):
    mgr = Discussions(state_dir, ScriptedProvider())
    opened = [await mgr.start(repo) for _ in range(MAX_OPEN_DISCUSSIONS)]
    with pytest.raises(CorralError, match="8 discussions are already open"):
        await mgr.start(repo)
    await mgr.close(opened[0].id)
    await mgr.start(repo)
    racing = await asyncio.gather(*(mgr.start(repo) for _ in range(3)), return_exceptions=True)
    assert all(isinstance(r, CorralError) for r in racing)


async def test_concurrent_starts_cannot_pass_the_cap(repo: Path, state_dir: Path):
    mgr = Discussions(state_dir, ScriptedProvider())
    for _ in range(MAX_OPEN_DISCUSSIONS - 1):
        await mgr.start(repo)
    results = await asyncio.gather(*(mgr.start(repo) for _ in range(4)), return_exceptions=True)
    assert sum(isinstance(r, Discussion) for r in results) == 1
    assert sum(isinstance(r, CorralError) for r in results) == 3


async def test_start_needs_a_git_repo_and_normalizes_subdirs(
    tmp_path: Path, repo: Path, state_dir: Path
):
    mgr = Discussions(state_dir, ScriptedProvider())
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(CorralError, match="discuss needs a repo to ground itself in"):
        await mgr.start(plain)
    (repo / "sub").mkdir()
    disc = await mgr.start(repo / "sub")
    assert disc.repo == repo.resolve()


async def test_idle_discussions_expire_and_stay_resumable(repo: Path, state_dir: Path):
    now = [1000.0]
    mgr = Discussions(state_dir, ScriptedProvider([Turn("hi")]), clock=lambda: now[0])
    disc = await mgr.start(repo)
    await ask(disc)
    now[0] += 3601
    assert mgr.reap_idle() == [disc.id]
    with pytest.raises(CorralError, match="no open discussion"):
        mgr.get(disc.id)
    rows = mgr.list()
    assert [r["discussion_id"] for r in rows] == [disc.id] and rows[0]["open"] is False
    again = await mgr.resume(disc.id)
    assert again.transcript == disc.transcript


async def test_list_and_close(repo: Path, state_dir: Path):
    mgr = Discussions(state_dir, ScriptedProvider())
    disc = await mgr.start(repo)
    rows = mgr.list()
    assert rows[0]["discussion_id"] == disc.id and rows[0]["open"] and rows[0]["turns"] == 0
    await mgr.close(disc.id)
    assert mgr.list()[0]["open"] is False
    with pytest.raises(CorralError, match="no open discussion 'disc-nope'"):
        await mgr.close("disc-nope")
    with pytest.raises(CorralError):
        await disc.send("after close")


# --- persistence -----------------------------------------------------------------------------


async def test_resume_replays_without_rerunning_tools_and_rebinds_the_prompt(
    repo: Path, state_dir: Path
):
    (repo / "AGENTS.md").write_text("Use tabs. OLD-RULE\n")
    (repo / "CLAUDE.md").write_text("Claude rule: CLAUDE-TEXT\n")
    first = ScriptedProvider(
        [
            tool_turn(call("list_dir", "l1", path=".")),
            tool_turn(call("prepare_coding_task", "p1", intent="Do X", constraints=["c"])),
            Turn("Answer one"),
        ]
    )
    mgr = Discussions(state_dir, first)
    disc = await mgr.start(repo)
    await ask(disc, "Question one")
    system = first.calls[0].messages[0]
    assert system.role == "system"
    assert "OLD-RULE" in system.content and "CLAUDE-TEXT" in system.content
    assert GUIDANCE_LIMIT in system.content
    assert system.content.index("OLD-RULE") < system.content.index(GUIDANCE_LIMIT)
    saved = json.loads((state_dir / "discussions" / f"{disc.id}.json").read_text())
    assert saved["prepared_task"] == {"intent": "Do X", "constraints": ["c"]}
    assert [m["role"] for m in saved["messages"]][:2] == ["user", "assistant"]
    await mgr.close(disc.id)

    (repo / "AGENTS.md").write_text("Use spaces. NEW-RULE\n")
    (repo / "listed-after.txt").write_text("x")
    second = ScriptedProvider([Turn("Answer two")])
    mgr2 = Discussions(state_dir, second)
    again = await mgr2.resume(disc.id)
    assert again.id == disc.id
    replay = again.events.events()
    assert [e.seq for e in replay] == list(range(len(replay)))
    assert [e.type for e in replay] == [
        "user_message",
        "tool_call",
        "tool_call",
        "assistant_message",
        "task_prepared",
    ]
    assert all(getattr(e.data, "replayed", False) for e in replay)
    assert "tool_result" not in [e.type for e in replay]  # no tool re-ran
    assert again.prepared_task is not None and again.prepared_task.intent == "Do X"
    await ask(again, "Question two")
    req = second.calls[0].messages
    assert req[0].role == "system"
    assert "NEW-RULE" in req[0].content and "OLD-RULE" not in req[0].content
    assert "CLAUDE-TEXT" in req[0].content
    texts = [m.content for m in req]
    assert "Question one" in texts and "Answer one" in texts and texts[-1] == "Question two"
    assert sum(1 for m in req if m.role == "system") == 1
    assert again.prepared_task is None  # a new turn clears the old proposal
    assert len(second.calls) == 1


async def test_a_corrupt_saved_discussion_is_reported_not_deleted(repo: Path, state_dir: Path):
    mgr = Discussions(state_dir, ScriptedProvider())
    disc = await mgr.start(repo)
    await mgr.close(disc.id)
    path = state_dir / "discussions" / f"{disc.id}.json"
    path.write_text("{not json")
    with pytest.raises(CorralError, match="unreadable"):
        await mgr.resume(disc.id)
    assert path.exists()
    row = next(r for r in mgr.list() if r["discussion_id"] == disc.id)
    assert "unreadable" in row["error"]
    with pytest.raises(CorralError, match="not a discussion id"):
        await mgr.resume("../../etc/passwd")


# --- linked sessions ---------------------------------------------------------------------------


async def test_starting_a_session_consumes_the_prepared_task(repo: Path, state_dir: Path):
    mgr = Discussions(state_dir, ScriptedProvider())
    disc = await mgr.start(repo)
    disc.edit_prepared("Do it", ["careful"])
    assert disc.linked_sessions == []  # the supervisor records runs, not the discussion
    disc.link_session("sess-1")
    assert disc.prepared_task is None
    await mgr.close(disc.id)
    again = await Discussions(state_dir, ScriptedProvider()).resume(disc.id)
    assert again.prepared_task is None
    assert "task_prepared" not in kinds(again)


# --- the operator's policy ------------------------------------------------------------


def write_policy(repo: Path, text: str) -> None:
    folder = repo / ".corral" / "policies"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "rules.toml").write_text(text)


async def test_project_policy_can_refuse_task_preparation(
    repo: Path, state_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))  # no global policy
    write_policy(repo, 'deny_tool = ["prepare_coding_task"]\n')
    provider = ScriptedProvider(
        [
            tool_turn(call("prepare_coding_task", "p", intent="Fix the parser", constraints=["x"])),
            Turn("I cannot prepare a task here."),
        ]
    )
    mgr = Discussions(state_dir, provider)
    disc = await mgr.start(repo)
    await ask(disc, "fix the parser")
    assert disc.prepared_task is None
    assert "task_prepared" not in kinds(disc)
    assert "prepare_coding_task" not in {t.name for t in provider.calls[0].tools}
    [result] = tool_messages(provider.calls[1].messages)
    assert "denies the prepare_coding_task tool" in result.content
    assert "rules.toml" in result.content
    refusal = disc.events.events("refusal")[0].data
    assert refusal.tool == "prepare_coding_task"


async def test_policy_paths_and_tools_bind_the_read_tools(
    repo: Path, state_dir: Path, tmp_path: Path
):
    (repo / "secrets").mkdir()
    (repo / "secrets" / "key.txt").write_text("TOPSECRET\n")
    (repo / "open.txt").write_text("hello\n")
    write_policy(repo, '[deny]\npaths = ["secrets/"]\ntools = ["grep_files"]\n')
    provider = ScriptedProvider(
        [
            tool_turn(
                call("read_file", "r", path="secrets/key.txt"),
                call("list_dir", "l", path="."),
                call("grep_files", "g", pattern="TOPSECRET"),
            ),
            Turn("done"),
        ]
    )
    mgr = Discussions(state_dir, provider, global_policy=tmp_path / "no-global-policy.toml")
    disc = await mgr.start(repo)
    await ask(disc)
    received = {m.tool_call_id: m.content for m in tool_messages(provider.calls[1].messages)}
    assert "TOPSECRET" not in json.dumps(received)
    assert "denies access to secrets" in received["r"]
    assert "open.txt" in received["l"] and "secrets" not in received["l"]
    assert "no tool named 'grep_files'" in received["g"]
    assert "grep_files" not in {t.name for t in provider.calls[0].tools}


async def test_a_broken_policy_file_refuses_the_message(
    repo: Path, state_dir: Path, tmp_path: Path
):
    write_policy(repo, "deny_tool = [\n")
    provider = ScriptedProvider([Turn("never")])
    mgr = Discussions(state_dir, provider, global_policy=tmp_path / "no-global-policy.toml")
    disc = await mgr.start(repo)
    with pytest.raises(CorralError, match=r"rules\.toml.*fix or remove that policy file"):
        await disc.send("hello")
    assert not disc.answering and disc.transcript == [] and kinds(disc) == []
    assert provider.calls == []


async def test_close_mid_turn_cancels_it_and_keeps_the_record(repo: Path, state_dir: Path):
    gate = asyncio.Event()
    provider = ScriptedProvider([Turn("never")], gate=gate)
    mgr = Discussions(state_dir, provider)
    disc = await mgr.start(repo)
    sub = disc.subscribe()
    await disc.send("long question")
    await asyncio.sleep(0)
    await mgr.close(disc.id)
    assert not disc.answering and disc.closed
    assert [e.type for e in sub.get_nowait()][-1] == "turn_complete"
    assert sub.closed
    assert (state_dir / "discussions" / f"{disc.id}.json").exists()
    assert mgr.list()[0]["open"] is False


async def test_in_repo_symlinks_and_unknown_tools(repo: Path, state_dir: Path):
    (repo / "real.txt").write_text("inside content\n")
    os.symlink(repo / "real.txt", repo / "alias.txt")
    turns = [
        tool_turn(
            call("read_file", "r", path="alias.txt"),
            call("ask_user", "a", prompt="may I?"),
        ),
        Turn("ok"),
    ]
    _mgr, disc, provider = await open_one(state_dir, repo, *turns)
    await ask(disc)
    received = {m.tool_call_id: m.content for m in tool_messages(provider.calls[1].messages)}
    assert "inside content" in received["r"]
    assert "no tool named 'ask_user'" in received["a"]


async def test_the_event_buffer_is_bounded_and_slow_readers_are_dropped(
    repo: Path, state_dir: Path
):
    from corral.supervisor.discuss import (
        DISCUSS_EVENT_BUFFER_MAX,
        DISCUSS_SUBSCRIBER_QUEUE,
        DiscussSubscriptionDropped,
    )

    _mgr, disc, _ = await open_one(state_dir, repo)
    sub = disc.subscribe()
    for i in range(DISCUSS_SUBSCRIBER_QUEUE + 1):
        disc.events.emit(DiscussAssistantDeltaData(text=str(i)))
    assert len(disc.events.buffer) == DISCUSS_EVENT_BUFFER_MAX
    assert disc.events.buffer[0].seq == DISCUSS_SUBSCRIBER_QUEUE + 1 - DISCUSS_EVENT_BUFFER_MAX
    assert sub.dropped
    for _ in range(DISCUSS_SUBSCRIBER_QUEUE):
        await sub.get()
    with pytest.raises(DiscussSubscriptionDropped, match="resubscribe from"):
        await sub.get()
    late = disc.subscribe(from_seq=0)  # older than the buffer: replay from the oldest kept
    assert len(late.get_nowait()) == DISCUSS_EVENT_BUFFER_MAX


async def test_the_transcript_keeps_its_last_forty_rows_for_promote(repo: Path, state_dir: Path):
    """A long conversation keeps its newest 40 rows: what promote distils
    and what is saved, never an unbounded history."""
    replies = [Turn(f"answer {n}") for n in range(21)]
    _mgr, disc, _provider = await open_one(state_dir, repo, *replies)
    for n in range(21):
        await ask(disc, f"question {n}")
    assert len(disc.transcript) == TRANSCRIPT_MAX_TURNS == 40
    assert disc.transcript[0] == ("Operator", "question 1")  # the first exchange fell off
    assert disc.transcript[-1] == ("Assistant", "answer 20")
    assert "answer 0" not in disc.distill_transcript()


async def test_a_saved_discussion_whose_repository_is_no_longer_its_own_is_refused(
    repo: Path, state_dir: Path, tmp_path: Path
):
    """Resuming must not ground a conversation in another repository: when
    the saved folder is no longer a repository's top level (its .git gone
    and a parent repository around it), the resume says so."""
    outer = tmp_path / "outer"
    inner = outer / "inner"
    inner.mkdir(parents=True)
    init_repo(inner)
    mgr, disc, _provider = await open_one(state_dir, inner, Turn("hi"))
    await ask(disc)
    await mgr.close(disc.id)
    shutil.rmtree(inner / ".git")
    init_repo(outer)
    with pytest.raises(CorralError, match="belongs to a different repository"):
        await Discussions(state_dir, ScriptedProvider([Turn("x")])).resume(disc.id)


async def test_a_folder_under_a_home_repository_is_no_ground_for_a_discussion(
    state_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """A dotfiles repository at $HOME is refused as a discussion's ground
    with the reason, not reworded as "not a git repository"."""
    home = init_repo(tmp_path / "home")
    (home / "notes").mkdir()
    monkeypatch.setenv("HOME", str(home))
    with pytest.raises(CorralError, match="your home directory") as refused:
        await Discussions(state_dir, ScriptedProvider([Turn("x")])).start(home / "notes")
    assert "not a git repository" not in str(refused.value)
