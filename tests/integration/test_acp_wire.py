"""The ACP wire's own requests, against the scripted ACP agent over real
pipes: what the SDK's schema lacks (`models` in the answer to `session/new`,
`session/set_model`) is carried beside the SDK's traffic, an agent's error
answer is the agent's sentence, and an agent that goes while a request waits
ends the wait instead of leaving it hanging."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest
from acp import PROTOCOL_VERSION, RequestError
from acp.client.connection import ClientSideConnection

from corral.supervisor.acp.client import CorralClient
from corral.supervisor.acp.files import WorktreeFiles
from corral.supervisor.acp.terminals import Terminals
from corral.supervisor.acp.wire import StdioWire

FAKE = Path(__file__).resolve().parents[1] / "fakes" / "acp_agent.py"


@pytest.mark.slow
async def test_corrals_own_requests_travel_beside_the_sdks_and_end_when_the_agent_goes(
    tmp_path: Path,
) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(FAKE), "models", cwd=tmp_path,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    results: list[tuple[str, Any]] = []
    files = WorktreeFiles(tmp_path)

    async def no_permission(*_: Any) -> Any:
        raise AssertionError("nothing asks permission here")

    client = CorralClient(files, Terminals(files), lambda _e: None, no_permission)
    wire = StdioWire(
        proc.stdout,
        proc.stdin,
        on_malformed=lambda _line: None,
        on_sent=lambda *_: None,
        on_result=lambda method, result: results.append((method, result)),
    )
    conn = ClientSideConnection(client, wire)  # type: ignore[arg-type]
    try:
        await asyncio.wait_for(conn.initialize(protocol_version=PROTOCOL_VERSION), 20)
        session = await asyncio.wait_for(conn.new_session(cwd=str(tmp_path), mcp_servers=[]), 20)
        # the raw answer, with what the SDK's model of it drops
        raw = dict(results)["session/new"]
        assert raw["models"]["currentModelId"] == "fast-1"
        assert [m["modelId"] for m in raw["models"]["availableModels"]] == ["fast-1", "deep-2"]
        sid = session.session_id
        params = {"sessionId": sid, "modelId": "nope"}
        with pytest.raises(RequestError, match="unknown model nope"):
            await asyncio.wait_for(wire.request("session/set_model", params), 20)
        ok = await asyncio.wait_for(
            wire.request("session/set_model", {"sessionId": sid, "modelId": "deep-2"}), 20
        )
        assert ok == {}
        # the SDK's own traffic still flows after corral's (its answers were not stolen)
        answer = await asyncio.wait_for(
            conn.set_config_option(config_id="reasoning", session_id=sid, value="high"), 20
        )
        assert answer is not None
        assert {o.id: o.current_value for o in answer.config_options}["reasoning"] == "high"
        # the agent goes while corral waits: the wait ends
        proc.kill()
        with pytest.raises(ConnectionError):
            await asyncio.wait_for(
                wire.request("session/set_model", {"sessionId": sid, "modelId": "fast-1"}), 20
            )
    finally:
        await conn.close()
        if proc.returncode is None:
            proc.kill()
        await proc.wait()
