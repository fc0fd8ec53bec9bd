"""The allow-list a confined agent's network goes through, and corral's proxy
itself (real sockets, no sandbox): what an entry allows, where an agent's
endpoints come from, and the proxy's refusals — a host off the list, a
second request on a kept-alive connection aimed at another host, a head
that never ends, a loop of refused attempts flooding the log."""

from __future__ import annotations

import asyncio
import shutil
import socket
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral.supervisor.agents.profiles import profile_for
from corral.supervisor.events import BlockedData
from corral.supervisor.sandbox import netproxy
from corral.supervisor.sandbox.netproxy import (
    BLOCKED_PER_WINDOW,
    REPEAT_SECS,
    AllowListProxy,
    Upstreams,
    forget_agent,
    network_proxy,
    serve_agent,
    serve_agent_again,
)
from corral.supervisor.sandbox.netproxy import Upstream as NetProxyUpstream
from corral.supervisor.sandbox.netstart import relay_argv
from corral.supervisor.sandbox.network import (
    RELAY_PORT,
    BadAllowEntry,
    NetworkAllow,
    agent_allow,
    parse_entry,
    proxy_env,
)


@pytest.mark.parametrize(
    ("entry", "host", "port", "allowed"),
    [
        ("pypi.org", "pypi.org", 443, True),
        ("pypi.org", "PyPI.org.", 80, True),  # case and a trailing dot do not matter
        ("pypi.org", "pypi.org", 22, False),  # a bare host is 443 and 80 only
        ("pypi.org", "evil.pypi.org", 443, False),
        ("*.npmjs.org", "registry.npmjs.org", 443, True),
        ("*.npmjs.org", "npmjs.org", 443, False),
        ("*.npmjs.org", "evilnpmjs.org", 443, False),
        ("127.0.0.1:8080", "127.0.0.1", 8080, True),
        ("127.0.0.1:8080", "127.0.0.1", 8081, False),
        ("127.0.0.1:8080", "localhost", 8080, False),  # another spelling is another entry
        ("[::1]:8080", "::1", 8080, True),
        ("http://127.0.0.1:9/v1", "127.0.0.1", 9, True),
        ("https://api.example.com/v1", "api.example.com", 443, True),
    ],
)
def test_an_entry_allows_exactly_its_host_and_ports(
    entry: str, host: str, port: int, allowed: bool
) -> None:
    assert NetworkAllow.of([entry]).permits(host, port) is allowed


@pytest.mark.parametrize("bad", ["pypi org", "host:port", "[::1", "ftp://x", "a:99999", "\x1b]2;x"])
def test_a_bad_entry_says_what_to_write(bad: str) -> None:
    with pytest.raises(BadAllowEntry):
        parse_entry(bad)


def test_an_agents_endpoints_come_from_its_own_variables_only() -> None:
    env = {
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:4001",
        "JENKINS_URL": "http://127.0.0.1:8080",  # the operator's, not the agent's
        "HTTPS_PROXY": "http://127.0.0.1:3128",  # corral sets those
        "OPENCODE_CONFIG_CONTENT": '{"provider":{"x":{"options":{"baseURL":"http://127.0.0.1:4002/v1"}}}}',
    }
    hosts = profile_for("claude").network_hosts  # its profile's own API hosts
    allow = agent_allow(
        "claude", env, ["pypi.org"], names=["ANTHROPIC_*", "OPENCODE_*"], hosts=hosts
    )
    assert allow.texts()[:2] == ["127.0.0.1:4001", "127.0.0.1:4002"]
    assert "api.anthropic.com" in allow.texts() and allow.texts()[-1] == "pypi.org"
    assert not allow.permits("127.0.0.1", 8080)
    assert not allow.permits("127.0.0.1", 3128)
    assert allow.loopback() == [("127.0.0.1", 4001), ("127.0.0.1", 4002)]


def test_codex_providers_base_urls_are_its_endpoints(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text(
        '[model_providers.fake]\nbase_url = "http://127.0.0.1:4010/v1"\n'
    )
    hosts = profile_for("codex").network_hosts
    allow = agent_allow("codex", {"CODEX_HOME": str(tmp_path)}, names=["CODEX_HOME"], hosts=hosts)
    assert allow.permits("127.0.0.1", 4010) and allow.permits("api.openai.com", 443)


def test_the_relay_port_never_takes_an_allowed_loopback_port(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from corral.supervisor.sandbox import netstart as network

    allow = NetworkAllow.of([f"127.0.0.1:{RELAY_PORT}", f"localhost:{RELAY_PORT + 1}"])
    if network.binder_perl() is not None:  # netbind.pl binds: the port is in the sockaddr
        argv = relay_argv("python", Path("/s/net.sock"), allow, ["agent"])
        binds = [argv[i + 1 : i + 4] for i, w in enumerate(argv) if w == "--bind"]
        ports = {role: int(raw[4:8], 16) for role, _family, raw in binds}
        assert ports["proxy"] == RELAY_PORT + 2
        assert ports[f"forward=127.0.0.1:{RELAY_PORT}"] == RELAY_PORT
        assert ports[f"forward?=localhost:{RELAY_PORT + 1}"] == RELAY_PORT + 1  # ::1 may lack
        assert argv[-2:] == ["--", "agent"]
    monkeypatch.setattr(network, "binder_perl", lambda: None)  # no perl: the relay binds
    argv = relay_argv("python", Path("/s/net.sock"), allow, ["agent"])
    assert argv[argv.index("--proxy-port") + 1] == str(RELAY_PORT + 2)
    assert proxy_env(allow)["HTTPS_PROXY"] == f"http://127.0.0.1:{RELAY_PORT + 2}"
    assert proxy_env(allow)["NO_PROXY"] == ""
    assert argv[-2:] == ["--", "agent"]


# -- the proxy ---------------------------------------------------------------------------


class Upstream:
    """A loopback HTTP server that records each request head it gets."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.heads: list[bytes] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                self.heads.append(data)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def short_dir() -> Iterator[Path]:
    made = Path(tempfile.mkdtemp(prefix="np-", dir="/tmp"))
    try:
        yield made
    finally:
        shutil.rmtree(made, ignore_errors=True)


async def ask(path: Path, raw: bytes) -> bytes:
    reader, writer = await asyncio.open_unix_connection(str(path))
    writer.write(raw)
    await writer.drain()
    try:
        return await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()


async def test_a_kept_alive_connection_cannot_reach_another_host(short_dir: Path) -> None:
    up = Upstream()
    proxy = AllowListProxy(Upstreams())
    blocked: list[tuple[str, str]] = []
    path = short_dir / "net.sock"
    await proxy.serve(
        "s1", path, NetworkAllow.of([f"127.0.0.1:{up.port}"]), lambda *b: blocked.append(b)
    )
    try:
        first = (
            f"GET http://127.0.0.1:{up.port}/a HTTP/1.1\r\nHost: 127.0.0.1:{up.port}\r\n"
            "Proxy-Connection: keep-alive\r\nProxy-Authorization: Basic c2VjcmV0\r\n\r\n"
        )
        second = "GET http://169.254.169.254/latest/ HTTP/1.1\r\nHost: 169.254.169.254\r\n\r\n"
        answer = await ask(path, (first + second).encode())
    finally:
        proxy.close_all()
        up.close()
    assert answer.startswith(b"HTTP/1.1 200 OK")
    head = up.heads[0]
    assert head.startswith(b"GET /a HTTP/1.1\r\n")  # origin form upstream
    assert b"Connection: close" in head and b"Proxy-" not in head
    # the second request went, if anywhere, to the allowed host: never to the other
    assert all(b"169.254" not in h.split(b"\r\n", 1)[0] for h in up.heads)


async def test_refusals_are_recorded_once_per_target(short_dir: Path) -> None:
    proxy = AllowListProxy(Upstreams())
    blocked: list[tuple[str, str]] = []
    path = short_dir / "net.sock"
    await proxy.serve("s1", path, NetworkAllow.of(["pypi.org"]), lambda *b: blocked.append(b))
    try:
        answers = [await ask(path, b"CONNECT evil.example:443 HTTP/1.1\r\n\r\n") for _ in range(5)]
        answers.append(await ask(path, b"CONNECT pypi.org:22 HTTP/1.1\r\n\r\n"))
        answers.append(await ask(path, b"GET https://evil.example/ HTTP/1.1\r\n\r\n"))
        answers.append(await ask(path, b"X" * 70000))  # a head that never ends
    finally:
        proxy.close_all()
    assert all(a.startswith(b"HTTP/1.1 403") for a in answers[:6]), answers
    assert answers[6].startswith(b"HTTP/1.1 400")
    assert answers[7] == b""
    assert [w for w, _ in blocked] == ["connect evil.example:443", "connect pypi.org:22"]
    assert REPEAT_SECS >= 600  # an agent retrying its telemetry is said once in ten minutes


def test_an_endpoint_the_agent_adds_to_its_own_config_widens_nothing(tmp_path: Path) -> None:
    """Codex's config.toml is in its writable CODEX_HOME: a provider it adds
    there (a database on the host's loopback) must not reach its next list."""
    home, state = tmp_path / "codex", tmp_path / "state"
    home.mkdir()
    config = home / "config.toml"
    config.write_text('[model_providers.fake]\nbase_url = "http://127.0.0.1:4010/v1"\n')
    env = {"CODEX_HOME": str(home)}
    first = agent_allow("codex", env, names=["CODEX_HOME"], state_dir=state)
    assert first.permits("127.0.0.1", 4010)
    config.write_text(
        config.read_text() + '[model_providers.evil]\nbase_url = "http://127.0.0.1:5432"\n'
    )
    later = agent_allow("codex", env, names=["CODEX_HOME"], state_dir=state)
    assert later.permits("127.0.0.1", 4010) and not later.permits("127.0.0.1", 5432)
    widened = agent_allow("codex", env, ["127.0.0.1:5432"], names=["CODEX_HOME"], state_dir=state)
    assert widened.permits("127.0.0.1", 5432)  # the operator's network_allow does


def test_opencode_providers_come_from_its_config_file(tmp_path: Path) -> None:
    config = tmp_path / "opencode.json"
    config.write_text('{"provider": {"x": {"options": {"baseURL": "http://127.0.0.1:4020/v1"}}}}')
    env = {"OPENCODE_CONFIG": str(config), "HOME": str(tmp_path)}
    allow = agent_allow("opencode", env, hosts=profile_for("opencode").network_hosts)
    assert allow.permits("127.0.0.1", 4020) and allow.permits("models.dev", 443)


class FakeCompanyProxy:
    """The operator's own proxy: records each CONNECT, answers 200, echoes."""

    def __init__(self) -> None:
        self.heads: list[bytes] = []
        self.server: asyncio.AbstractServer | None = None
        self.port = 0

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.heads.append(await reader.readuntil(b"\r\n\r\n"))
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        data = await reader.read(100)
        writer.write(b"echo:" + data)
        await writer.drain()
        writer.close()


async def test_what_is_allowed_goes_through_the_operators_own_proxy(short_dir: Path) -> None:
    company = FakeCompanyProxy()
    await company.start()
    up = Upstream()
    upstream = Upstreams(
        https=NetProxyUpstream.parse(f"http://me:s%40cret@127.0.0.1:{company.port}"),
        proxies={"https": f"http://127.0.0.1:{company.port}"},
    )
    proxy = AllowListProxy(upstream)
    path = short_dir / "net.sock"
    allow = NetworkAllow.of(["pypi.org", f"127.0.0.1:{up.port}"])
    await proxy.serve("s1", path, allow, lambda *_: None)
    try:
        tunnelled = await ask(path, b"CONNECT pypi.org:443 HTTP/1.1\r\n\r\nhello")
        refused = await ask(path, b"CONNECT evil.example:443 HTTP/1.1\r\n\r\n")
        local = await ask(path, f"GET http://127.0.0.1:{up.port}/x HTTP/1.1\r\n\r\n".encode())
    finally:
        proxy.close_all()
        up.close()
        assert company.server is not None
        company.server.close()
    assert tunnelled == b"HTTP/1.1 200 Connection established\r\n\r\necho:hello"
    assert refused.startswith(b"HTTP/1.1 403")
    assert len(company.heads) == 1  # the refused one never left; loopback went straight
    head = company.heads[0]
    assert head.startswith(b"CONNECT pypi.org:443 HTTP/1.1\r\n")
    assert b"Proxy-Authorization: Basic bWU6c0BjcmV0" in head  # me:s@cret, from corral's side
    assert local.startswith(b"HTTP/1.1 200 OK") and up.heads[0].startswith(b"GET /x ")


def test_no_proxy_sends_a_host_straight() -> None:
    company = NetProxyUpstream("proxy.corp", 3128)
    upstreams = Upstreams(https=company, proxies={"no": "internal.corp, .lan,mirror:8080"})
    assert upstreams.via("pypi.org", tunnel=True) == company
    assert upstreams.via("api.internal.corp", tunnel=True) is None
    assert upstreams.via("box.lan", tunnel=True) is None
    assert upstreams.via("mirror", tunnel=True) is None
    assert upstreams.via("127.0.0.1", tunnel=True) is None  # loopback: always straight
    assert upstreams.via("pypi.org", tunnel=False) is None  # no http proxy given
    assert Upstreams(https=company, proxies={"no": "*"}).via("pypi.org", tunnel=True) is None


async def test_a_later_owner_serves_a_running_agent_the_list_it_started_with(
    short_dir: Path,
) -> None:
    """The agent outlives its owner (tmux keeps its pane): the next owner,
    re-adopting it, serves its socket again with the same list, and a
    refusal still lands on the session's log as a typed event."""
    events: list[BlockedData] = []
    sockets = short_dir / "as" / "0123456789ab"
    sockets.mkdir(parents=True)
    path = sockets / "net.sock"
    allow = NetworkAllow.of(["pypi.org", "127.0.0.1:4001"])
    await serve_agent("sid-1", allow, path, events.append)  # type: ignore[arg-type]
    network_proxy().close("sid-1")  # the owner went away
    assert not path.exists()
    assert await serve_agent_again("sid-1", path, events.append)  # type: ignore[arg-type]
    assert network_proxy().allow_of("sid-1") == allow
    answer = await ask(path, b"CONNECT evil.example:443 HTTP/1.1\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 403")
    assert [(e.what, e.by) for e in events] == [("connect evil.example:443", "policy")]
    forget_agent("sid-1")  # its pane is gone: nothing of it is left
    assert not sockets.exists()
    assert not await serve_agent_again("sid-1", path, events.append)  # type: ignore[arg-type]


async def test_refusals_of_ever_new_targets_do_not_flood_the_log(short_dir: Path) -> None:
    proxy = AllowListProxy(Upstreams())
    blocked: list[tuple[str, str]] = []
    path = short_dir / "net.sock"
    await proxy.serve("s1", path, NetworkAllow.of(["pypi.org"]), lambda *b: blocked.append(b))
    try:
        for n in range(BLOCKED_PER_WINDOW + 15):
            answer = await ask(path, f"CONNECT evil{n}.example:443 HTTP/1.1\r\n\r\n".encode())
            assert answer.startswith(b"HTTP/1.1 403")  # every one refused…
    finally:
        proxy.close_all()
    assert len(blocked) == BLOCKED_PER_WINDOW + 1  # …but the log gets a bounded account
    assert blocked[-1][0] == "connect (more targets)"
    assert "the rest are not listed" in blocked[-1][1]


async def test_an_agent_cannot_hold_more_connections_than_the_cap(
    short_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(netproxy, "MAX_CONNECTIONS", 4)
    proxy = AllowListProxy(Upstreams())
    path = short_dir / "net.sock"
    await proxy.serve("s1", path, NetworkAllow.of(["pypi.org"]), lambda *_: None)
    held = [await asyncio.open_unix_connection(str(path)) for _ in range(4)]
    try:
        await asyncio.sleep(0.2)  # the four are accepted and waiting for a head
        reader, writer = await asyncio.open_unix_connection(str(path))
        assert await asyncio.wait_for(reader.read(), 5) == b""  # the fifth: closed at once
        writer.close()
    finally:
        for _, w in held:
            w.close()
        proxy.close_all()


def test_each_config_place_has_its_own_pin(tmp_path: Path) -> None:
    state = tmp_path / "state"
    for name, port in (("one", 4011), ("two", 4012)):
        home = tmp_path / name
        home.mkdir()
        (home / "config.toml").write_text(
            f'[model_providers.fake]\nbase_url = "http://127.0.0.1:{port}/v1"\n'
        )
        allow = agent_allow("codex", {"CODEX_HOME": str(home)}, state_dir=state)
        assert allow.permits("127.0.0.1", port)


async def test_a_deep_state_dir_still_gets_its_proxy_and_the_relay_reaches_it(
    tmp_path: Path,
) -> None:
    """A state dir deep in the tree (a test's tmp dir, a long home) puts the
    proxy's socket past what a unix socket address holds (108 bytes): it is
    bound and reached through its directory's descriptor, not refused (every
    demo session failed with "the network proxy's socket … is longer")."""
    from corral.supervisor.sandbox.netrelay import reachable

    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    path = deep / "net.sock"
    assert len(str(path)) > 108
    proxy = AllowListProxy(Upstreams())
    blocked: list[tuple[str, str]] = []
    await proxy.serve("s1", path, NetworkAllow.of(["pypi.org"]), lambda *b: blocked.append(b))
    try:
        assert path.is_socket()
        short = reachable(str(path))
        assert len(short) < 108
        reader, writer = await asyncio.open_unix_connection(short)
        writer.write(b"CONNECT evil.example:443 HTTP/1.1\r\n\r\n")
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), 10)
        writer.close()
    finally:
        proxy.close_all()
    assert answer.startswith(b"HTTP/1.1 403"), answer
    assert [w for w, _ in blocked] == ["connect evil.example:443"]


async def test_the_relays_reports_of_direct_attempts_are_recorded_and_never_forged(
    short_dir: Path,
) -> None:
    """A direct attempt the sandbox refused is reported by the relay inside
    (`REFUSED-TCP 10.1.2.3:5432`); the agent can write to that socket too,
    so only an IP address and a port are ever taken from a report."""
    proxy = AllowListProxy(Upstreams())
    blocked: list[tuple[str, str]] = []
    path = short_dir / "net.sock"
    await proxy.serve("s1", path, NetworkAllow.of(["pypi.org"]), lambda *b: blocked.append(b))
    try:
        for raw in (
            b"REFUSED-TCP 10.1.2.3:5432 HTTP/1.1\r\n\r\n",
            b"REFUSED-TCP 10.1.2.3:5432 HTTP/1.1\r\n\r\n",  # once per target
            b"REFUSED-UDP [fd00::53]:53 HTTP/1.1\r\n\r\n",
            b"REFUSED-TCP pypi.org.evil[link=x]:443 HTTP/1.1\r\n\r\n",  # not an address
            b"REFUSED-TCP 10.1.2.3 HTTP/1.1\r\n\r\n",  # no port
            b"REFUSED-TCP \x1b]52;c;aGk=\x07:1 HTTP/1.1\r\n\r\n",
        ):
            await ask(path, raw)
    finally:
        proxy.close_all()
    assert [w for w, _ in blocked] == ["connect 10.1.2.3:5432", "send to [fd00::53]:53"]
    assert all("a direct connection from inside the sandbox" in why for _, why in blocked)


def test_the_relay_reads_a_refusal_from_the_packet_it_drew() -> None:
    """What the watch's packet socket gets (from the IP header on): the reset
    answering a SYN names the destination; a connection's own abort, or any
    other segment, names nothing."""
    import struct

    from corral.supervisor.sandbox import netrelay

    def v4(proto: int, src: str, dst: str, payload: bytes) -> bytes:
        head = struct.pack("!BBHHHBBH", 0x45, 0, 20 + len(payload), 0, 0, 64, proto, 0)
        return head + socket.inet_aton(src) + socket.inet_aton(dst) + payload

    def tcp(sport: int, dport: int, seq: int, flags: int) -> bytes:
        return struct.pack("!HHIIBBHHH", sport, dport, seq, 1, 0x50, flags, 0, 0, 0)

    answer = v4(6, "169.254.169.254", "127.0.0.1", tcp(80, 40000, 0, 0x14))
    assert netrelay.refusal(answer, netrelay.AF_INET) == ("tcp", "169.254.169.254:80")
    aborted = v4(6, "127.0.0.1", "127.0.0.1", tcp(3000, 40000, 12345, 0x14))
    assert netrelay.refusal(aborted, netrelay.AF_INET) is None
    datagram = v4(17, "127.0.0.1", "10.0.0.2", struct.pack("!HHHH", 5353, 53, 9, 0) + b"x")
    unreachable = v4(1, "10.0.0.2", "127.0.0.1", bytes([3, 3, 0, 0, 0, 0, 0, 0]) + datagram)
    assert netrelay.refusal(unreachable, netrelay.AF_INET) == ("udp", "10.0.0.2:53")
    six = struct.pack("!IHBB", 6 << 28, 20, 6, 64) + socket.inet_pton(socket.AF_INET6, "::1") * 2
    assert netrelay.refusal(six + tcp(8080, 40000, 0, 0x14), netrelay.AF_INET6) == (
        "tcp",
        "[::1]:8080",
    )
    assert netrelay.refusal(b"\x45\x00", netrelay.AF_INET) is None  # cut short: nothing


def test_a_websocket_upgrade_goes_on_as_an_upgrade_and_nothing_else_does() -> None:
    """`ws://` through the proxy in absolute form: the upgrade reaches the
    server (`Connection: Upgrade`, its `Upgrade` line); a request that only
    carries an `Upgrade` header, or none, still ends with `Connection: close`."""
    from corral.supervisor.sandbox.netproxy import _origin_form

    upgrade = (
        b"GET http://127.0.0.1:9/echo HTTP/1.1\r\nHost: 127.0.0.1:9\r\n"
        b"Upgrade: websocket\r\nConnection: keep-alive, Upgrade\r\nProxy-Connection: x\r\n"
        b"Sec-WebSocket-Key: a2V5\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
    host, port, head = _origin_form(upgrade)
    assert (host, port) == ("127.0.0.1", 9)
    lines = head.split(b"\r\n")
    assert lines[0] == b"GET /echo HTTP/1.1"
    assert b"Connection: Upgrade" in lines and b"Upgrade: websocket" in lines
    assert b"Connection: close" not in lines and not any(b"Proxy-" in line for line in lines)
    _, _, plain = _origin_form(upgrade.replace(b"Connection: keep-alive, Upgrade\r\n", b""))
    assert b"Connection: close" in plain.split(b"\r\n")
    assert b"Connection: Upgrade" not in plain.split(b"\r\n")
