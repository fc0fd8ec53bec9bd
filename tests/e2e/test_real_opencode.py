"""Real OpenCode (`opencode-ai` from npm, e2e/node_modules) run by corral's
supervisor in a real tmux pane, against the scripted fake model server on
127.0.0.1 (docs/agent-clis.md, "OpenCode"): the model's `write` call creates
the file, corral's one-run plugin reports the end of the turn, the contract
check runs green and the session waits for approval; an OpenCode permission
prompt becomes a corral question whose answer lands in the pane; cancel
stops the agent's process within 5 s."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from corral.supervisor.states import CoderState as S
from tests.conftest import init_repo
from tests.e2e.support import AGENT_CLIS, describe, kill_tmux, open_sup, settle
from tests.e2e.test_fake_model_server import Tmux, wait_until
from tests.e2e.test_real_provider_homes import mentions, snapshot
from tests.fakes.agent_env import AgentLaunch, missing_opencode, opencode_bin, opencode_launch
from tests.fakes.model_server import FakeModelServer, Reply, ToolCall

MISSING = missing_opencode()
pytestmark = [
    pytest.mark.slow,
    AGENT_CLIS,
    pytest.mark.skipif(MISSING is not None, reason=f"OpenCode not installed: {MISSING}"),
]

# What the launch recipe sets that must reach the pane through the supervisor
# (it inherits this process's environment, then scrubs it).
HANDLED = (
    "HOME",
    "TMPDIR",
    "LANG",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_CACHE_HOME",
    "XDG_STATE_HOME",
    "OPENCODE_CONFIG",
    "ANTHROPIC_API_KEY",
    "OPENCODE_DISABLE_AUTOUPDATE",
    "OPENCODE_DISABLE_MODELS_FETCH",
    "OPENCODE_DISABLE_LSP_DOWNLOAD",
    "OPENCODE_DISABLE_SHARE",
    "npm_config_offline",
)
ASK = {"edit": "ask", "bash": "ask"}
ALLOW = {"edit": "allow", "bash": "allow"}

Apply = Callable[[dict[str, str]], None]


@pytest.fixture
def agent_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[Apply]:
    """Point the supervisor's environment at a hermetic OpenCode home (temp
    HOME and XDG dirs, config via OPENCODE_CONFIG) and the fake server."""

    def apply(env: dict[str, str]) -> None:
        for key in HANDLED:
            monkeypatch.setenv(key, env[key])
        # corral adds its plugin to this; an inherited one would be merged in
        monkeypatch.delenv("OPENCODE_CONFIG_CONTENT", raising=False)
        monkeypatch.delenv("OPENCODE_CONFIG_DIR", raising=False)
        monkeypatch.setenv("PATH", f"{opencode_bin().parent}:{os.environ['PATH']}")

    yield apply


def hook_names(tmp_path: Path, sid: str) -> list[str]:
    hooks = tmp_path / "state" / "agents" / sid / "hooks.jsonl"
    text = hooks.read_text() if hooks.exists() else ""
    return [json.loads(line).get("event", "") for line in text.splitlines() if line.strip()]


def write_call(target: Path) -> ToolCall:
    """OpenCode's own file tool: `write {filePath (absolute), content}`."""
    return ToolCall("write", {"filePath": str(target), "content": "hi\n"})


async def test_opencode_writes_the_file_and_reaches_review(
    tmp_path: Path, agent_env: Apply
) -> None:
    repo = init_repo(tmp_path / "repo")
    with FakeModelServer([]) as srv:
        launch = opencode_launch(tmp_path / "opencode", srv.url, repo, None, permission=ALLOW)
        agent_env(launch.env)
        # the operator's own sign-in and settings, which the session gets copies of
        share = launch.home / ".local" / "share" / "opencode"
        share.mkdir(parents=True)
        (share / "auth.json").write_text('{"corralfake": {"type": "api", "key": "k"}}')
        before = snapshot(launch.home)
        sup = await open_sup(tmp_path, "opencode", wall_secs=240)
        try:
            started = await sup.start("Write hello.txt saying hi", repo)
            sid = started.session_id
            target = Path(started.worktree or "") / "hello.txt"
            srv.push(Reply("I'll write it.", [write_call(target)]), Reply("Wrote hello.txt."))
            await sup.confirm(sid)
            row = await settle(sup, sid, {S.NEEDS_APPROVAL, S.FAILED}, 150)
            assert row.state is S.NEEDS_APPROVAL, (row.error, describe(sup, sid))
            assert target.read_text() == "hi\n"
            s = sup.get(sid).session
            assert s.last_check_results and all(r.passed for r in s.last_check_results)
            # the end of the turn came from corral's plugin, not a guess from the screen
            assert "Stop" in hook_names(tmp_path, sid)
            # the tool result went back to the model: OpenCode really ran its write tool
            assert srv.tool_results(), srv.paths()
            # the task reached the model as the first user message (`--prompt`)
            first = srv.turn_requests[0].body["messages"][0]
            assert "Write hello.txt saying hi" in str(first["content"])
        finally:
            await sup.close()
            kill_tmux(tmp_path)
    # its sessions, logs and state are in the session's own home (XDG dirs
    # there); the operator's XDG dirs were not written at all
    own = tmp_path / "state" / "agents" / sid / "provider-home"
    assert (own / ".local/share/opencode/auth.json").read_text() == (
        share / "auth.json"
    ).read_text()
    assert mentions(own, "Write hello.txt saying hi")
    assert snapshot(launch.home) == before


async def test_an_opencode_permission_prompt_is_answered_through_the_api(
    tmp_path: Path, agent_env: Apply
) -> None:
    repo = init_repo(tmp_path / "repo")
    with FakeModelServer([]) as srv:
        launch = opencode_launch(tmp_path / "opencode", srv.url, repo, None, permission=ASK)
        agent_env(launch.env)
        sup = await open_sup(tmp_path, "opencode", wall_secs=240)
        try:
            started = await sup.start("Write hello.txt saying hi", repo)
            sid = started.session_id
            target = Path(started.worktree or "") / "hello.txt"
            srv.push(Reply("Writing.", [write_call(target)]), Reply("Done."))
            await sup.confirm(sid)
            row = await sup.wait_for(sid, needs=True, timeout=150)
            assert row.needs_you == "question", (row.state, row.error, describe(sup, sid))
            assert "hello.txt" in (row.question_prompt or "")
            assert sup.question_options(sid) == ["Allow once", "Allow always", "Reject"]
            assert not target.exists()
            assert "PermissionRequest" in hook_names(tmp_path, sid)
            await sup.respond(sid, "Allow once")
            row = await settle(sup, sid, {S.NEEDS_APPROVAL, S.FAILED}, 60)
            assert row.state is S.NEEDS_APPROVAL, (row.error, describe(sup, sid))
            assert target.read_text() == "hi\n"
        finally:
            await sup.close()
            kill_tmux(tmp_path)


async def test_cancel_mid_turn_stops_opencode_within_five_seconds(
    tmp_path: Path, agent_env: Apply
) -> None:
    repo = init_repo(tmp_path / "repo")
    with FakeModelServer([]) as srv:
        launch = opencode_launch(tmp_path / "opencode", srv.url, repo, None, permission=ALLOW)
        agent_env(launch.env)
        sup = await open_sup(tmp_path, "opencode", wall_secs=240)
        try:
            started = await sup.start("Think for a long time", repo)
            sid = started.session_id
            srv.push(Reply("…", delay=60))
            await sup.confirm(sid)
            # running, and the model request is in flight (the turn really started)
            await asyncio.to_thread(srv.wait_for, lambda s: len(s.turn_requests) >= 1, 120)
            for _ in range(300):
                row = sup.list()[0]
                if row.agent_status == "running":
                    break
                await asyncio.sleep(0.1)
            assert row.agent_status == "running", describe(sup, sid)
            pane = sup.agent_pane(sid)
            assert pane is not None
            pid = pane.pid
            begin = time.monotonic()
            result = await sup.cancel(sid)
            took = time.monotonic() - begin
            assert took < 5, f"cancel took {took:.1f}s"
            assert result.state is S.ABANDONED, result
            await asyncio.sleep(0.5)
            status = Path(f"/proc/{pid}/status")
            state = status.read_text().split("State:")[1].split()[0] if status.exists() else "gone"
            assert state in ("gone", "Z"), f"the agent (pid {pid}) is still {state}"
        finally:
            await sup.close()
            kill_tmux(tmp_path)


# ---- OpenCode alone in a private tmux server: the facts the profile rests on


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    server = Tmux()
    try:
        yield server
    finally:
        server.kill()


def hooks(launch: AgentLaunch, name: str) -> list[dict[str, Any]]:
    return [e for e in launch.hook_events() if e.get("hook_event_name") == name]


def test_esc_rejects_a_permission_and_the_plugin_reports_every_edge(
    tmp_path: Path, tmux: Tmux
) -> None:
    """The prompt as docs/agent-clis.md quotes it; Esc = Reject ends the turn
    at once (no second model request, no file); an interrupt (Esc, Esc) ends
    a turn too; corral's plugin reports busy, the permission wait and each
    end of turn, with the permission's details."""
    repo = init_repo(tmp_path / "repo")
    target = repo / "hello.txt"
    with FakeModelServer([Reply("Writing.", [write_call(target)])]) as srv:
        launch = opencode_launch(tmp_path / "oc", srv.url, repo, "Write hello.txt", permission=ASK)
        name = tmux.start("oc", launch)
        screen = tmux.wait_screen(name, r"△ Permission required", 150)
        assert "→ Edit hello.txt" in screen
        assert re.search(r"Allow once\s{2,}Allow always\s{2,}Reject", screen)
        assert "esc interrupt" not in screen  # waiting is not busy
        wait_until(lambda: bool(hooks(launch, "PermissionRequest")), "PermissionRequest", 15)
        asked = hooks(launch, "PermissionRequest")[0]
        assert asked["tool_name"] == "edit"
        assert asked["metadata"]["filepath"] == str(target)
        tmux.keys(name, "Escape")
        wait_until(lambda: bool(hooks(launch, "Stop")), "the Stop hook after Reject", 30)
        tmux.wait_screen(name, r"ctrl\+p commands", 15)
        time.sleep(1)
        assert not target.exists()
        assert len(srv.turn_requests) == 1, srv.paths()
        assert hooks(launch, "UserPromptSubmit") and not hooks(launch, "PostToolUse")

        srv.push(Reply("…", delay=40))
        tmux.type(name, "Think for a long time")
        wait_until(lambda: len(srv.turn_requests) == 2, "the second model request", 30)
        tmux.wait_screen(name, r"esc interrupt", 15)
        tmux.keys(name, "Escape")
        tmux.wait_screen(name, r"esc again to interrupt", 10)
        tmux.keys(name, "Escape")
        tmux.wait_screen(name, r"· interrupted", 15)
        wait_until(lambda: len(hooks(launch, "Stop")) == 2, "the Stop hook after an interrupt", 15)
        aborted = hooks(launch, "StopFailure")
        assert [e["error"]["name"] for e in aborted] == ["MessageAbortedError"]
        time.sleep(1)
        assert len(hooks(launch, "Stop")) == 2  # one per turn, though it idles twice
        assert all(e["session_id"] == asked["session_id"] for e in launch.hook_events())


def test_the_hermetic_home_keeps_every_opencode_file(tmp_path: Path, tmux: Tmux) -> None:
    """Sessions database, logs and config dir land in the temp HOME/XDG dirs,
    the worktree gets only the agent's own file, and the plugin-dependency
    install fails offline instead of reaching a registry."""
    repo = init_repo(tmp_path / "repo")
    with FakeModelServer([Reply("Hi.")]) as srv:
        launch = opencode_launch(tmp_path / "oc", srv.url, repo, "Say hi", permission=ALLOW)
        name = tmux.start("oc", launch)
        wait_until(lambda: bool(hooks(launch, "Stop")), "the end of the turn", 150)
        tmux.wait_screen(name, r"Hi\.", 10)
        data = launch.home / ".local" / "share" / "opencode"
        assert (data / "opencode.db").exists()
        assert list((data / "log").glob("*.log"))
        log = "\n".join(p.read_text() for p in (data / "log").glob("*.log"))
        assert "background dependency install failed" in log
        assert not (launch.config_dir / "node_modules").exists()
        status = subprocess.run(
            ["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True
        )
        assert status.stdout == ""
        # the side request that names the session carries no tools
        assert [r.consumed for r in srv.requests if r.method == "POST"].count(False) == 1
