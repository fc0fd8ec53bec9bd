"""The owner's control socket, with real clients: the facade's calls answer
the same as in-process, streams replay and follow, errors carry the
supervisor's sentence and kind, and bad clients cost only their connection."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import socket
import stat
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from corral.supervisor.api import Supervisor
from corral.supervisor.control.protocol import ConfirmParams, WaitParams
from corral.supervisor.control.server import ControlServer
from corral.supervisor.control.surface import Calls
from corral.supervisor.errors import CorralError
from corral.supervisor.remote import (
    MAX_MESSAGE_BYTES,
    AsyncControlClient,
    ControlClient,
    NoOwner,
    OwnerServices,
    owner_running,
    socket_path,
)
from corral.supervisor.session.registry import SessionRegistry
from corral.supervisor.states import CoderState
from tests.conftest import SupervisorFactory, eventually, proposed
from tests.integration.conftest import OwnerFactory


@pytest.fixture
def short_state() -> Iterator[Path]:
    """A state dir with a short path (a unix socket path has ~104 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="cs", dir="/tmp"))
    yield path / "state"
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
async def owner(
    make_supervisor: SupervisorFactory, short_state: Path
) -> AsyncIterator[tuple[Supervisor, OwnerServices]]:
    sup = await make_supervisor(state=short_state)
    services = OwnerServices(sup, mcp_http=False)
    await services.start()
    assert services.problems == []
    yield sup, services
    await services.close()


def raw_exchange(path: Path, payload: bytes) -> list[dict]:
    """Send raw bytes, read every answer line until the owner stops talking."""
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(2)
        sock.connect(str(path))
        sock.sendall(payload)
        sock.shutdown(socket.SHUT_WR)
        data = b""
        while True:
            try:
                chunk = sock.recv(65536)
            except (TimeoutError, ConnectionResetError):
                break
            if not chunk:
                break
            data += chunk
    return [json.loads(line) for line in data.splitlines() if line.strip()]


async def test_get_and_list_answer_as_in_process(owner, repo: Path) -> None:
    sup, _services = owner
    sid = await proposed(sup, repo)
    assert owner_running(sup.state_dir)

    def call() -> tuple:
        with ControlClient(sup.state_dir) as client:
            return client.get(sid), client.list(), client.hello

    detail, rows, hello = await asyncio.to_thread(call)
    assert detail == sup.get(sid)
    assert [r.session_id for r in rows] == [r.session_id for r in sup.list()]
    assert hello["protocol"] == "corral-control/1"
    assert hello["pid"] == os.getpid()


async def test_errors_carry_the_sentence_and_kind(owner, repo: Path) -> None:
    sup, _ = owner
    client = await AsyncControlClient.connect(sup.state_dir)
    try:
        with pytest.raises(CorralError) as exc:
            await client.get("nope")
        with pytest.raises(CorralError) as direct:
            sup.get("nope")
        assert str(exc.value) == str(direct.value)
        sid = await proposed(sup, repo)
        await client.request(Calls.confirm, ConfirmParams(session_id=sid))
        await sup.wait_for(sid, needs=True, timeout=10)
        with pytest.raises(CorralError, match="already"):
            await client.request(
                Calls.confirm, ConfirmParams(session_id=sid)
            )  # the "already happened" sentence travels as is
    finally:
        await client.close()


async def test_subscribe_replays_then_follows(owner, repo: Path) -> None:
    sup, _ = owner
    sid = await proposed(sup, repo)
    client = await AsyncControlClient.connect(sup.state_dir)
    try:
        result, sub = await client.subscribe(sid, 0)
        assert result.live and sub is not None
        await client.request(Calls.confirm, ConfirmParams(session_id=sid))
        row = await client.request(
            Calls.wait_for, WaitParams(session_id=sid, needs=True, timeout=10)
        )
        assert row.state is CoderState.NEEDS_APPROVAL
        seen: list[int] = []

        async def read() -> None:
            async for event in sub:
                seen.append(event.seq)
                if event.seq + 1 >= (sup.get(sid).next_seq or 0):
                    return

        await asyncio.wait_for(read(), 5)
        assert seen == list(range(len(seen)))  # every seq, in order, from 0
        # a later subscriber starts where it asks
        _result2, sub2 = await client.subscribe(sid, 3)
        assert sub2 is not None
        first = await asyncio.wait_for(sub2.get(), 2)
        assert first.seq == 3
        client.unsubscribe(sub2)
        client.unsubscribe(sub)
    finally:
        await client.close()


async def test_watch_streams_board_rows(owner, repo: Path) -> None:
    sup, _ = owner
    client = await AsyncControlClient.connect(sup.state_dir)
    try:
        rows, watcher = await client.watch()
        assert rows == []
        sid = await proposed(sup, repo)
        changed = await asyncio.wait_for(watcher.get(), 5)
        assert sid in {r.session_id for r in changed}
        client.unwatch(watcher)
    finally:
        await client.close()


async def test_bad_input_gets_a_clear_error_and_the_owner_carries_on(owner, repo: Path) -> None:
    sup, _ = owner
    path = socket_path(sup.state_dir)
    answers = await asyncio.to_thread(
        raw_exchange,
        path,
        b"{not json\n"
        b"[1, 2]\n"
        b'{"jsonrpc": "2.0", "id": 1, "method": "launch_missiles"}\n'
        b'{"jsonrpc": "2.0", "id": 2, "method": "get", "params": {"sessionid": "x"}}\n'
        b'{"jsonrpc": "2.0", "id": 3, "method": "get", "params": {"session_id": "nope"}}\n'
        b'{"jsonrpc": "2.0", "id": 4, "method": "list"}\n',
    )
    by_id = {a.get("id"): a for a in answers}
    codes = [a["error"]["code"] for a in answers if a.get("id") is None]
    assert codes == [-32700, -32600]  # malformed JSON; not a request object
    assert by_id[1]["error"]["code"] == -32601
    assert "launch_missiles" in by_id[1]["error"]["message"]
    assert by_id[2]["error"]["code"] == -32602
    assert by_id[2]["error"]["data"]["kind"] == "InvalidParams"
    assert by_id[3]["error"] == {
        "code": -32000,
        "message": "no corral session 'nope'",
        "data": {"kind": "CorralError"},
    }
    assert by_id[4]["result"] == []
    # oversized: one clear error, that connection closed, the owner unaffected
    big = (
        b'{"jsonrpc": "2.0", "id": 5, "method": "list", "params": {"x": "'
        + b"a" * (MAX_MESSAGE_BYTES + 10)
        + b'"}}\n'
    )
    answers = await asyncio.to_thread(raw_exchange, path, big)
    assert answers[0]["error"]["code"] == -32001
    assert str(MAX_MESSAGE_BYTES) in answers[0]["error"]["message"]
    sid = await proposed(sup, repo)

    def get() -> str:
        with ControlClient(sup.state_dir) as client:
            return client.get(sid).session.id

    assert await asyncio.to_thread(get) == sid


async def test_a_client_gone_mid_stream_costs_nothing(
    make_owner: OwnerFactory, short_state: Path, repo: Path
) -> None:
    sup, registry = await make_owner(state=short_state)
    services = OwnerServices(sup, mcp_http=False)
    await services.start()
    try:
        await _gone_mid_stream(sup, registry, repo)
    finally:
        await services.close()


async def _gone_mid_stream(sup: Supervisor, registry: SessionRegistry, repo: Path) -> None:
    sid = await proposed(sup, repo)
    reader, writer = await asyncio.open_unix_connection(str(socket_path(sup.state_dir)))
    writer.write(
        b'{"jsonrpc":"2.0","id":1,"method":"subscribe","params":{"session_id":"%s"}}\n'
        % sid.encode()
    )
    await writer.drain()
    await reader.readline()  # the answer; events follow
    writer.transport.abort()  # gone, unread
    await sup.confirm(sid)
    row = await sup.wait_for(sid, needs=True, timeout=10)
    assert row.state is CoderState.NEEDS_APPROVAL
    await eventually(lambda: registry.live(sid).log.subscriber_count == 0)
    client = await AsyncControlClient.connect(sup.state_dir)
    try:
        assert (await client.get(sid)).session.state is CoderState.NEEDS_APPROVAL
    finally:
        await client.close()


async def test_socket_is_private_and_checks_the_peer_uid(
    make_supervisor: SupervisorFactory, short_state: Path
) -> None:
    sup = await make_supervisor(state=short_state)
    server = ControlServer(sup, allowed_uid=os.getuid() + 4242)
    path = await server.start()
    try:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        answers = await asyncio.to_thread(
            raw_exchange, path, b'{"jsonrpc":"2.0","id":1,"method":"list"}\n'
        )
        assert len(answers) == 1
        assert answers[0]["error"]["data"]["kind"] == "PermissionDenied"
        assert f"uid {os.getuid()}" in answers[0]["error"]["message"]
        with pytest.raises(CorralError, match="uid"):
            await asyncio.to_thread(ControlClient, sup.state_dir)
    finally:
        await server.close()
    assert not path.exists()
    with pytest.raises(NoOwner, match="no corral owns"):
        ControlClient(sup.state_dir)


async def test_discussions_are_served_when_the_owner_has_them(
    make_supervisor: SupervisorFactory, short_state: Path, repo: Path
) -> None:
    from corral.supervisor.discuss import Discussions

    sup = await make_supervisor(state=short_state)
    discussions = Discussions(short_state, None)
    server = ControlServer(sup, discussions=lambda: discussions)
    await server.start()
    client = await AsyncControlClient.connect(sup.state_dir)
    try:
        assert await client.call("discussions_list") == []
        started = await client.call("discussion_start", repo=str(repo))
        did = started["discussion_id"]
        got = await client.call("discussion_get", discussion_id=did)
        assert got["discussion_id"] == did and got["repo"] == str(repo.resolve())
        assert [d["discussion_id"] for d in await client.call("discussions_list")] == [did]
        assert await client.call("discussion_close", discussion_id=did) == {"closed": True}
        with pytest.raises(CorralError, match="disc-nope"):
            await client.call("discussion_get", discussion_id="disc-nope")
    finally:
        await client.close()
        await discussions.close_all()
        await server.close()
    bare = ControlServer(sup)
    await bare.start()
    none = await AsyncControlClient.connect(sup.state_dir)
    try:
        with pytest.raises(CorralError, match="serves no discussions"):
            await none.call("discussions_list")
    finally:
        await none.close()
        await bare.close()


@pytest.mark.slow
async def test_a_flooding_client_is_held_to_its_cap_then_cut_off_and_others_are_answered(
    make_owner: OwnerFactory,
    short_state: Path,
    repo: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A client that writes many `history` requests and reads no answer: the
    owner works on at most `max_in_flight` of them (memory bounded by the
    cap, not by what was sent), another client's `get` is answered while the
    flood waits, and the flooder is cut off with a sentence in the log."""
    from corral.supervisor.control.server import ClientBounds
    from corral.supervisor.events import ToolCallData

    sup, registry = await make_owner(state=short_state)
    sid = await proposed(sup, repo)
    log = registry.live(sid).log
    for _ in range(2000):  # a history of ~250 KB an answer: the flooder's socket fills
        log.append(ToolCallData.with_args("shell", {"command": "pytest -q " + "x" * 40}))
    cap = 4
    server = ControlServer(
        sup, bounds=ClientBounds(max_in_flight=cap, max_pending_bytes=4 << 20, write_stall_secs=2)
    )
    path = await server.start()
    flood = socket.socket(socket.AF_UNIX)
    flood.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    flood.connect(str(path))
    request = '{"jsonrpc":"2.0","id":%d,"method":"history","params":{"session_id":"%s"}}\n'
    payload = b"".join((request % (n, sid)).encode() for n in range(1500))

    def write_all() -> None:
        with contextlib.suppress(OSError):  # cut off
            flood.sendall(payload)  # blocks once the owner stops reading it: it should

    def get() -> str:
        with ControlClient(sup.state_dir) as client:
            return client.get(sid).session.id

    writer = asyncio.get_running_loop().run_in_executor(None, write_all)
    try:
        seen: list[int] = []

        def flooder_stuck() -> bool:
            loads = [c for c in server.clients() if c["in_flight"]]
            seen.extend(c["in_flight"] for c in loads)
            return bool(loads) and loads[0]["in_flight"] == cap

        await eventually(flooder_stuck, timeout=10)
        # another client is answered while the flood waits
        with caplog.at_level("WARNING", logger="corral.supervisor.control"):
            assert await asyncio.to_thread(get) == sid
            assert max(seen) <= cap  # never more than the cap worked on at once
            await eventually(
                lambda: any("cut off a client" in r.getMessage() for r in caplog.records),
                timeout=15,
            )
        said = next(r.getMessage() for r in caplog.records if "cut off" in r.getMessage())
        assert "the operator" in said and ("unread" in said or "read none" in said), said
        await eventually(lambda: server.clients() == [], timeout=10)
        await asyncio.wait_for(writer, 10)
        # the owner still answers everyone else
        assert await asyncio.to_thread(get) == sid
    finally:
        flood.close()
        await server.close()


async def test_a_lone_surrogate_is_refused_before_anything_acts(owner, repo: Path) -> None:
    """`\\ud800` in JSON is no text: a start holding it once made a session that
    could never be stored (and failed the owner's close). Refused whole now."""
    sup, _ = owner
    payload = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "start",
            "params": {"intent": "fix \ud800 it", "repo": str(repo)},
        }
    ).encode()
    answers = await asyncio.to_thread(raw_exchange, socket_path(sup.state_dir), payload + b"\n")
    assert answers[0]["error"]["code"] == -32602
    assert "lone UTF-16 surrogate" in answers[0]["error"]["message"]
    assert sup.list() == []


async def test_an_intent_of_invalid_utf8_is_refused_in_process_too(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    """`corral run --intent $'\\xff'` with no owner: argv decodes the byte to a
    lone surrogate; the start is refused with a sentence and nothing is made."""
    sup = await make_supervisor()
    with pytest.raises(CorralError, match="not text"):
        await sup.start("fix \udcff it", repo)
    assert sup.list() == []
