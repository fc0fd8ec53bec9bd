"""Real Claude Code and Codex (from npm, e2e/node_modules) run by corral's
supervisor in real tmux panes, against scripted fake model servers on
127.0.0.1: trust dialogs answered by option text, the model's tool call
writes the file, end of turn from the hook, runtime verification green,
`needs_approval`; a permission prompt becomes `needs_you: question` and an
API answer lets it proceed; cancel mid-turn stops the agent within 5 s."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral.supervisor.api import Supervisor
from corral.supervisor.events import AgentStartedData, PaneAnswerData
from corral.supervisor.states import CoderState as S
from tests.conftest import init_repo
from tests.e2e.support import AGENT_CLIS, kill_tmux, open_sup, settle
from tests.fakes.agent_env import claude_bin, claude_launch, codex_launch, missing_clis
from tests.fakes.model_server import FakeModelServer, Reply, ToolCall

MISSING = missing_clis()
pytestmark = [
    pytest.mark.slow,
    AGENT_CLIS,
    pytest.mark.skipif(MISSING is not None, reason=f"agent CLIs not installed: {MISSING}"),
]

HANDLED = (
    "HOME",
    "TMPDIR",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_API_KEY",
    "CODEX_HOME",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
    "DISABLE_AUTOUPDATER",
    "DISABLE_TELEMETRY",
    "DISABLE_ERROR_REPORTING",
    "CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL",
    "CLAUDE_CODE_TMPDIR",
    "CLAUDE_CODE_MAX_RETRIES",
    "CORRAL_FAKE_OPENAI_KEY",
    "LANG",
)


def network_account(sup: Supervisor, sid: str) -> str:
    """What the session's log says the agent was started with."""
    started = [e.data for e in sup.replay(sid) if isinstance(e.data, AgentStartedData)]
    return started[-1].sandbox or ""


@pytest.fixture
def agent_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[callable]:  # type: ignore[valid-type]
    """Point the supervisor's environment (inherited, then scrubbed, by the
    panes) at a hermetic agent home and the fake server."""

    def apply(env: dict[str, str], permission_mode: str | None = None) -> None:
        for key in HANDLED:
            if key in env:
                monkeypatch.setenv(key, env[key])
        bin_dir = str(claude_bin().parent)
        monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
        if permission_mode:
            monkeypatch.setenv("CORRAL_CLAUDE_PERMISSION_MODE", permission_mode)

    yield apply


async def test_claude_code_writes_the_file_and_reaches_review(tmp_path: Path, agent_env) -> None:  # type: ignore[no-untyped-def]
    repo = init_repo(tmp_path / "repo")
    with FakeModelServer([]) as srv:
        launch = claude_launch(tmp_path / "claude", srv.url, repo, None, hooks=False)
        agent_env(launch.env)
        sup = await open_sup(tmp_path, "claude")
        try:
            started = await sup.start("Write hello.txt saying hi", repo)
            target = Path(started.worktree or "") / "hello.txt"
            srv.push(
                Reply(
                    "I'll write it.",
                    [ToolCall("Write", {"file_path": str(target), "content": "hi\n"})],
                ),
                Reply("Wrote hello.txt."),
            )
            await sup.confirm(started.session_id)
            row = await settle(sup, started.session_id, {S.NEEDS_APPROVAL, S.FAILED}, 40)
            assert row.state is S.NEEDS_APPROVAL, row.error
            assert target.read_text() == "hi\n"
            hooks = tmp_path / "state" / "agents" / started.session_id / "hooks.jsonl"
            assert '"Stop"' in hooks.read_text()  # end of turn came from the hook
            s = sup.get(started.session_id).session
            assert s.last_check_results and all(r.passed for r in s.last_check_results)
            # the trust dialog was answered by its option, not a blind Enter
            assert '"SessionStart"' in hooks.read_text()
            # confined in its own network namespace: it reached its model through the allow-list
            assert f"network: only 127.0.0.1:{srv.port}," in network_account(
                sup, started.session_id
            )
        finally:
            await sup.close()
            kill_tmux(tmp_path)


async def test_a_claude_permission_prompt_is_answered_through_the_api(
    tmp_path: Path, agent_env
) -> None:  # type: ignore[no-untyped-def]
    repo = init_repo(tmp_path / "repo")
    with FakeModelServer([]) as srv:
        launch = claude_launch(tmp_path / "claude", srv.url, repo, None, hooks=False)
        agent_env(launch.env, permission_mode="manual")
        sup = await open_sup(tmp_path, "claude")
        try:
            started = await sup.start("Write hello.txt saying hi", repo)
            sid = started.session_id
            target = Path(started.worktree or "") / "hello.txt"
            srv.push(
                Reply(
                    "Writing.", [ToolCall("Write", {"file_path": str(target), "content": "hi\n"})]
                ),
                Reply("Done."),
            )
            await sup.confirm(sid)
            row = await sup.wait_for(sid, needs=True, timeout=40)
            assert row.needs_you == "question", (row.state, row.error)
            assert "hello.txt" in (row.question_prompt or "")
            assert sup.question_options(sid)[0] == "Yes"
            assert not target.exists()
            await sup.respond(sid, "Yes")
            row = await settle(sup, sid, {S.NEEDS_APPROVAL, S.FAILED}, 40)
            assert row.state is S.NEEDS_APPROVAL, row.error
            assert target.read_text() == "hi\n"
        finally:
            await sup.close()
            kill_tmux(tmp_path)


async def test_cancel_mid_turn_stops_claude_within_five_seconds(tmp_path: Path, agent_env) -> None:  # type: ignore[no-untyped-def]
    repo = init_repo(tmp_path / "repo")
    with FakeModelServer([]) as srv:
        launch = claude_launch(tmp_path / "claude", srv.url, repo, None, hooks=False)
        agent_env(launch.env)
        sup = await open_sup(tmp_path, "claude")
        try:
            started = await sup.start("Think for a long time", repo)
            sid = started.session_id
            srv.push(Reply("…", delay=60))
            await sup.confirm(sid)
            for _ in range(300):
                await asyncio.sleep(0.1)
                row = sup.list()[0]
                if row.agent_status == "running":
                    break
            assert row.agent_status == "running"
            pid = sup.agent_pane(sid).pid  # type: ignore[union-attr]
            begin = time.monotonic()
            result = await sup.cancel(sid)
            assert time.monotonic() - begin < 5
            assert result.state is S.ABANDONED
            await asyncio.sleep(0.5)
            status = Path(f"/proc/{pid}/status")
            state = status.read_text().split("State:")[1].split()[0] if status.exists() else "gone"
            assert state in ("gone", "Z"), f"the agent (pid {pid}) is still {state}"
        finally:
            await sup.close()
            kill_tmux(tmp_path)


async def test_codex_runs_its_shell_tool_and_reaches_review(tmp_path: Path, agent_env) -> None:  # type: ignore[no-untyped-def]
    repo = init_repo(tmp_path / "repo")
    run = ToolCall("exec_command", {"cmd": "printf 'hi\\n' > hello.txt"})
    with FakeModelServer([]) as srv:
        launch = codex_launch(tmp_path / "codex", srv.openai_base_url, repo, None, notify=False)
        agent_env(launch.env)
        sup = await open_sup(tmp_path, "codex")
        try:
            started = await sup.start("Write hello.txt saying hi", repo)
            srv.push(Reply("Writing the file.", [run]), Reply("Wrote hello.txt."))
            await sup.confirm(started.session_id)
            row = await settle(sup, started.session_id, {S.NEEDS_APPROVAL, S.FAILED}, 60)
            assert row.state is S.NEEDS_APPROVAL, row.error
            worktree = Path(sup.get(started.session_id).session.worktree or "")
            assert (worktree / "hello.txt").read_text() == "hi\n"
            hooks = tmp_path / "state" / "agents" / started.session_id / "hooks.jsonl"
            assert "agent-turn-complete" in hooks.read_text()  # notify, our one-run override
            # confined in its own network namespace: it reached its model through the allow-list
            assert f"network: only 127.0.0.1:{srv.port}," in network_account(
                sup, started.session_id
            )
        finally:
            await sup.close()
            kill_tmux(tmp_path)


async def test_the_api_key_dialog_is_asked_and_yes_is_seen_to_land(
    tmp_path: Path, agent_env
) -> None:  # type: ignore[no-untyped-def]
    """A fresh HOME (nothing pre-approved): Claude Code asks whether to use
    ANTHROPIC_API_KEY with the cursor on "No (recommended)". corral asks the
    operator, and reports "selected … Yes" only once the dialog is gone; Claude
    Code stores the key as approved and does the work."""
    repo = init_repo(tmp_path / "repo")
    with FakeModelServer([]) as srv:
        launch = claude_launch(
            tmp_path / "claude", srv.url, repo, None, hooks=False, approve_key=False
        )
        agent_env(launch.env)
        sup = await open_sup(tmp_path, "claude")
        try:
            started = await sup.start("Write hello.txt saying hi", repo)
            sid = started.session_id
            target = Path(started.worktree or "") / "hello.txt"
            srv.push(
                Reply(
                    "Writing.", [ToolCall("Write", {"file_path": str(target), "content": "hi\n"})]
                ),
                Reply("Done."),
            )
            await sup.confirm(sid)
            row = await sup.wait_for(sid, needs=True, timeout=40)
            assert row.needs_you == "question", (row.state, row.error)
            assert row.question_prompt == "Do you want to use this API key?"
            assert sup.question_options(sid) == ["Yes", "No (recommended)"]
            await sup.respond(sid, "Yes")
            row = await settle(sup, sid, {S.NEEDS_APPROVAL, S.FAILED}, 60)
            assert row.state is S.NEEDS_APPROVAL, row.error
            assert target.read_text() == "hi\n"
            # stored in the session's own provider home; the operator's file untouched
            home = tmp_path / "state" / "agents" / sid / "provider-home"
            stored = json.loads((home / ".claude.json").read_text())
            assert stored["customApiKeyResponses"]["approved"] == [
                launch.env["ANTHROPIC_API_KEY"][-20:]
            ]
            operator = json.loads((Path(launch.env["HOME"]) / ".claude.json").read_text())
            assert "customApiKeyResponses" not in operator
            log = [e.data for e in sup.replay(sid)]
            answers = [d.action for d in log if isinstance(d, PaneAnswerData)]
            assert answers == ["selected option 1: Yes"]
        finally:
            await sup.close()
            kill_tmux(tmp_path)


async def test_declining_the_key_leaves_claude_signed_out_and_the_session_needs_sign_in(
    tmp_path: Path, agent_env
) -> None:  # type: ignore[no-untyped-def]
    """ "No" is Claude Code's own default; it then says "Not logged in · Please
    run /login". That is `needs_you: auth` with the agent's sentence — not an
    idle turn verified red and repaired."""
    repo = init_repo(tmp_path / "repo")
    with FakeModelServer([]) as srv:
        launch = claude_launch(
            tmp_path / "claude", srv.url, repo, None, hooks=False, approve_key=False
        )
        agent_env(launch.env)
        sup = await open_sup(tmp_path, "claude")
        try:
            started = await sup.start("Write hello.txt saying hi", repo)
            sid = started.session_id
            await sup.confirm(sid)
            row = await sup.wait_for(sid, needs=True, timeout=40)
            assert row.needs_you == "question", (row.state, row.error)
            await sup.respond(sid, "No")
            deadline = time.monotonic() + 40
            while time.monotonic() < deadline:
                row = next(r for r in sup.list() if r.session_id == sid)
                if row.needs_you == "auth":
                    break
                await asyncio.sleep(0.2)
            events = [(e.kind.value, e.data) for e in sup.replay(sid)]
            assert row.needs_you == "auth", (row.state, row.error, events)
            assert "Not logged in" in (row.auth_message or "")
            assert row.state is S.RUNNING
            kinds = [e.kind.value for e in sup.replay(sid)]
            assert "contract_evaluated" not in kinds  # no runtime verification, no repair
            assert not srv.turn_requests  # nothing reached the model
        finally:
            await sup.close()
            kill_tmux(tmp_path)
