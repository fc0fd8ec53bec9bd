"""The real Claude Code (e2e/node_modules) as an MCP client of corral: its MCP
config launches `corral mcp`, which bridges to the owner of the state dir;
the fake model server makes it call `assistant_start` and then
`assistant_poll`; the run is an ordinary session on the owner's board, seen
through the control socket too."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral.supervisor.remote import ControlClient, OwnerServices
from corral.supervisor.states import CoderState
from tests.conftest import SupervisorFactory, hello_contract, init_repo
from tests.e2e.support import AGENT_CLIS
from tests.fakes.agent_env import claude_bin, claude_launch, claude_print_argv
from tests.fakes.model_server import FakeModelServer, Reply, ToolCall
from tests.fakes.scripted import ScriptedEngine, Wait

REPO_ROOT = Path(__file__).resolve().parents[2]
RUN_ID = "mcp-run-e2e"

pytestmark = [
    pytest.mark.slow,
    AGENT_CLIS,
    pytest.mark.skipif(not claude_bin().exists(), reason="Claude Code is not installed in e2e/"),
]


@pytest.fixture
def short_root() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="ce", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


async def test_claude_code_starts_and_polls_a_run_through_corral_mcp(
    make_supervisor: SupervisorFactory, short_root: Path, tmp_path: Path
) -> None:
    repo = init_repo(tmp_path / "repo")
    state = short_root / "state"
    gate = asyncio.Event()
    sup = await make_supervisor(state=state, engine=ScriptedEngine([[Wait(gate)]]))
    services = OwnerServices(sup, mcp_http=False, run_ids=lambda: RUN_ID)
    await services.start()
    contract = hello_contract().model_dump(mode="json")
    script = [
        Reply(
            "I'll hand this to corral.",
            [
                ToolCall(
                    "mcp__corral__assistant_start",
                    {
                        "intent": "say hi",
                        "repo": str(repo),
                        "contract": contract,
                        "invoked_by": "claude-code",
                    },
                )
            ],
        ),
        Reply("Polling.", [ToolCall("mcp__corral__assistant_poll", {"run_id": RUN_ID})]),
        Reply("The run waits for the operator to confirm its contract."),
    ]
    mcp_config = tmp_path / "mcp.json"
    mcp_config.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "corral": {
                        "command": sys.executable,
                        "args": ["-m", "corral.tui.cli", "mcp"],
                        "env": {
                            "CORRAL_HOME": str(state),
                            "CORRAL_CONFIG": str(tmp_path / "none.toml"),
                            "PYTHONPATH": str(REPO_ROOT),
                            "PATH": os.environ["PATH"],
                        },
                    }
                }
            }
        )
    )
    try:
        with FakeModelServer(script) as srv:
            launch = claude_launch(tmp_path / "claude", srv.url, repo, None, hooks=False)
            launch.env["ENABLE_TOOL_SEARCH"] = "false"  # MCP tools offered up front, not deferred
            argv = claude_print_argv(
                launch,
                "Have corral say hi in this repo.",
                "--mcp-config",
                str(mcp_config),
                "--allowedTools",
                "mcp__corral__assistant_start,mcp__corral__assistant_poll",
                "--",
            )
            done = await asyncio.to_thread(
                subprocess.run,
                argv,
                cwd=str(repo),
                env=launch.env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert done.returncode == 0, done.stderr + done.stdout
            offered = {name for r in srv.requests for name in r.tool_names}
            assert {"mcp__corral__assistant_start", "mcp__corral__assistant_poll"} <= offered, (
                sorted(offered),
                done.stdout[-2000:],
                done.stderr[-2000:],
            )
            results = [str(r) for r in srv.tool_results()]
            assert any(RUN_ID in r and '"status": "running"' in r for r in results), results
            assert any('"next_seq"' in r and '"events_skipped"' in r for r in results), results
        # the run is a session on the owner's board, also through the socket
        rows = await asyncio.to_thread(lambda: ControlClient(state).list())
        assert [r.intent for r in rows] == ["say hi"]
        row = await sup.wait_for(rows[0].session_id, needs=True, timeout=20)
        assert row.state is CoderState.CONTRACT_PROPOSED  # gate 1 stays the operator's
        ledger = json.loads((state / "mcp-runs.jsonl").read_text().splitlines()[0])
        assert ledger["run_id"] == RUN_ID and ledger["ancestry"][-1] == "claude-code"
    finally:
        gate.set()
        await services.close()
