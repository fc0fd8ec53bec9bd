"""The built-in engine through the Supervisor: a model (scripted, and a fake
OpenAI-compatible server over real HTTP) fixes a failing test in a temp repo
and the run reaches the approval gate; cancel mid-shell within 5 s with no
process left; a budget cut keeps the worktree; the router picks native."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from pathlib import Path

import pytest

from corral.supervisor.api import Supervisor
from corral.supervisor.contracts.drafting import FixedDrafter
from corral.supervisor.engines.registry import AgentEngines
from corral.supervisor.errors import CorralError
from corral.supervisor.llm.base import ToolCall, Turn
from corral.supervisor.llm.openai_compat import OpenAICompatProvider
from corral.supervisor.models import ContractCheck, EventKind, OutcomeContract
from corral.supervisor.states import CoderState as S
from tests.conftest import fast_config, git, init_repo
from tests.fakes.llm_fakes import FakeCall, FakeOpenAIServer, Reply
from tests.fakes.scripted_llm import ScriptedProvider

BUGGY = "def add(a, b):\n    return a - b\n"
TEST = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
FIXED = "def add(a, b):\n    return a + b\n"
CONTRACT = OutcomeContract(
    description="add() adds",
    checks=[
        ContractCheck(
            name="tests",
            command="python3 -m pytest -q -p no:cacheprovider test_calc.py",
            timeout_secs=60,
            # the task's own test: red on the untouched tree until the work is done
            # (a suite's other failing tests would be "already failing")
            must_pass=["test_calc.py::test_add"],
        )
    ],
)


@pytest.fixture
def calc_repo(tmp_path: Path) -> Path:
    repo = init_repo(tmp_path / "repo")
    (repo / "calc.py").write_text(BUGGY)
    (repo / "test_calc.py").write_text(TEST)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "calc with a bug")
    return repo


async def open_native(tmp_path: Path, provider, **cfg) -> Supervisor:  # type: ignore[no-untyped-def]
    engines = AgentEngines(
        None, session_dir=lambda sid: tmp_path / "agents" / sid, provider=provider, preference=()
    )
    sup = Supervisor(
        tmp_path / "state",
        drafter=FixedDrafter(CONTRACT),
        engines=engines,
        config=fast_config(**cfg),
    )
    await sup.open()
    return sup


def fix_turns() -> list[Turn]:
    return [
        Turn(
            text="Let me look.",
            tool_calls=(ToolCall("c1", "read_file", {"path": "calc.py"}),),
            stop_reason="tool_use",
        ),
        Turn(
            text="",
            tool_calls=(
                ToolCall(
                    "c2",
                    "edit_file",
                    {"path": "calc.py", "old_text": "return a - b", "new_text": "return a + b"},
                ),
            ),
            stop_reason="tool_use",
        ),
        Turn(
            text="",
            tool_calls=(ToolCall("c3", "shell", {"command": "python3 -m pytest -q test_calc.py"}),),
            stop_reason="tool_use",
        ),
        Turn(text="Fixed: add() now adds."),
    ]


@pytest.mark.slow
async def test_a_scripted_model_fixes_the_failing_test_and_reaches_review(
    tmp_path: Path, calc_repo: Path
) -> None:
    sup = await open_native(tmp_path, ScriptedProvider(fix_turns()))
    try:
        started = await sup.start("Fix add()", calc_repo)
        assert started.engine == "native" and started.baseline[0].passed is False
        await sup.confirm(started.session_id)
        row = await sup.wait_for(started.session_id, {S.NEEDS_APPROVAL, S.FAILED}, timeout=60)
        assert row.state is S.NEEDS_APPROVAL, row.error
        s = sup.get(started.session_id).session
        assert s.engine_ran == "native" and all(r.passed for r in s.last_check_results)
        kinds = [e.kind for e in sup.replay(started.session_id)]
        assert EventKind.ITERATION_STARTED in kinds and EventKind.TOOL_CALL in kinds
        result = await sup.approve(started.session_id)
        assert git(calc_repo, "show", f"{result.branch}:calc.py") == FIXED
    finally:
        await sup.close()


@pytest.mark.slow
async def test_a_fake_openai_server_drives_the_same_run_over_http(
    tmp_path: Path, calc_repo: Path
) -> None:
    script = [
        Reply("Reading.", (FakeCall("read_file", {"path": "calc.py"}, "c1"),)),
        Reply(
            "",
            (
                FakeCall(
                    "edit_file",
                    {"path": "calc.py", "old_text": "return a - b", "new_text": "return a + b"},
                    "c2",
                ),
            ),
        ),
        Reply("Done: add() adds."),
    ]
    with FakeOpenAIServer(script) as srv:
        provider = OpenAICompatProvider(srv.base_url, "fake-model", None)
        sup = await open_native(tmp_path, provider)
        try:
            started = await sup.start("Fix add()", calc_repo)
            await sup.confirm(started.session_id)
            row = await sup.wait_for(started.session_id, {S.NEEDS_APPROVAL, S.FAILED}, timeout=60)
            assert row.state is S.NEEDS_APPROVAL, row.error
            worktree = Path(sup.get(started.session_id).session.worktree or "")
            assert (worktree / "calc.py").read_text() == FIXED
        finally:
            await sup.close()


@pytest.mark.slow
async def test_cancel_mid_shell_returns_within_five_seconds_and_leaves_nothing(
    tmp_path: Path, calc_repo: Path
) -> None:
    marker = f"corral-native-{os.getpid()}-{time.time_ns()}"
    turns = [
        Turn(
            text="",
            tool_calls=(
                ToolCall(
                    "c1", "shell", {"command": f"sleep 30; echo {marker}", "timeout_secs": 120}
                ),
            ),
            stop_reason="tool_use",
        )
    ]
    sup = await open_native(tmp_path, ScriptedProvider(turns))
    try:
        started = await sup.start("Fix add()", calc_repo)
        await sup.confirm(started.session_id)
        for _ in range(200):
            await asyncio.sleep(0.05)
            ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
            if marker in ps:
                break
        else:
            raise AssertionError("the shell command never started")
        begin = time.monotonic()
        result = await sup.cancel(started.session_id)
        assert time.monotonic() - begin < 5
        assert result.state is S.ABANDONED
        ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
        assert marker not in ps
    finally:
        await sup.close()


@pytest.mark.slow
async def test_a_budget_cut_keeps_the_worktree(tmp_path: Path, calc_repo: Path) -> None:
    turns = [
        Turn(
            text="",
            tool_calls=(ToolCall(f"c{i}", "list_dir", {"path": "."}),),
            stop_reason="tool_use",
        )
        for i in range(10)
    ]
    sup = await open_native(
        tmp_path, ScriptedProvider(turns), default_max_iterations=2, keep_workspace_on_failure=False
    )
    try:
        started = await sup.start("Fix add()", calc_repo, max_iterations=2)
        await sup.confirm(started.session_id)
        row = await sup.wait_for(started.session_id, {S.FAILED, S.NEEDS_APPROVAL}, timeout=60)
        assert row.state is S.FAILED and row.failure_kind == "budget_exhausted"
        assert Path(sup.get(started.session_id).session.worktree or "").is_dir()
    finally:
        await sup.close()


def test_the_router_picks_native_only_with_a_model(tmp_path: Path) -> None:
    with_model = AgentEngines(
        None, session_dir=lambda s: tmp_path, preference=(), provider=ScriptedProvider([])
    )
    assert with_model.resolve("auto")[0] == "native"
    assert with_model.resolve("native")[0] == "native"
    without = AgentEngines(None, session_dir=lambda s: tmp_path, preference=())
    with pytest.raises(CorralError, match="needs a model"):
        without.resolve("native")
    with pytest.raises(CorralError, match="no agent CLI is installed"):
        without.resolve("auto")
