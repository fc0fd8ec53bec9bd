"""The MCP tools with the official SDK's own client, over HTTP (the owner's
endpoint, bearer token) and over stdio (`corral mcp`, bridging to the owner or
becoming it): start gives a handle at once, poll reaches the gate, cancel
stops, and the bounds hold (8 open runs, idle TTL on an injected clock)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from corral.supervisor.api import Supervisor
from corral.supervisor.remote import CallerPolicy, OwnerServices, mcp_endpoint, owner_running
from corral.supervisor.states import CoderState
from tests.conftest import Clock, SupervisorFactory, eventually, hello_contract
from tests.fakes.scripted import ScriptedEngine, Wait, Write

REPO_ROOT = Path(__file__).resolve().parents[2]
CONTRACT = hello_contract().model_dump(mode="json")


@pytest.fixture
def short_state() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="cm", dir="/tmp"))
    yield path / "state"
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def owner(
    make_supervisor: SupervisorFactory, short_state: Path, clock: Clock
) -> AsyncIterator[tuple[Supervisor, OwnerServices]]:
    gate = asyncio.Event()  # the agent never finishes on its own
    sup = await make_supervisor(state=short_state, engine=ScriptedEngine([[Wait(gate)]]))
    services = OwnerServices(sup, mcp_http=True, clock=clock)
    await services.start()
    assert services.problems == [], services.problems
    yield sup, services
    gate.set()
    await services.close()


def http_client(url: str, token: str | None) -> Client:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    return Client(streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers)))


async def call(client: Client, tool: str, **args: Any) -> Any:
    result = await client.call_tool(tool, args)
    text = result.content[0].text  # type: ignore[union-attr]
    if result.is_error:
        raise ToolFailed(text)
    return json.loads(text)


class ToolFailed(Exception):
    pass


async def poll_until(client: Client, run_id: str, done: Any, timeout: float = 15) -> dict:
    since = 0
    events: list[dict] = []
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        polled = await call(client, "assistant_poll", run_id=run_id, since_seq=since)
        events += polled["events"]
        since = polled["next_seq"]
        polled["all_events"] = events
        if done(polled):
            return polled
        assert asyncio.get_running_loop().time() < deadline, polled
        await asyncio.sleep(0.05)


async def test_http_start_poll_to_the_gate_then_cancel(owner, repo: Path) -> None:
    sup, services = owner
    url, token = mcp_endpoint(sup.state_dir) or ("", "")
    assert url == services.mcp_url and url.startswith("http://127.0.0.1:")
    assert oct((sup.state_dir / "mcp.token").stat().st_mode & 0o777) == "0o600"
    assert services.http is not None and not services.http.loaded  # nobody called yet
    async with http_client(url, token) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert services.http.loaded  # the first caller was served once it loaded
        assert names == {
            "assistant_start",
            "assistant_poll",
            "assistant_cancel",
            "sessions_list",
            "session_get",
            "report_impossible",
        }
        start_tool = next(
            t for t in (await client.list_tools()).tools if t.name == "assistant_start"
        )
        assert "approving the verified diff is always the operator's" in (
            start_tool.description or ""
        )
        started = await call(
            client,
            "assistant_start",
            intent="say hi",
            repo=str(repo),
            contract=CONTRACT,
            invoked_by="Claude-Code",
        )
        assert started["status"] == "running" and started["run_id"].startswith("mcp-run-")
        assert started["ancestry"] == ["claude-code"]
        assert "waits at gate 1" in started["gate"]
        polled = await poll_until(client, started["run_id"], lambda p: p["needs_you"] is not None)
        assert polled["status"] == "running"
        assert polled["state"] == "contract_proposed"
        assert polled["needs_you"]["kind"] == "contract"
        assert polled["needs_you"]["contract"]["checks"][0]["name"] == "hello"
        seqs = [e["seq"] for e in polled["all_events"]]
        assert seqs == list(range(len(seqs))) and polled["events_skipped"] == 0
        # the run is an ordinary session on the owner's board
        listed = await call(client, "sessions_list")
        assert started["session_id"] in {r["session_id"] for r in listed}
        got = await call(client, "session_get", session_id=started["session_id"])
        assert got["session"]["state"] == "contract_proposed"
        cancelled = await call(client, "assistant_cancel", run_id=started["run_id"])
        assert cancelled["status"] == "cancelled"
        polled = await poll_until(client, started["run_id"], lambda p: p["status"] != "running")
        assert polled["status"] == "cancelled" and polled["result"]["state"] == "abandoned"
        again = await call(client, "assistant_cancel", run_id=started["run_id"])
        assert again["status"] == "already_terminal"
        assert (await call(client, "assistant_cancel", run_id="mcp-run-x"))["status"] == "unknown"
        with pytest.raises(ToolFailed, match="run not found: mcp-run-x"):
            await call(client, "assistant_poll", run_id="mcp-run-x")
    ledger = (sup.state_dir / "mcp-runs.jsonl").read_text().splitlines()
    assert json.loads(ledger[0])["ancestry"] == ["claude-code"]


async def test_http_refuses_a_missing_or_wrong_token(owner) -> None:
    sup, services = owner
    assert services.mcp_url is not None
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    async with httpx2.AsyncClient() as http:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "token"}):
            answer = await http.post(services.mcp_url, json=body, headers=headers)
            assert answer.status_code == 401
            assert "mcp.token" in answer.json()["error"]
        # the owner is unaffected
        assert sup.list() == []


async def test_the_ninth_open_run_is_refused_and_idle_runs_are_reaped(
    owner, repo: Path, clock: Clock
) -> None:
    sup, services = owner
    url, token = mcp_endpoint(sup.state_dir) or ("", "")
    async with http_client(url, token) as client:
        runs = [
            await call(client, "assistant_start", intent=f"say hi {i}", repo=str(repo))
            for i in range(8)
        ]
        with pytest.raises(ToolFailed, match="8 runs started through MCP are already open"):
            await call(client, "assistant_start", intent="one too many", repo=str(repo))
        assert len(sup.list()) == 8  # refused, never queued: no session was made
        # one poll keeps its run alive; the rest go idle past the TTL
        await eventually(
            lambda: all(sup.get(r["session_id"]).needs_you is not None for r in runs), timeout=10
        )
        clock.advance(3000)
        await call(client, "assistant_poll", run_id=runs[0]["run_id"])
        clock.advance(700)
        reaped = await services.handles.reap_idle()
        assert sorted(reaped) == sorted(r["run_id"] for r in runs[1:])
        with pytest.raises(ToolFailed, match="run not found"):
            await call(client, "assistant_poll", run_id=runs[1]["run_id"])
        # their handles are released; their contracts still wait for the operator
        await asyncio.sleep(0.2)
        assert all(
            sup.get(r["session_id"]).session.state is CoderState.CONTRACT_PROPOSED for r in runs
        )
        assert (await call(client, "assistant_poll", run_id=runs[0]["run_id"]))["status"] == (
            "running"
        )
        # still open: the bound counts them until the operator ends them
        with pytest.raises(ToolFailed, match="7 of them wait for the operator on the board"):
            await call(client, "assistant_start", intent="one too many", repo=str(repo))
        await sup.cancel(runs[1]["session_id"])
        await eventually(
            lambda: sup.get(runs[1]["session_id"]).session.state is CoderState.ABANDONED
        )
        # a slot is free again
        more = await call(client, "assistant_start", intent="again", repo=str(repo))
        assert more["status"] == "running"


async def test_the_idle_reaper_never_abandons_a_verified_diff_at_approval(
    make_supervisor: SupervisorFactory, short_state: Path, repo: Path, clock: Clock
) -> None:
    """Gate 2 waits for a person whoever started the run: a handle nobody
    polls is released, the diff stays at needs_approval and the operator can
    still approve it; a run with no decision pending is still cancelled."""
    from corral.supervisor.control.handles import HandleTable, StartArgs

    gate = asyncio.Event()
    sup = await make_supervisor(
        state=short_state,
        engine=ScriptedEngine([[Write("hello.txt", "hi\n")], [Wait(gate)]]),
    )
    table = HandleTable(
        sup, base_chain="", clock=clock, policy=CallerPolicy(callers_may_confirm=True)
    )
    try:
        started = await table.start(StartArgs(intent="x", repo=str(repo), contract=CONTRACT))
        sid = started["session_id"]
        row = await sup.wait_for(sid, {CoderState.NEEDS_APPROVAL, CoderState.FAILED}, timeout=15)
        assert row.state is CoderState.NEEDS_APPROVAL
        busy = await table.start(StartArgs(intent="y", repo=str(repo), contract=CONTRACT))
        await eventually(
            lambda: sup.get(busy["session_id"]).session.state is CoderState.RUNNING, timeout=10
        )
        clock.advance(table.bounds.idle_ttl_secs + 1)
        assert sorted(await table.reap_idle()) == sorted([started["run_id"], busy["run_id"]])
        await eventually(
            lambda: sup.get(busy["session_id"]).session.state is CoderState.ABANDONED, timeout=10
        )
        assert sup.get(sid).session.state is CoderState.NEEDS_APPROVAL
        assert table.open_runs() == 1  # the diff at approval is still open
        approved = await sup.approve(sid)
        assert approved.state is CoderState.MERGED
        assert table.open_runs() == 0
    finally:
        gate.set()
        await table.close()


async def test_bad_tool_input_is_a_clear_error(owner, repo: Path, tmp_path: Path) -> None:
    sup, _ = owner
    url, token = mcp_endpoint(sup.state_dir) or ("", "")
    async with http_client(url, token) as client:
        with pytest.raises(ToolFailed, match="repo is not a directory"):
            await call(client, "assistant_start", intent="x", repo="relative/path")
        with pytest.raises(ToolFailed, match="intent is empty"):
            await call(client, "assistant_start", intent="  ", repo=str(repo))
        with pytest.raises(ToolFailed, match="a contract needs at least one check"):
            await call(client, "assistant_start", intent="x", repo=str(repo), contract={})
        missing = tmp_path / "missing.json"
        with pytest.raises(ToolFailed, match=r"missing\.json"):
            await call(client, "assistant_start", intent="x", repo=str(repo), contract=str(missing))
        result = await client.call_tool("assistant_poll", {"since_seq": 0})
        assert result.is_error  # run_id is required
    assert sup.list() == []


async def test_a_contract_given_is_confirmed_only_when_the_operator_allows(
    make_supervisor: SupervisorFactory, short_state: Path, repo: Path
) -> None:
    gate = asyncio.Event()
    sup = await make_supervisor(state=short_state, engine=ScriptedEngine([[Wait(gate)]]))
    services = OwnerServices(sup, mcp_http=False, policy=CallerPolicy(callers_may_confirm=True))
    await services.start()
    try:
        handles = services.handles
        from corral.supervisor.control.handles import StartArgs

        given = await handles.start(StartArgs(intent="x", repo=str(repo), contract=CONTRACT))
        drafted = await handles.start(StartArgs(intent="y", repo=str(repo)))
        await eventually(
            lambda: sup.get(given["session_id"]).session.state is CoderState.RUNNING, timeout=10
        )
        row = await sup.wait_for(drafted["session_id"], needs=True, timeout=10)
        assert row.state is CoderState.CONTRACT_PROPOSED  # no contract given: the operator's
    finally:
        gate.set()
        await services.close()


async def test_an_agent_inside_corral_cannot_start_runs_unless_allowed(
    make_supervisor: SupervisorFactory, short_state: Path, repo: Path
) -> None:
    from corral.supervisor.control.handles import HandleTable, StartArgs
    from corral.supervisor.errors import CorralError

    sup = await make_supervisor(state=short_state)
    table = HandleTable(sup, base_chain="")
    with pytest.raises(CorralError, match="agent running inside corral"):
        await table.start(
            StartArgs(intent="x", repo=str(repo), invoked_by="corral>agent:claude>claude-code")
        )
    allowed = HandleTable(sup, base_chain="", policy=CallerPolicy(agents_may_start=True))
    started = await allowed.start(
        StartArgs(intent="x", repo=str(repo), invoked_by="corral>agent:claude")
    )
    assert started["ancestry"] == ["corral", "agent:claude"]
    await table.close()
    await allowed.close()


def stdio_params(home: Path, **env: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "corral.tui.cli", "mcp"],
        env={
            "CORRAL_HOME": str(home),
            "CORRAL_CONFIG": str(home.parent / "none.toml"),
            "CORRAL_TMUX_SOCKET_DIR": str(home.parent / "tmux"),
            "PYTHONPATH": str(REPO_ROOT),
            "PATH": os.environ["PATH"],
            **env,
        },
    )


@pytest.mark.slow
async def test_stdio_bridges_to_the_running_owner(owner, repo: Path) -> None:
    sup, _ = owner
    params = stdio_params(sup.state_dir, CORRAL_INVOKED_BY="")
    async with Client(params) as client:
        started = await call(
            client, "assistant_start", intent="say hi", repo=str(repo), contract=CONTRACT
        )
        # the run lives on the owner: on its board, with its events
        assert sup.get(started["session_id"]).session.intent == "say hi"
        polled = await poll_until(client, started["run_id"], lambda p: p["needs_you"])
        assert polled["needs_you"]["kind"] == "contract"
        assert (await call(client, "assistant_cancel", run_id=started["run_id"]))[
            "status"
        ] == "cancelled"
    params = stdio_params(sup.state_dir, CORRAL_INVOKED_BY="corral>agent:codex")
    async with Client(params) as client:
        with pytest.raises(ToolFailed, match="agent running inside corral"):
            await call(client, "assistant_start", intent="x", repo=str(repo))


@pytest.mark.slow
async def test_stdio_becomes_the_owner_when_none_runs(short_state: Path, repo: Path) -> None:
    params = stdio_params(short_state)
    async with Client(params) as client:
        assert await call(client, "sessions_list") == []
        assert owner_running(short_state)
        started = await call(
            client,
            "assistant_start",
            intent="say hi",
            repo=str(repo),
            contract=CONTRACT,
            engine="external:demo",
        )
        polled = await poll_until(client, started["run_id"], lambda p: p["needs_you"], 30)
        assert polled["needs_you"]["kind"] == "contract"
        # another client reaches the same owner through the socket
        from corral.supervisor.remote import ControlClient

        def listed() -> list[str]:
            with ControlClient(short_state) as control:
                return [r.session_id for r in control.list()]

        assert started["session_id"] in await asyncio.to_thread(listed)
    await eventually(lambda: not owner_running(short_state), timeout=10)


async def test_a_trimmed_event_buffer_states_the_gap(
    make_supervisor: SupervisorFactory, short_state: Path, repo: Path
) -> None:
    from corral.supervisor.control.handles import HandleTable, RunBounds, StartArgs

    sup = await make_supervisor(state=short_state)
    table = HandleTable(sup, bounds=RunBounds(event_buffer_max=2), base_chain="")
    started = await table.start(StartArgs(intent="x", repo=str(repo), contract=CONTRACT))
    await sup.wait_for(started["session_id"], needs=True, timeout=10)
    await eventually(lambda: table.runs[started["run_id"]].next_seq >= 4)
    polled = await table.poll(started["run_id"], 0)
    assert len(polled["events"]) == 2
    assert polled["events_skipped"] == polled["events"][0]["seq"] > 0
    assert polled["next_seq"] == polled["events"][-1]["seq"] + 1
    later = await table.poll(started["run_id"], polled["next_seq"])
    assert later["events"] == [] and later["events_skipped"] == 0
    await table.close()


async def test_http_malformed_json_is_a_clear_error(owner) -> None:
    sup, _ = owner
    url, token = mcp_endpoint(sup.state_dir) or ("", "")
    headers = {
        "Authorization": f"Bearer {token}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
    }
    async with httpx2.AsyncClient() as http:
        answer = await http.post(url, content=b"{not json", headers=headers)
        assert answer.status_code == 400
        assert "error" in answer.json()
    async with http_client(url, token) as client:  # the owner is unaffected
        assert await call(client, "sessions_list") == []


async def test_report_impossible_over_http_is_for_an_agent_about_its_own_task(owner) -> None:
    """The tool is served; the test process is the operator, not an agent
    corral runs, so it is refused in one sentence (an agent's own call is in
    test_impossible_report.py)."""
    sup, _services = owner
    url, token = mcp_endpoint(sup.state_dir) or ("", "")
    async with http_client(url, token) as client:
        with pytest.raises(ToolFailed, match="for an agent corral runs, about its own task"):
            await call(client, "report_impossible", reason="the tests contradict the intent")


async def test_a_repeated_keyed_start_makes_one_session(owner, repo: Path) -> None:
    """A client that sends its start twice (a retry after a timeout, both at
    once) gets one run and one session to confirm, not two."""
    sup, _services = owner
    url, token = mcp_endpoint(sup.state_dir) or ("", "")
    async with http_client(url, token) as client:
        start = {"intent": "say hi", "repo": str(repo), "idempotency_key": "k-1"}
        first, second = await asyncio.gather(
            call(client, "assistant_start", **start), call(client, "assistant_start", **start)
        )
        assert first["run_id"] == second["run_id"]
        assert first["session_id"] == second["session_id"]
        assert [first.get("replayed"), second.get("replayed")].count(True) == 1
        again = await call(client, "assistant_start", **start)
        assert again["run_id"] == first["run_id"] and again["replayed"] is True
        assert [s.session_id for s in sup.list()] == [first["session_id"]]
        # the same key for another start is a mistake, said, not answered with the first run
        with pytest.raises(ToolFailed, match="already used for a different start"):
            await call(client, "assistant_start", **{**start, "intent": "say bye"})
        # without a key, every start is its own run
        other = await call(client, "assistant_start", intent="say hi", repo=str(repo))
        assert other["session_id"] != first["session_id"]
        assert len(sup.list()) == 2


async def test_a_start_key_is_the_callers_own_and_a_refused_start_does_not_spend_it(
    make_supervisor: SupervisorFactory, short_state: Path, repo: Path
) -> None:
    from corral.supervisor.control.callers import Agent, Operator
    from corral.supervisor.control.handles import HandleTable, RunBounds, StartArgs
    from corral.supervisor.errors import CorralError

    gate = asyncio.Event()
    sup = await make_supervisor(state=short_state, engine=ScriptedEngine([[Wait(gate)]]))
    table = HandleTable(
        sup,
        base_chain="",
        policy=CallerPolicy(agents_may_start=True),
        bounds=RunBounds(max_open_runs=1),
    )
    keyed = StartArgs(intent="say hi", repo=str(repo), idempotency_key="shared")
    mine = await table.start(keyed, Operator(pid=1))
    # an agent guessing the operator's key gets no handle of theirs
    with pytest.raises(CorralError, match="runs started through MCP are already open"):
        await table.start(keyed, Agent("s-agent", pid=2))
    # that refusal made nothing, so the same key retried later is a fresh start
    await sup.cancel(mine["session_id"])
    await eventually(lambda: sup.get(mine["session_id"]).session.state is CoderState.ABANDONED)
    theirs = await table.start(keyed, Agent("s-agent", pid=2))
    assert theirs["session_id"] != mine["session_id"] and "replayed" not in theirs
    assert (await table.start(keyed, Operator(pid=3)))["replayed"] is True
    with pytest.raises(CorralError, match="idempotency_key must be 1 to 200 characters"):
        await table.start(StartArgs(intent="x", repo=str(repo), idempotency_key=" "))
    gate.set()
    await table.close()
