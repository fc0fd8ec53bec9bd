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
from corral.supervisor.contracts.drafting import FixedDrafter
from corral.supervisor.factory import build_supervisor
from corral.supervisor.states import CoderState as S
from tests.conftest import fast_config, hello_contract, init_repo
from tests.fakes.agent_env import AgentLaunch, gemini_bin, gemini_launch, missing_cli
from tests.fakes.model_server import FakeModelServer, Reply, ToolCall

pytestmark = pytest.mark.slow

NO_GEMINI = missing_cli(gemini_bin(), "npm ci --prefix e2e")
needs_gemini = pytest.mark.skipif(NO_GEMINI is not None, reason=f"Gemini CLI: {NO_GEMINI}")

# What the recipes set that the supervisor's panes must inherit.
HANDLED = (
    "HOME",
    "TMPDIR",
    "LANG",
    "GEMINI_API_KEY",
    "GOOGLE_GEMINI_BASE_URL",
)

Apply = Callable[[AgentLaunch], None]


@pytest.fixture
def agent_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[Apply]:
    """Point the supervisor's environment (inherited, then scrubbed, by the
    panes) at a hermetic agent home, the fake server and the CLI's bin dir."""

    def apply(launch: AgentLaunch) -> None:
        for key in HANDLED:
            if key in launch.env:
                monkeypatch.setenv(key, launch.env[key])
        bin_dir = str(Path(launch.argv[0]).parent)
        monkeypatch.setenv("PATH", f"{bin_dir}:{launch.env['PATH']}")

    yield apply


async def settle(sup: Supervisor, sid: str, states: set[S], timeout: float):  # type: ignore[no-untyped-def]
    """wait_for, but on a timeout show what the agent's screen says."""
    try:
        return await sup.wait_for(sid, states, timeout=timeout)
    except TimeoutError:
        raise AssertionError(f"timed out; agent screen:\n{screen_text(sup, sid)}") from None


def screen_text(sup: Supervisor, sid: str) -> str:
    screen = sup.agent_screen(sid)
    return "\n".join(line for line in (screen.lines if screen else []) if line.strip())


async def open_sup(tmp_path: Path, agent: str) -> Supervisor:
    sup = build_supervisor(
        tmp_path / "state",
        FixedDrafter(hello_contract()),
        socket_dir=tmp_path / "tmux",
        default_engine=f"external:{agent}",
        config=fast_config(repair_invokes=0, max_session_wall_secs=120),
    )
    await sup.open()
    return sup


def kill_tmux(tmp_path: Path) -> None:
    import subprocess

    for sock in (tmp_path / "tmux").glob("*"):
        subprocess.run(["tmux", "-S", str(sock), "kill-server"], capture_output=True)


def process_tree(pid: int) -> set[int]:
    """`pid` and every live descendant (from /proc): Gemini CLI relaunches
    itself as a child node process, Aider's shell may fork."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    tree, todo = set(), [pid]
    while todo:
        current = todo.pop()
        tree.add(current)
        todo += children.get(current, [])
    return tree


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/status").read_text().split("State:")[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


async def cancel_mid_turn(sup: Supervisor, sid: str) -> None:
    """Cancel while the agent is busy; the cancel returns within 5 s and no
    process of the agent's tree is left."""
    for _ in range(300):
        await asyncio.sleep(0.1)
        row = sup.list()[0]
        if row.agent_status == "running":
            break
    assert row.agent_status == "running", screen_text(sup, sid)
    pid = sup.panes.record(sid).handle.pid  # type: ignore[union-attr]
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
        agent_env(
            gemini_launch(tmp_path / "gemini", srv.url, repo, None, approval_mode="auto_edit")
        )
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
        finally:
            await sup.close()
            kill_tmux(tmp_path)


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
