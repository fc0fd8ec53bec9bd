"""Who may call a method is said once, in its `Call` record, and every way in
obeys it: the control socket and the MCP tools alike (`rules.admit`).

The caller is classified for real: the owner's table of agent pane roots names
this test process as an agent's pane root, so the owner takes every
connection this process opens (a unix socket, a loopback TCP connection) for
that agent, exactly as it takes an agent's in its tmux pane. Then a record's
flag is changed, and nothing else: both ways in refuse the agent at once.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from corral.supervisor.api import Supervisor
from corral.supervisor.control import protocol as p
from corral.supervisor.control.callers import CallerClassifier
from corral.supervisor.control.surface import Calls
from corral.supervisor.errors import CorralError
from corral.supervisor.remote import AsyncControlClient, OwnerServices, mcp_endpoint
from tests.conftest import SupervisorFactory
from tests.fakes.scripted import ScriptedEngine, Wait
from tests.integration.test_mcp import ToolFailed, call, http_client
from tests.integration.test_mcp import short_state as short_state  # the fixture

AGENT = "s-agent-of-this-test"


@pytest.fixture
async def agent_owner(
    make_supervisor: SupervisorFactory, short_state: Path
) -> AsyncIterator[Supervisor]:
    gate = asyncio.Event()
    sup = await make_supervisor(state=short_state, engine=ScriptedEngine([[Wait(gate)]]))
    services = OwnerServices(sup, mcp_http=True)
    # this process is an agent's pane root: whatever it connects with is that agent
    services.control.classifier = CallerClassifier(lambda: {os.getpid(): AGENT})
    await services.start()
    assert services.problems == [], services.problems
    yield sup
    gate.set()
    await services.close()


@pytest.fixture
def list_is_a_persons() -> Iterator[None]:
    """`list` made a person's method, in its record and nowhere else."""
    record = Calls.list
    before = record.person
    object.__setattr__(record, "person", "read {whose} board")
    yield
    object.__setattr__(record, "person", before)


async def test_the_agent_reads_the_board_both_ways_as_its_record_allows(
    agent_owner: Supervisor,
) -> None:
    """The record as shipped: agents may list the board (so the refusals
    below are the record's doing, not the classification's)."""
    client = await AsyncControlClient.connect(agent_owner.state_dir)
    try:
        assert client.hello["caller"]["session_id"] == AGENT
        assert await client.request(Calls.list, p.NoParams()) == []
    finally:
        await client.close()
    url, token = mcp_endpoint(agent_owner.state_dir) or ("", "")
    async with http_client(url, token) as mcp:
        assert await call(mcp, "sessions_list") == []


async def test_a_person_only_record_refuses_the_agent_through_the_socket_and_mcp(
    agent_owner: Supervisor, list_is_a_persons: None
) -> None:
    client = await AsyncControlClient.connect(agent_owner.state_dir)
    try:
        with pytest.raises(CorralError, match="may not read a session's board; only the operator"):
            await client.request(Calls.list, p.NoParams())
    finally:
        await client.close()
    url, token = mcp_endpoint(agent_owner.state_dir) or ("", "")
    async with http_client(url, token) as mcp:
        with pytest.raises(ToolFailed, match="may not read a session's board; only the operator"):
            await call(mcp, "sessions_list")


async def test_an_own_session_record_keeps_the_agent_to_its_own_session_over_mcp(
    agent_owner: Supervisor,
) -> None:
    """`get` made own-session in its record: the MCP tool refuses another
    session's, as the socket does."""
    record = Calls.get
    object.__setattr__(record, "own_session", True)
    try:
        url, token = mcp_endpoint(agent_owner.state_dir) or ("", "")
        async with http_client(url, token) as mcp:
            with pytest.raises(ToolFailed, match="may call get only about its own session"):
                await call(mcp, "session_get", session_id="someone-else")
        client = await AsyncControlClient.connect(agent_owner.state_dir)
        try:
            with pytest.raises(CorralError, match="may call get only about its own session"):
                await client.request(Calls.get, p.SessionParams(session_id="someone-else"))
        finally:
            await client.close()
    finally:
        object.__setattr__(record, "own_session", False)
