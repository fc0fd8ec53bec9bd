"""The real Gemini CLI (npm, e2e/node_modules) in ACP mode (`gemini-acp`),
driven by corral over stdio against the scripted fake Gemini server on
127.0.0.1: the model asks to write a file, Gemini CLI sends
`session/request_permission` (a corral question with its own options), the
operator allows it through the API (by the option's kind), Gemini writes the
file with its own tool inside corral's sandbox (corral offers Gemini no
`fs/*`: see `acp.agents`), the turn ends with `end_turn`, the status came
from the protocol, and the runtime verifies the contract green (gate 2
unchanged)."""

from __future__ import annotations

from pathlib import Path

import pytest

from corral.supervisor.events import BlockedData, ConversationData, PaneAnswerData
from corral.supervisor.states import CoderState as S
from tests.conftest import init_repo
from tests.e2e.support import AGENT_CLIS, open_sup, settle
from tests.fakes.agent_env import AgentLaunch, gemini_bin, gemini_launch, missing_cli
from tests.fakes.model_server import FakeModelServer, HttpError, Reply, ToolCall, Turn

pytestmark = [pytest.mark.slow, AGENT_CLIS]

NO_GEMINI = missing_cli(gemini_bin(), "npm ci --prefix e2e")
needs_gemini = pytest.mark.skipif(NO_GEMINI is not None, reason=f"Gemini CLI: {NO_GEMINI}")
OWN = ("PATH", "TERM", "SHELL", "USER")


def apply(launch: AgentLaunch, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The supervisor's environment (inherited, then scrubbed) points at a
    hermetic Gemini home and the fake server; the CLI alone on PATH."""
    for key, value in launch.env.items():
        if key not in OWN:
            monkeypatch.setenv(key, value)
    bin_dir = tmp_path / "agent-bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "gemini").symlink_to(launch.argv[0])
    monkeypatch.setenv("PATH", f"{bin_dir}:{launch.env['PATH']}")


@needs_gemini
async def test_gemini_over_acp_writes_the_file_through_a_permission_the_operator_grants(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = init_repo(tmp_path / "repo")
    with FakeModelServer([]) as srv:
        apply(gemini_launch(tmp_path / "gemini", srv.url, repo, None), monkeypatch, tmp_path)
        sup = await open_sup(tmp_path, "gemini")
        try:
            started = await sup.start("Write hello.txt saying hi", repo, engine="gemini-acp")
            sid = started.session_id
            target = Path(started.worktree or "") / "hello.txt"
            srv.push(
                Reply(
                    "Writing it.",
                    [ToolCall("write_file", {"file_path": str(target), "content": "hi\n"})],
                ),
                Reply("Wrote hello.txt."),
            )
            await sup.confirm(sid)
            row = await sup.wait_for(sid, needs=True, timeout=90)
            events = [(e.kind.value, e.data) for e in sup.replay(sid)]
            assert row.needs_you == "question", "\n".join(str(e) for e in events)
            options = sup.question_options(sid)
            assert any(o.endswith("[allow_once]") for o in options), options
            assert not target.exists()
            await sup.respond(sid, "allow_once")
            row = await settle(sup, sid, {S.NEEDS_APPROVAL, S.FAILED}, 90)
            assert row.state is S.NEEDS_APPROVAL, row.error
            assert target.read_text() == "hi\n"
            logged = [e.data for e in sup.replay(sid)]
            assert any(isinstance(d, PaneAnswerData) for d in logged)
            ends = [
                d.text for d in logged if isinstance(d, ConversationData) and d.part == "turn_end"
            ]
            assert ends == ["end_turn"]
            statuses = [
                getattr(d, "source", None) for d in logged if type(d).__name__ == "AgentStatusData"
            ]
            assert statuses and set(statuses) == {"protocol"}
        finally:
            await sup.close()


def is_gemini(argv: list[str]) -> bool:
    """Gemini CLI's node processes (it relaunches itself as its own child)."""
    return len(argv) > 1 and Path(argv[0]).name == "node" and "gemini" in argv[1]


@needs_gemini
async def test_a_killed_gemini_revives_loading_its_conversation_or_saying_it_starts_afresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Gemini CLI killed mid-turn is dormant; the revive either loads its
    conversation (`session/load`, as 0.61 does here with its chats kept in
    its home) or, when Gemini answers "Internal error" ("No previous sessions
    found", as seen with other homes; the fake agent's `forget` script plays
    that in tests/integration/test_acp_agent.py), says so and starts Gemini
    on a fresh conversation. Either way the work gets done and the log says
    which happened."""
    import os
    import signal

    from corral.supervisor.events import PlanTextData
    from tests.conftest import row_of
    from tests.e2e.support import agent_pids, until

    repo = init_repo(tmp_path / "repo")
    with FakeModelServer([]) as srv:
        apply(gemini_launch(tmp_path / "gemini", srv.url, repo, None), monkeypatch, tmp_path)
        sup = await open_sup(tmp_path, "gemini")
        try:
            started = await sup.start("Write hello.txt saying hi", repo, engine="gemini-acp")
            sid = started.session_id
            target = Path(started.worktree or "") / "hello.txt"
            srv.push(Reply("Thinking it over.", delay=60))
            await sup.confirm(sid)
            await until(sup, sid, "the first turn's request", lambda: srv.turn_requests, 90)
            killed = agent_pids(sup, sid, is_gemini)
            assert killed, "no gemini process under the session's agent"
            for pid in killed:
                os.kill(pid, signal.SIGKILL)
            await until(sup, sid, "dormant", lambda: row_of(sup, sid).dormant, 30)
            srv.push(
                Reply(
                    "Writing it.",
                    [ToolCall("write_file", {"file_path": str(target), "content": "hi\n"})],
                ),
                Reply("Wrote hello.txt."),
            )
            await sup.revive(sid)
            row = await sup.wait_for(sid, needs=True, timeout=90)
            said = [e.data.text for e in sup.replay(sid) if isinstance(e.data, PlanTextData)]
            assert row.needs_you == "question", (row.error, said[-6:])
            loaded = any("replayed its conversation" in t for t in said)
            fresh = any(
                "could not load its conversation" in t and "starting a fresh conversation" in t
                for t in said
            )
            assert loaded != fresh, said[-6:]  # one of the two, said
            await sup.respond(sid, "allow_once")
            row = await settle(sup, sid, {S.NEEDS_APPROVAL, S.FAILED}, 90)
            assert row.state is S.NEEDS_APPROVAL, row.error
            assert target.read_text() == "hi\n"
        finally:
            await sup.close()


QUOTA = "Quota exceeded for metric: generate_content_free_tier_requests, limit: 0"
INVALID = "Request contains an invalid argument: contents.parts must not be empty."


@needs_gemini
@pytest.mark.parametrize(
    ("refusal", "reason"),
    [
        # a used-up quota (limit 0: Gemini CLI does not retry it)
        ([HttpError(429, QUOTA, times=None)], QUOTA),
        # a request the API refuses as invalid
        ([HttpError(400, INVALID, times=None)], f"{INVALID} (400 INVALID_ARGUMENT)"),
        # an answer blocked for safety: Gemini CLI retries, then ends the turn
        # with `end_turn` and sends no reason
        ([Reply("", finish="SAFETY")] * 8, "its model's answer was likely blocked"),
    ],
    ids=["quota", "invalid", "safety"],
)
async def test_gemini_s_refusal_reasons_reach_the_log_and_the_board(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, refusal: list[Turn], reason: str
) -> None:
    """The fake Gemini API refuses every request; the reason Gemini CLI gets
    (or, for a safety block it does not pass on, that its turn was empty) is
    a typed `blocked` event by the provider, and the session's error says
    it, not a bare "Internal error" or the API's raw JSON."""
    repo = init_repo(tmp_path / "repo")
    with FakeModelServer([]) as srv:
        apply(gemini_launch(tmp_path / "gemini", srv.url, repo, None), monkeypatch, tmp_path)
        sup = await open_sup(tmp_path, "gemini")
        try:
            started = await sup.start("Write hello.txt saying hi", repo, engine="gemini-acp")
            sid = started.session_id
            srv.push(*refusal)
            await sup.confirm(sid)
            row = await settle(sup, sid, {S.NEEDS_APPROVAL, S.FAILED}, 150)
            assert row.state is S.FAILED, row
            logged = [e.data for e in sup.replay(sid)]
            blocked = [d for d in logged if isinstance(d, BlockedData)]
            assert [b.by for b in blocked] == ["provider"], blocked
            assert reason in blocked[0].why, blocked
            assert "Internal error" not in blocked[0].why and '{"error"' not in blocked[0].why
            if "likely blocked" not in reason:  # the prompt failed: the board says why
                assert reason in (row.error or ""), row.error
                assert '{"error"' not in (row.error or ""), row.error
        finally:
            await sup.close()


@needs_gemini
async def test_a_write_gemini_s_own_shell_makes_outside_the_worktree_is_blocked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Gemini CLI runs its shell tool itself, inside corral's sandbox: the
    model asks for `echo pwn > <outside>` (outside the worktree, a private
    /tmp inside the sandbox), the operator allows it, the shell succeeds in
    there and nothing lands on the host. corral logs a typed `blocked` event
    by its policy and the board's needs column says so."""
    from tests.conftest import row_of

    repo = init_repo(tmp_path / "repo")
    outside = tmp_path / "outside.txt"
    with FakeModelServer([]) as srv:
        apply(gemini_launch(tmp_path / "gemini", srv.url, repo, None), monkeypatch, tmp_path)
        sup = await open_sup(tmp_path, "gemini", repairs=0)
        try:
            started = await sup.start("Write hello.txt saying hi", repo, engine="gemini-acp")
            sid = started.session_id
            command = f"echo pwn > {outside}"
            srv.push(
                Reply("Writing it.", [ToolCall("run_shell_command", {"command": command})]),
                Reply("Wrote it."),
            )
            await sup.confirm(sid)
            row = await sup.wait_for(sid, needs=True, timeout=90)
            assert row.needs_you == "question", row.error
            await sup.respond(sid, "allow_once")
            row = await settle(sup, sid, {S.NEEDS_APPROVAL, S.FAILED}, 90)
            assert not outside.exists()
            logged = [e.data for e in sup.replay(sid)]
            blocked = [d for d in logged if isinstance(d, BlockedData)]
            assert [(b.what, b.by) for b in blocked] == [(f"shell write {outside}", "policy")], (
                blocked,
                [d for d in logged if isinstance(d, ConversationData) and "tool" in d.part],
            )
            assert "not on the host" in blocked[0].why
            assert f"shell write {outside}" in (row_of(sup, sid).boundary_notice or "")
        finally:
            await sup.close()
