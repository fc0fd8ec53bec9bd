"""Real Gemini CLI (npm, e2e/node_modules) and Aider (PyPI, e2e/aider-venv)
run by corral's supervisor in real tmux panes against the scripted fake
model server on 127.0.0.1: the agent writes the file with its own tool (or
edit block), the runtime verifies the contract green and the session reaches
`needs_approval`; the CLI's own permission prompt becomes a corral question
answered through the API; cancel mid-turn leaves no agent process behind
within 5 s. docs/agent-clis.md has the screens these rely on."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from corral.supervisor.api import Supervisor
from corral.supervisor.states import CoderState as S
from tests.conftest import init_repo
from tests.e2e.support import AGENT_CLIS, kill_tmux, open_sup, process_tree, screen_text, settle
from tests.e2e.test_real_provider_homes import mentions, snapshot
from tests.fakes.agent_env import (
    AgentLaunch,
    aider_bin,
    aider_launch,
    aider_whole_file,
    gemini_bin,
    gemini_launch,
    missing_cli,
)
from tests.fakes.model_server import FakeModelServer, Reply, ToolCall

pytestmark = [pytest.mark.slow, AGENT_CLIS]

NO_GEMINI = missing_cli(gemini_bin(), "npm ci --prefix e2e")
needs_gemini = pytest.mark.skipif(NO_GEMINI is not None, reason=f"Gemini CLI: {NO_GEMINI}")
NO_AIDER = missing_cli(aider_bin(), "make e2e/aider-venv/.installed")
needs_aider = pytest.mark.skipif(NO_AIDER is not None, reason=f"Aider: {NO_AIDER}")

# Process basics the supervisor keeps its own of; everything else the recipe
# sets (HOME, TMPDIR, keys, base URLs, AIDER_* settings) the panes inherit.
OWN = ("PATH", "TERM", "SHELL", "USER")

Apply = Callable[[AgentLaunch], None]


@pytest.fixture
def agent_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Apply]:
    """Point the supervisor's environment (inherited, then scrubbed, by the
    panes) at a hermetic agent home and the fake server, and put the CLI on
    PATH alone (a symlink: the Aider venv's bin also holds a `python`)."""

    def apply(launch: AgentLaunch) -> None:
        for key, value in launch.env.items():
            if key not in OWN:
                monkeypatch.setenv(key, value)
        bin_dir = tmp_path / "agent-bin"
        bin_dir.mkdir(exist_ok=True)
        (bin_dir / Path(launch.argv[0]).name).symlink_to(launch.argv[0])
        monkeypatch.setenv("PATH", f"{bin_dir}:{launch.env['PATH']}")

    yield apply


def homes_of(sup: Supervisor, sid: str, program: str) -> set[str]:
    """The HOME of each process under the session's pane running `program`."""
    pid = sup.agent_pane(sid).pid  # type: ignore[union-attr]
    found = set()
    for each in process_tree(pid):
        try:
            argv = Path(f"/proc/{each}/cmdline").read_bytes().split(b"\0")
            env = Path(f"/proc/{each}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(Path(word.decode(errors="replace")).name == program for word in argv[:2]):
            found |= {v.decode()[5:] for v in env if v.startswith(b"HOME=")}
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/status").read_text().split("State:")[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


async def cancel_mid_turn(sup: Supervisor, sid: str) -> None:
    """Cancel while the agent is busy; the cancel returns within 5 s and no
    process of the agent's tree is left."""
    for _ in range(600):
        await asyncio.sleep(0.1)
        row = sup.list()[0]
        if row.agent_status == "running":
            break
    events = [(e.kind.value, e.data) for e in sup.replay(sid)][-12:]
    assert row.agent_status == "running", f"{screen_text(sup, sid)}\nevents: {events}"
    pid = sup.agent_pane(sid).pid  # type: ignore[union-attr]
    tree = process_tree(pid)
    assert len(tree) >= 1
    begin = time.monotonic()
    result = await sup.cancel(sid)
    assert time.monotonic() - begin < 5
    assert result.state is S.ABANDONED
    await asyncio.sleep(0.5)
    left = sorted(p for p in tree if alive(p))
    assert not left, f"agent processes still running after cancel: {left}"


# --------------------------------------------------------------------------- Gemini CLI


@needs_gemini
async def test_gemini_writes_the_file_and_reaches_review(tmp_path: Path, agent_env: Apply) -> None:
    repo = init_repo(tmp_path / "repo")
    with FakeModelServer([]) as srv:
        # the operator's own setting: edits run without asking
        launch = gemini_launch(tmp_path / "gemini", srv.url, repo, None, approval_mode="auto_edit")
        agent_env(launch)
        # the operator's own sign-in, which the session gets a copy of
        (launch.home / ".gemini" / ".env").write_text("GEMINI_API_KEY=from-the-dot-env\n")
        before = snapshot(launch.home)
        sup = await open_sup(tmp_path, "gemini")
        try:
            started = await sup.start("Write hello.txt saying hi", repo)
            target = Path(started.worktree or "") / "hello.txt"
            srv.push(
                Reply(
                    "Writing it.",
                    [ToolCall("write_file", {"file_path": str(target), "content": "hi\n"})],
                ),
                Reply("Wrote hello.txt."),
            )
            await sup.confirm(started.session_id)
            row = await settle(sup, started.session_id, {S.NEEDS_APPROVAL, S.FAILED}, 60)
            assert row.state is S.NEEDS_APPROVAL, row.error
            assert target.read_text() == "hi\n"
            s = sup.get(started.session_id).session
            assert s.last_check_results and all(r.passed for r in s.last_check_results)
            # the task went in once (the -i prompt), and Gemini ran its tool
            prompts = [r for r in srv.turn_requests if "Write hello.txt saying hi" in str(r.body)]
            assert prompts and srv.tool_results(), srv.paths()
            started_with = [e.data for e in sup.replay(started.session_id)]
            assert any(getattr(d, "confined", False) for d in started_with)  # in the sandbox
        finally:
            await sup.close()
            kill_tmux(tmp_path)
    # its own home (GEMINI_CLI_HOME) holds its chat and the copied sign-in and
    # settings; the operator's ~/.gemini was not written at all
    own = tmp_path / "state" / "agents" / started.session_id / "provider-home" / ".gemini"
    assert (own / ".env").read_text() == "GEMINI_API_KEY=from-the-dot-env\n"
    assert (own / "settings.json").read_text() == (
        launch.home / ".gemini/settings.json"
    ).read_text()
    assert mentions(own / "tmp", "Write hello.txt saying hi")
    assert snapshot(launch.home) == before


@needs_gemini
async def test_a_gemini_permission_prompt_is_answered_through_the_api(
    tmp_path: Path, agent_env: Apply
) -> None:
    repo = init_repo(tmp_path / "repo")
    with FakeModelServer([]) as srv:
        agent_env(gemini_launch(tmp_path / "gemini", srv.url, repo, None))
        sup = await open_sup(tmp_path, "gemini")
        try:
            started = await sup.start("Write hello.txt saying hi", repo)
            sid = started.session_id
            target = Path(started.worktree or "") / "hello.txt"
            srv.push(
                Reply(
                    "Writing.",
                    [ToolCall("write_file", {"file_path": str(target), "content": "hi\n"})],
                ),
                Reply("Done."),
            )
            await sup.confirm(sid)
            row = await sup.wait_for(sid, needs=True, timeout=60)
            assert row.needs_you == "question", (row.state, row.error, screen_text(sup, sid))
            assert row.question_prompt == "Apply this change?"
            assert sup.question_options(sid)[0] == "Allow once"
            assert not target.exists()
            await sup.respond(sid, "Allow once")
            row = await settle(sup, sid, {S.NEEDS_APPROVAL, S.FAILED}, 60)
            assert row.state is S.NEEDS_APPROVAL, row.error
            assert target.read_text() == "hi\n"
        finally:
            await sup.close()
            kill_tmux(tmp_path)


@needs_gemini
async def test_cancel_mid_turn_stops_gemini_within_five_seconds(
    tmp_path: Path, agent_env: Apply
) -> None:
    repo = init_repo(tmp_path / "repo")
    with FakeModelServer([]) as srv:
        agent_env(gemini_launch(tmp_path / "gemini", srv.url, repo, None))
        sup = await open_sup(tmp_path, "gemini")
        try:
            started = await sup.start("Think for a long time", repo)
            srv.push(Reply("…", delay=60))
            await sup.confirm(started.session_id)
            await cancel_mid_turn(sup, started.session_id)
        finally:
            await sup.close()
            kill_tmux(tmp_path)


# --------------------------------------------------------------------------- Aider


@needs_aider
async def test_aider_writes_the_file_and_reaches_review(tmp_path: Path, agent_env: Apply) -> None:
    repo = init_repo(tmp_path / "repo")
    with FakeModelServer([]) as srv:
        # the operator's own setting: Aider answers its confirmations itself
        launch = aider_launch(tmp_path / "aider", srv.openai_base_url, repo, yes_always=True)
        agent_env(launch)
        # the operator's own Aider settings, which the session gets a copy of
        (launch.home / ".aider.model.metadata.json").write_text("{}")
        before = snapshot(launch.home)
        sup = await open_sup(tmp_path, "aider")
        try:
            started = await sup.start("Write hello.txt saying hi", repo)
            worktree = Path(started.worktree or "")
            srv.push(Reply(aider_whole_file("hello.txt", "hi"), delay=2))
            await sup.confirm(started.session_id)
            row = await settle(sup, started.session_id, {S.NEEDS_APPROVAL, S.FAILED}, 60)
            assert row.state is S.NEEDS_APPROVAL, row.error
            assert (worktree / "hello.txt").read_text() == "hi\n"
            s = sup.get(started.session_id).session
            assert s.last_check_results and all(r.passed for r in s.last_check_results)
            # the pasted task reached the model once; Aider left no files of its own
            asked = [r for r in srv.turn_requests if "Write hello.txt saying hi" in str(r.body)]
            assert len(asked) == 1, srv.paths()
            assert not [p.name for p in worktree.iterdir() if p.name.startswith(".aider")]
            # Aider's home is the session's own (it has no other way to move ~/.aider)
            own = tmp_path / "state" / "agents" / started.session_id / "provider-home"
            assert homes_of(sup, started.session_id, "aider") == {str(own)}
            assert (own / ".aider.model.metadata.json").read_text() == "{}"
        finally:
            await sup.close()
            kill_tmux(tmp_path)
    assert snapshot(launch.home) == before  # the operator's home was not written


@needs_aider
async def test_an_aider_confirmation_is_answered_through_the_api(
    tmp_path: Path, agent_env: Apply
) -> None:
    repo = init_repo(tmp_path / "repo")
    with FakeModelServer([]) as srv:
        agent_env(aider_launch(tmp_path / "aider", srv.openai_base_url, repo))
        sup = await open_sup(tmp_path, "aider")
        try:
            started = await sup.start("Write hello.txt saying hi", repo)
            sid = started.session_id
            target = Path(started.worktree or "") / "hello.txt"
            srv.push(Reply(aider_whole_file("hello.txt", "hi"), delay=2))
            await sup.confirm(sid)
            row = await sup.wait_for(sid, needs=True, timeout=60)
            assert row.needs_you == "question", (row.state, row.error, screen_text(sup, sid))
            assert (row.question_prompt or "").startswith("Create new file?")
            assert not target.exists()
            await sup.respond(sid, "Yes")
            row = await settle(sup, sid, {S.NEEDS_APPROVAL, S.FAILED}, 60)
            assert row.state is S.NEEDS_APPROVAL, row.error
            assert target.read_text() == "hi\n"
        finally:
            await sup.close()
            kill_tmux(tmp_path)


@needs_aider
async def test_cancel_mid_turn_stops_aider_within_five_seconds(
    tmp_path: Path, agent_env: Apply
) -> None:
    repo = init_repo(tmp_path / "repo")
    with FakeModelServer([]) as srv:
        agent_env(aider_launch(tmp_path / "aider", srv.openai_base_url, repo))
        sup = await open_sup(tmp_path, "aider")
        try:
            started = await sup.start("Think for a long time", repo)
            srv.push(Reply("…", delay=60))
            await sup.confirm(started.session_id)
            await cancel_mid_turn(sup, started.session_id)
        finally:
            await sup.close()
            kill_tmux(tmp_path)
