"""Claude Code through Zed's ACP adapter (`claude-acp`, pinned in e2e/),
driven by corral over stdio against the scripted fake Anthropic server:
the model asks to write a file (with the adapter's own `mcp__acp__Write`
tool: it replaces Claude Code's Write when the client serves files), the
adapter sends `session/request_permission`, the operator allows it through
the API by the option's kind, the file is written through corral's
`fs/write_text_file` in the worktree, the turn ends with
`end_turn`, and the runtime verifies it (gate 2 unchanged). The session pins
a model the adapter offers (`models` in its answer to `session/new`): it is
asked for with `session/set_model`, and the model server sees it.

When the adapter's process is killed (kill -9) mid-turn, the session goes
dormant, not lost: the adapter announces `loadSession`, so a revive starts it
again with `session/load` on the same ACP session id, and the model's next
request carries the earlier conversation."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from corral.supervisor.events import (
    AgentStartedData,
    BlockedData,
    ConversationData,
    PlanTextData,
)
from corral.supervisor.states import CoderState as S
from tests.conftest import init_repo, row_of
from tests.e2e.support import AGENT_CLIS, agent_pids, open_sup, settle, until
from tests.fakes.agent_env import BIN_DIR, claude_launch, missing_cli
from tests.fakes.model_server import FakeModelServer, Reply, ToolCall

pytestmark = [pytest.mark.slow, AGENT_CLIS]

ADAPTER = BIN_DIR / "claude-code-acp"
NO_ADAPTER = missing_cli(ADAPTER, "npm ci --prefix e2e")
needs_adapter = pytest.mark.skipif(NO_ADAPTER is not None, reason=f"adapter: {NO_ADAPTER}")
OWN = ("PATH", "TERM", "SHELL", "USER")
TASK = "Write hello.txt saying hi"
PLAN_MODE = "Plan mode is active"  # what Claude Code tells the model in plan mode


def use_claude(
    tmp_path: Path, srv: FakeModelServer, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The supervisor's environment (inherited, then scrubbed) points Claude
    Code at a hermetic home and the fake server; the adapter on PATH."""
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


def is_adapter(argv: list[str]) -> bool:
    """The adapter's node process (Claude Code is its child)."""
    return len(argv) > 1 and Path(argv[0]).name == "node" and "claude-code-acp" in argv[1]


@needs_adapter
async def test_claude_over_acp_writes_the_file_through_a_permission_the_operator_grants(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = init_repo(tmp_path / "repo")
    with FakeModelServer([]) as srv:
        use_claude(tmp_path, srv, repo, monkeypatch)
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


@needs_adapter
async def test_a_killed_claude_adapter_goes_dormant_and_revives_with_session_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = init_repo(tmp_path / "repo")
    with FakeModelServer([]) as srv:
        use_claude(tmp_path, srv, repo, monkeypatch)
        sup = await open_sup(tmp_path, "claude", repairs=1)
        try:
            started = await sup.start(TASK, repo, engine="claude-acp")
            sid = started.session_id
            target = Path(started.worktree or "") / "hello.txt"
            # the first turn writes nothing (red check); the repair turn is slow
            srv.push(Reply("Let me look around first."), Reply("Thinking it over.", delay=60))
            await sup.confirm(sid)
            await until(
                sup, sid, "the repair turn's request", lambda: len(srv.turn_requests) == 2, 90
            )
            first = sup.get(sid).session.agent_identity
            assert first is not None and first.session_id
            killed = agent_pids(sup, sid, is_adapter)
            assert killed, "no claude-code-acp process under the session's agent"
            for pid in killed:
                os.kill(pid, signal.SIGKILL)
            # dormant, not lost: nothing asked of the operator, the run not failed
            await until(sup, sid, "dormant", lambda: row_of(sup, sid).dormant, 30)
            row = row_of(sup, sid)
            assert row.state is S.RUNNING and row.needs_you is None, row
            srv.push(
                Reply(
                    "I'll write it.",
                    [ToolCall("mcp__acp__Write", {"file_path": str(target), "content": "hi\n"})],
                ),
                Reply("Wrote hello.txt."),
            )
            before = len(srv.turn_requests)
            await sup.revive(sid)
            row = await sup.wait_for(sid, needs=True, timeout=90)
            assert row.needs_you == "question", row.error
            await sup.respond(sid, "allow_once")
            row = await settle(sup, sid, {S.NEEDS_APPROVAL, S.FAILED}, 90)
            assert row.state is S.NEEDS_APPROVAL, row.error
            assert target.read_text() == "hi\n"
            events = [e.data for e in sup.replay(sid)]
            said = [d.text for d in events if isinstance(d, PlanTextData)]
            loading = f"conversation {first.session_id} (session/load)"
            assert any(loading in t for t in said), said[-10:]
            assert len([d for d in events if isinstance(d, AgentStartedData)]) == 2
            # the conversation the adapter replays while loading is not journaled twice
            said = [d.text for d in events if isinstance(d, ConversationData)]
            assert sum("Let me look around first." in t for t in said) == 1, said
            again = sup.get(sid).session.agent_identity
            assert again is not None and again.session_id == first.session_id
            # the model's next request carries the conversation before the kill
            resumed = json.dumps(srv.turn_requests[before].body["messages"])
            assert TASK in resumed and "Let me look around first." in resumed
            assert "same conversation" in resumed  # corral's note to continue
            # the adapter kept (and loaded) it in the session's own provider home
            home = tmp_path / "state" / "agents" / sid / "provider-home"
            assert list(home.glob(f"projects/*/{first.session_id}.jsonl")), sorted(
                str(p) for p in home.rglob("*")
            )[:20]
        finally:
            await sup.close()


@needs_adapter
async def test_a_claude_write_outside_the_worktree_is_refused_and_logged_as_blocked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Even with the operator's allow, a write the adapter sends to
    `fs/write_text_file` outside the worktree is refused by corral's policy:
    nothing lands, the log has a typed `blocked` event, the model is told."""
    repo = init_repo(tmp_path / "repo")
    outside = tmp_path / "outside.txt"
    with FakeModelServer([]) as srv:
        use_claude(tmp_path, srv, repo, monkeypatch)
        sup = await open_sup(tmp_path, "claude")
        try:
            started = await sup.start(TASK, repo, engine="claude-acp")
            sid = started.session_id
            srv.push(
                Reply(
                    "I'll write it.",
                    [ToolCall("mcp__acp__Write", {"file_path": str(outside), "content": "pwn\n"})],
                ),
                Reply("The write was refused."),
            )
            await sup.confirm(sid)
            row = await sup.wait_for(sid, needs=True, timeout=90)
            assert row.needs_you == "question", row.error
            assert str(outside) in (row.question_prompt or "")
            await sup.respond(
                sid, "allow_once"
            )  # the operator allows; corral's policy still refuses
            row = await settle(sup, sid, {S.NEEDS_APPROVAL, S.FAILED}, 90)
            assert not outside.exists()
            assert row.state is S.FAILED  # nothing written: the check stays red
            logged = [e.data for e in sup.replay(sid)]
            blocked = [d for d in logged if isinstance(d, BlockedData)]
            assert [(b.what, b.by) for b in blocked] == [
                (f"fs/write_text_file {outside}", "policy")
            ], blocked
            assert "outside the session's worktree" in blocked[0].why
            failed = [
                d
                for d in logged
                if isinstance(d, ConversationData)
                and d.part == "tool_update"
                and d.status == "failed"
            ]
            assert failed and "refused by corral" in failed[0].text, failed
            # the model is told the write failed, and why
            told = json.dumps(srv.turn_requests[-1].body["messages"])
            assert "refused by corral" in told and "is_error" in told
        finally:
            await sup.close()


def running(pid: int) -> bool:
    """`pid` exists and is not a zombie (a dead process its parent has not reaped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@needs_adapter
async def test_cancel_mid_turn_ends_the_claude_turn_as_cancelled_and_stops_the_agent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The model is slow to answer; the operator cancels while the prompt is
    in flight: `session/cancel` ends the turn with the agent's own
    `cancelled`, the session is abandoned at once, and no agent process is left."""
    repo = init_repo(tmp_path / "repo")
    with FakeModelServer([]) as srv:
        use_claude(tmp_path, srv, repo, monkeypatch)
        sup = await open_sup(tmp_path, "claude")
        try:
            started = await sup.start(TASK, repo, engine="claude-acp")
            sid = started.session_id
            srv.push(Reply("Thinking it over.", delay=60))
            await sup.confirm(sid)
            await until(sup, sid, "the turn's request", lambda: len(srv.turn_requests) == 1, 90)
            pids = agent_pids(sup, sid, lambda _argv: True)
            assert any(
                Path(f"/proc/{p}/cmdline").read_bytes().find(b"claude-code-acp") > 0 for p in pids
            )
            began = time.monotonic()
            result = await sup.cancel(sid)
            assert result.state is S.ABANDONED, result
            row = await settle(sup, sid, {S.ABANDONED}, 5)
            assert time.monotonic() - began < 5, "cancel waited for the model's slow answer"
            logged = [e.data for e in sup.replay(sid)]
            ends = [
                d.text for d in logged if isinstance(d, ConversationData) and d.part == "turn_end"
            ]
            assert ends == ["cancelled"], ends
            assert row.agent_status == "exited", row
            await until(
                sup,
                sid,
                lambda: f"the agent's processes gone (left: {[p for p in pids if running(p)]})",
                lambda: not any(running(p) for p in pids),
                10,
            )
        finally:
            await sup.close()


@needs_adapter
async def test_a_mode_the_operator_sets_lands_in_claude_before_it_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`corral mode ID plan` while a turn runs: the adapter takes it with
    `session/set_mode`, only then the session's offers say `plan`, and Claude
    Code's next request to the model is in plan mode."""
    repo = init_repo(tmp_path / "repo")
    plan_mode = "Plan mode is active"  # what Claude Code tells the model in plan mode
    with FakeModelServer([]) as srv:
        use_claude(tmp_path, srv, repo, monkeypatch)
        sup = await open_sup(tmp_path, "claude", repairs=1)
        try:
            started = await sup.start(TASK, repo, engine="claude-acp")
            sid = started.session_id
            # the first turn is slow (time to switch mode while it runs); the repair follows
            srv.push(Reply("Thinking it over.", delay=15), Reply("Planning."))
            await sup.confirm(sid)
            await until(sup, sid, "the turn's request", lambda: len(srv.turn_requests) == 1, 90)
            offers = sup.get(sid).session.agent_offers
            assert offers is not None and offers.mode == "default"
            assert await sup.set_mode(sid, "plan") == {"mode": "plan"}
            offers = sup.get(sid).session.agent_offers
            assert offers is not None and offers.mode == "plan"
            modes = [
                d.text
                for d in (e.data for e in sup.replay(sid))
                if isinstance(d, ConversationData) and d.part == "mode"
            ]
            assert modes[-1] == "plan (set by the operator)", modes
            row = await settle(sup, sid, {S.NEEDS_APPROVAL, S.FAILED}, 90)
            assert row.agent_mode == "plan", row
            assert len(srv.turn_requests) == 2
            before, after = (json.dumps(r.body) for r in srv.turn_requests)
            assert plan_mode not in before and plan_mode in after
        finally:
            await sup.close()


@needs_adapter
async def test_a_mode_then_a_model_set_mid_turn_both_reach_claude_s_next_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While a turn runs the operator sets the mode (`plan`), then the model
    (`opus`): each is reported once the adapter took it, and the fake
    Anthropic server sees both in Claude Code's next request — the model id
    it asks for and the plan mode's instructions (the mode switch does not
    put the model back; a switch mid-turn is not lost)."""
    repo = init_repo(tmp_path / "repo")
    with FakeModelServer([]) as srv:
        use_claude(tmp_path, srv, repo, monkeypatch)
        sup = await open_sup(tmp_path, "claude", repairs=1)
        try:
            started = await sup.start(TASK, repo, engine="claude-acp")
            sid = started.session_id
            srv.push(Reply("Thinking it over.", delay=15), Reply("Planning."))
            await sup.confirm(sid)
            await until(sup, sid, "the turn's request", lambda: len(srv.turn_requests) == 1, 90)
            assert await sup.set_mode(sid, "plan") == {"mode": "plan"}
            assert await sup.set_model(sid, "opus") == {"model": "opus"}
            assert len(srv.turn_requests) == 1, "the switch waited for the turn to end"
            row = await settle(sup, sid, {S.NEEDS_APPROVAL, S.FAILED}, 90)
            offers = sup.get(sid).session.agent_offers
            assert offers is not None and (offers.mode, offers.model) == ("plan", "opus")
            assert row.agent_mode == "plan", row
            asked = [
                (str(r.body["model"]), PLAN_MODE in json.dumps(r.body)) for r in srv.turn_requests
            ]
            assert len(asked) == 2 and "opus" not in asked[0][0] and not asked[0][1], asked
            assert "opus" in asked[1][0] and asked[1][1], asked
        finally:
            await sup.close()


@needs_adapter
async def test_claude_answers_with_sonnet_for_haiku_in_plan_mode_and_corral_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Claude Code's own rule, seen on the wire: with `haiku` chosen, plan
    mode answers with Sonnet (the adapter still reports haiku). corral says
    so when the operator makes that combination, and haiku is back on the
    wire once the mode leaves plan."""
    repo = init_repo(tmp_path / "repo")
    with FakeModelServer([]) as srv:
        use_claude(tmp_path, srv, repo, monkeypatch)
        sup = await open_sup(tmp_path, "claude", repairs=2)
        try:
            started = await sup.start(TASK, repo, engine="claude-acp")
            sid = started.session_id
            srv.push(
                Reply("Thinking it over.", delay=15),
                Reply("Planning.", delay=15),
                Reply("Done planning."),
            )
            await sup.confirm(sid)
            await until(sup, sid, "the turn's request", lambda: len(srv.turn_requests) == 1, 90)
            await sup.set_mode(sid, "plan")
            await sup.set_model(sid, "haiku")
            said = [e.data.text for e in sup.replay(sid) if isinstance(e.data, PlanTextData)]
            assert any("in plan mode Claude Code answers with Sonnet" in t for t in said), said
            await until(sup, sid, "the second turn", lambda: len(srv.turn_requests) == 2, 90)
            await sup.set_mode(sid, "default")
            row = await settle(sup, sid, {S.NEEDS_APPROVAL, S.FAILED}, 90)
            assert row.agent_mode == "default", row
            asked = [
                (str(r.body["model"]), PLAN_MODE in json.dumps(r.body)) for r in srv.turn_requests
            ]
            assert len(asked) == 3, asked
            assert "sonnet" in asked[1][0] and asked[1][1], asked  # plan mode: Sonnet answers
            # out of plan mode haiku answers (the plan's reminder stays in the history)
            assert "haiku" in asked[2][0], asked
        finally:
            await sup.close()


@needs_adapter
async def test_a_claude_bash_write_outside_the_worktree_is_blocked_not_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Claude Code's adapter runs its Bash through corral's `terminal/*`
    (a whole shell line as the command): `echo pwn > <outside>` succeeds in
    that sandbox's private /tmp while nothing lands on the host; corral logs
    a typed `blocked` event by its policy and the board says so."""
    from tests.conftest import row_of

    repo = init_repo(tmp_path / "repo")
    outside = tmp_path / "outside.txt"
    with FakeModelServer([]) as srv:
        use_claude(tmp_path, srv, repo, monkeypatch)
        sup = await open_sup(tmp_path, "claude")
        try:
            started = await sup.start(TASK, repo, engine="claude-acp")
            sid = started.session_id
            command = f"echo pwn > {outside} && echo wrote it"
            srv.push(
                Reply(
                    "I'll write it.",
                    [
                        ToolCall(
                            "mcp__acp__Bash",
                            {"command": command, "timeout": 30000, "description": "Write it"},
                        )
                    ],
                ),
                Reply("Wrote it."),
            )
            await sup.confirm(sid)
            row = await sup.wait_for(sid, needs=True, timeout=90)
            assert row.needs_you == "question", row.error
            await sup.respond(sid, "allow_once")
            row = await settle(sup, sid, {S.NEEDS_APPROVAL, S.FAILED}, 90)
            assert not outside.exists()
            logged = [e.data for e in sup.replay(sid)]
            told = json.dumps(srv.turn_requests[-1].body["messages"])
            # the shell ran the line and said it went well
            assert "wrote it" in told and "No such file" not in told, told[-800:]
            blocked = [d for d in logged if isinstance(d, BlockedData)]
            assert [(b.what, b.by) for b in blocked] == [(f"shell write {outside}", "policy")], (
                blocked,
                [d for d in logged if isinstance(d, ConversationData) and "tool" in d.part],
            )
            assert "not on the host" in blocked[0].why
            assert f"shell write {outside}" in (row_of(sup, sid).boundary_notice or "")
        finally:
            await sup.close()
