"""A confined agent's network, through the real sandbox (bwrap), the real
relay inside it and corral's real allow-list proxy outside: loopback TCP to a
service on the host, an abstract unix socket on the host and a host that is
not on the list are all refused (the proxy's refusals are `blocked` events);
the agent's model endpoint on 127.0.0.1 still answers a streamed request,
both at its own `http://127.0.0.1:PORT` address (the loopback forward) and
through the proxy variables.

The "agent" is a Python probe run by `launch_agent` exactly as an agent's
pane would run it. Everything lives under /var/tmp (the sandbox's /tmp is
private)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import sys
import tempfile
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral.supervisor.events import BlockedData
from corral.supervisor.sandbox import SandboxPolicy, sandbox_status
from corral.supervisor.sandbox.agent import launch_agent
from corral.supervisor.sandbox.netproxy import AllowListProxy
from corral.supervisor.states import CoderState as S
from tests.conftest import eventually, plan_texts
from tests.e2e.support import screen_text
from tests.fakes.model_server import FakeModelServer
from tests.integration.test_sandbox_agents import (  # noqa: F401 - its fixtures
    FEATURE,
    World,
    agent_script,
    open_sup,
    server,
    world,
)

STATUS = sandbox_status()
pytestmark = pytest.mark.skipif(
    not STATUS.available, reason=f"no sandbox (bwrap with user namespaces) here: {STATUS.detail}"
)

PROBE = textwrap.dedent(
    """
    import json, os, socket, sys, urllib.request, urllib.error

    def tcp(host, port):
        s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        s.settimeout(3)
        try:
            s.connect((host, port))
            s.sendall(b"GET / HTTP/1.0\\r\\n\\r\\n")
            return "connected:" + s.recv(100).decode("latin-1")
        except OSError as exc:
            return "refused:" + type(exc).__name__
        finally:
            s.close()

    def abstract(name):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(3)
        try:
            s.connect("\\0" + name)
            return "connected:" + s.recv(100).decode("latin-1")
        except OSError as exc:
            return "refused:" + type(exc).__name__
        finally:
            s.close()

    def http(url, proxy=True, body=None):
        handlers = [] if proxy else [urllib.request.ProxyHandler({})]
        opener = urllib.request.build_opener(*handlers)
        req = urllib.request.Request(url, data=body, headers={"content-type": "application/json"})
        try:
            with opener.open(req, timeout=10) as r:
                return "ok:" + r.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as exc:
            return f"http-{exc.code}:" + exc.read().decode("utf-8", "replace")
        except OSError as exc:
            return "refused:" + type(exc).__name__ + ":" + str(exc)

    def udp(host, port):
        s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_DGRAM)
        try:
            s.sendto(b"x", (host, port))
            return "sent"
        except OSError as exc:
            return "refused:" + type(exc).__name__
        finally:
            s.close()

    def powers():
        status = open("/proc/self/status").read()
        caps = {l.split(":")[0]: l.split()[1] for l in status.splitlines() if l.startswith("Cap")}
        return json.dumps([caps["CapEff"], caps["CapPrm"], caps["CapAmb"], os.getuid()])

    def unroute():
        # what a hostile agent would do to go unseen: take the catch-all route away
        import struct
        s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)
        body = struct.pack("=BBBBBBBBI", 2, 0, 0, 0, 255, 3, 254, 2, 0) + struct.pack("=HHi", 8, 4, 1)
        s.sendto(struct.pack("=IHHII", 16 + len(body), 25, 5, 1, 0) + body, (0, 0))
        error = struct.unpack_from("=i", s.recv(4096), 16)[0]
        return "removed" if error == 0 else "refused:" + os.strerror(-error)

    def read_head(s):
        head = b""
        while not head.endswith(b"\\r\\n\\r\\n"):
            byte = s.recv(1)
            if not byte:
                break
            head += byte
        return head

    def ws(mode, host, port, text):
        # a websocket client as a CLI's would speak it: through the proxy in
        # absolute form (`plain`), in a CONNECT tunnel, or straight at the address
        import base64
        proxy_host, proxy_port = os.environ["HTTP_PROXY"].rsplit("/", 1)[1].rsplit(":", 1)
        where = (host, port) if mode == "direct" else (proxy_host, int(proxy_port))
        try:
            s = socket.create_connection(where, timeout=5)
        except OSError as exc:
            return "refused:" + type(exc).__name__
        try:
            if mode == "connect":
                s.sendall(f"CONNECT {host}:{port} HTTP/1.1\\r\\nHost: {host}:{port}\\r\\n\\r\\n".encode())
                status = read_head(s).split(b"\\r\\n")[0].decode()
                if status.split(" ")[1:2] != ["200"]:
                    return "refused:" + status
            path = f"http://{host}:{port}/echo" if mode == "plain" else "/echo"
            key = base64.b64encode(os.urandom(16)).decode()
            s.sendall(
                f"GET {path} HTTP/1.1\\r\\nHost: {host}:{port}\\r\\nUpgrade: websocket\\r\\n"
                f"Connection: Upgrade\\r\\nSec-WebSocket-Key: {key}\\r\\n"
                "Sec-WebSocket-Version: 13\\r\\n\\r\\n".encode()
            )
            status = read_head(s).split(b"\\r\\n")[0].decode()
            if status.split(" ")[1:2] != ["101"]:
                return "refused:" + status
            out = []
            for word in (text, text + "-again"):
                data, mask = word.encode(), os.urandom(4)
                masked = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
                s.sendall(bytes([0x81, 0x80 | len(data)]) + mask + masked)
                size = read_exactly(s, 2)[1] & 0x7F
                out.append(read_exactly(s, size).decode())
            return "echo:" + "|".join(out)
        except OSError as exc:
            return "refused:" + type(exc).__name__
        finally:
            s.close()

    def read_exactly(s, n):
        data = b""
        while len(data) < n:
            chunk = s.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
        return data

    def watch_up():
        # the watch comes up while the agent starts: wait for it (a private
        # address refused, no longer unreachable) before the attempts under test
        import time
        for _ in range(500):
            s = socket.socket()
            try:
                s.connect(("10.255.255.1", 9))
            except ConnectionRefusedError:
                return "up"
            except OSError:
                time.sleep(0.01)
            finally:
                s.close()
        return "never"

    def pause(seconds):
        import time
        time.sleep(seconds)
        return "slept"

    args = json.loads(sys.argv[1])
    out = {}
    kinds = {"tcp": tcp, "abstract": abstract, "http": http, "udp": udp, "powers": powers}
    kinds.update({"unroute": unroute, "pause": pause, "ws": ws, "watch_up": watch_up})
    for name, (kind, *rest) in args.items():
        if kind == "http" and len(rest) > 2:
            rest[2] = rest[2].encode()
        out[name] = kinds[kind](*rest)
    print(json.dumps(out))
    """
)
STREAM = json.dumps(
    {"model": "fake-model", "max_tokens": 64, "stream": True, "messages": [
        {"role": "user", "content": "hi"}
    ]}
)  # fmt: skip


@pytest.fixture
def base() -> Iterator[Path]:
    made = Path(tempfile.mkdtemp(prefix="corral-net-", dir="/var/tmp")).resolve()
    try:
        yield made
    finally:
        shutil.rmtree(made, ignore_errors=True)


class HostService:
    """A service the host offers on loopback TCP and on an abstract unix
    socket: a confined agent must reach neither."""

    def __init__(self) -> None:
        self.tcp = socket.create_server(("127.0.0.1", 0))
        self.port = self.tcp.getsockname()[1]
        self.abstract_name = f"corral-test-admin-{self.port}"
        self.unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.unix.bind("\0" + self.abstract_name)
        self.unix.listen(8)
        self.hits = 0
        for sock in (self.tcp, self.unix):
            threading.Thread(target=self._serve, args=(sock,), daemon=True).start()

    def _serve(self, sock: socket.socket) -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            self.hits += 1
            with conn:
                conn.sendall(b"HTTP/1.0 200 OK\r\n\r\nHOST-SECRET-3f9a")

    def close(self) -> None:
        self.tcp.close()
        self.unix.close()


async def run_confined(
    base: Path,
    probes: dict[str, list[object]],
    env: dict[str, str],
    linger: list[tuple[str, str]] | None = None,
    **policy: object,
) -> tuple[dict[str, str], list[tuple[str, str]], object]:
    """Run the probe as a confined `claude` agent would run, with corral's
    proxy serving its socket; returns its results, the blocked (what, why)
    pairs and the launch."""
    work = base / "work"
    work.mkdir(exist_ok=True)
    state = base / "state"
    sid = "sess-netproxy-0001"
    sockets = state / "sockets" / sid[-12:]
    sockets.mkdir(parents=True, exist_ok=True)
    script = base / "probe.py"
    script.write_text(PROBE)
    home = base / "home"
    home.mkdir(exist_ok=True)
    full_env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8", **env}
    launch = launch_agent(
        [sys.executable, str(script), json.dumps(probes)],
        work,
        full_env,
        policy=SandboxPolicy(state_dir=state, **policy),  # type: ignore[arg-type]
        choice=None,
        own_dirs=[],
        own_files=[],
        hooks_file=state / "agents" / sid / "hooks.jsonl",
        python=sys.executable,
        agent_socket_dir=sockets,
        env_files=("ANTHROPIC_BASE_URL",),
        agent="claude",
    )
    assert launch.confined, launch.account
    blocked: list[tuple[str, str]] = [] if linger is None else linger
    proxy = AllowListProxy()
    if launch.proxy_socket is not None and launch.network is not None:
        await proxy.serve(
            sid, launch.proxy_socket, launch.network, lambda w, y: blocked.append((w, y))
        )
    try:
        proc = await asyncio.create_subprocess_exec(
            *launch.argv,
            cwd=work,
            env=launch.env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(), 60)
        if linger is not None:  # the relay's last reports, still on their way
            await asyncio.sleep(0.3)
    finally:
        proxy.close_all()
    assert proc.returncode == 0, err.decode()
    return json.loads(out.decode().strip().splitlines()[-1]), blocked, launch


async def test_a_confined_agent_reaches_its_model_and_nothing_else(base: Path) -> None:
    service = HostService()
    try:
        with FakeModelServer(aux_text="MODEL-STREAM-OK") as srv:
            model_port = srv.port
            probes: dict[str, list[object]] = {
                "loopback_tcp": ["tcp", "127.0.0.1", service.port],
                "abstract": ["abstract", service.abstract_name],
                "loopback_via_proxy": ["http", f"http://127.0.0.1:{service.port}/"],
                "metadata_via_proxy": ["http", "http://169.254.169.254/latest/meta-data/"],
                "other_host_https": ["http", "https://example.com/"],
                "model_direct": ["http", f"{srv.url}/v1/messages", False, STREAM],
                "model_via_proxy": ["http", f"{srv.url}/v1/messages", True, STREAM],
            }
            results, blocked, launch = await run_confined(
                base, probes, {"ANTHROPIC_BASE_URL": srv.url}
            )
    finally:
        service.close()
    # the host's loopback and abstract sockets do not exist in the agent's namespace
    assert results["loopback_tcp"].startswith("refused:"), results
    assert results["abstract"].startswith("refused:"), results
    # what it asks corral's proxy for, off the list, is refused and recorded
    assert results["loopback_via_proxy"].startswith("http-403:"), results
    assert results["metadata_via_proxy"].startswith("http-403:"), results
    assert results["other_host_https"].startswith("refused:"), results  # CONNECT got 403
    assert "HOST-SECRET" not in json.dumps(results)
    assert service.hits == 0
    whats = [what for what, _ in blocked]
    assert f"connect 127.0.0.1:{service.port}" in whats
    assert "connect 169.254.169.254:80" in whats
    assert "connect example.com:443" in whats
    proxied = [why for what, why in blocked if what != f"connect 127.0.0.1:{service.port}"]
    assert all("not on this agent's network allow-list" in why for why in proxied), blocked
    # its model endpoint still streams, at its own address and through the proxy
    for name in ("model_direct", "model_via_proxy"):
        assert results[name].startswith("ok:"), results
        assert "event: message_start" in results[name]
        assert "text_delta" in results[name] and "event: message_stop" in results[name]
        assert '"MODEL-STREAM"' in results[name]  # the server's text, in chunks
    assert launch.network is not None  # type: ignore[attr-defined]
    assert f"127.0.0.1:{model_port}" in launch.network.texts()  # type: ignore[attr-defined]


async def test_every_direct_connection_the_sandbox_refuses_is_a_blocked_event(
    base: Path,
) -> None:
    """A direct connect (no proxy) to a port where a host service listens,
    to a private address and to the cloud metadata address, and a datagram
    to a resolver: none reaches anything, and each is a `blocked` event
    naming its destination. The agent cannot take the watch away: it has no
    capability, and removing the catch-all route is refused."""
    service = HostService()
    try:
        probes: dict[str, list[object]] = {
            "watch_up": ["watch_up"],
            "unroute": ["unroute"],
            "loopback_tcp": ["tcp", "127.0.0.1", service.port],
            "private_tcp": ["tcp", "10.1.2.3", 5432],
            "metadata_tcp": ["tcp", "169.254.169.254", 80],
            "v6_tcp": ["tcp", "::1", service.port],
            "resolver_udp": ["udp", "10.0.0.2", 53],
            "powers": ["powers"],
            "linger": ["pause", 2.0],  # the relay reports while the agent lives (slow under load)
        }
        blocked: list[tuple[str, str]] = []
        results, blocked, _ = await run_confined(base, probes, {}, linger=blocked)
    finally:
        service.close()
    assert results["watch_up"] == "up", results
    for name in ("loopback_tcp", "private_tcp", "metadata_tcp", "v6_tcp"):
        assert results[name] == "refused:ConnectionRefusedError", results
    assert service.hits == 0 and "HOST-SECRET" not in json.dumps(results)
    whats = [what for what, _ in blocked]
    for what in (
        f"connect 127.0.0.1:{service.port}",
        "connect 10.1.2.3:5432",
        "connect 169.254.169.254:80",
        f"connect [::1]:{service.port}",
        "send to 10.0.0.2:53",
    ):
        assert what in whats, blocked
    assert all("a direct connection from inside the sandbox" in why for _, why in blocked)
    assert results["unroute"].startswith("refused:"), results
    effective, permitted, ambient, uid = json.loads(results["powers"])
    assert int(effective, 16) == int(permitted, 16) == int(ambient, 16) == 0, results
    assert uid == os.getuid()  # the operator's own id, not the relay's uid 0


class EchoSocket:
    """A real websocket echo server (aiohttp's) on the host's loopback."""

    async def __aenter__(self) -> EchoSocket:
        from aiohttp import WSMsgType, web

        self.upgrades = 0

        async def echo(request: web.Request) -> web.WebSocketResponse:
            self.upgrades += 1
            sock = web.WebSocketResponse()
            await sock.prepare(request)
            async for message in sock:
                if message.type == WSMsgType.TEXT:
                    await sock.send_str("echo " + message.data)
            return sock

        app = web.Application()
        app.router.add_get("/echo", echo)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.port = self.runner.addresses[0][1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.runner.cleanup()


async def test_websockets_reach_an_allowed_host_and_no_other(base: Path) -> None:
    """`ws://` through corral's proxy works for an allowed host in both forms a
    client uses (a plain upgrade request in absolute form, and a CONNECT
    tunnel: what `wss://` uses), and at the allowed loopback address itself;
    the same upgrade to a host off the list is refused and recorded."""
    async with EchoSocket() as allowed, EchoSocket() as other:
        probes: dict[str, list[object]] = {
            "plain": ["ws", "plain", "127.0.0.1", allowed.port, "hi"],
            "tunnel": ["ws", "connect", "127.0.0.1", allowed.port, "yo"],
            "direct": ["ws", "direct", "127.0.0.1", allowed.port, "hey"],
            "plain_other": ["ws", "plain", "127.0.0.1", other.port, "no"],
            "tunnel_other": ["ws", "connect", "127.0.0.1", other.port, "no"],
        }
        results, blocked, _ = await run_confined(
            base, probes, {}, network_allow=(f"127.0.0.1:{allowed.port}",)
        )
        assert other.upgrades == 0 and allowed.upgrades == 3
    assert results["plain"] == "echo:echo hi|echo hi-again", results
    assert results["tunnel"] == "echo:echo yo|echo yo-again", results
    assert results["direct"] == "echo:echo hey|echo hey-again", results
    assert results["plain_other"].startswith("refused:HTTP/1.1 403"), results
    assert results["tunnel_other"].startswith("refused:HTTP/1.1 403"), results
    assert [what for what, _ in blocked] == [f"connect 127.0.0.1:{other.port}"]


async def test_network_allow_widens_the_list(base: Path) -> None:
    service = HostService()
    try:
        probes: dict[str, list[object]] = {
            "allowed_direct": ["http", f"http://127.0.0.1:{service.port}/", False],
        }
        results, blocked, _ = await run_confined(
            base, probes, {}, network_allow=(f"127.0.0.1:{service.port}",)
        )
    finally:
        service.close()
    assert "HOST-SECRET-3f9a" in results["allowed_direct"], results
    assert blocked == []


async def test_network_host_is_the_unsafe_opt_out(base: Path) -> None:
    service = HostService()
    try:
        probes: dict[str, list[object]] = {"loopback_tcp": ["tcp", "127.0.0.1", service.port]}
        results, _, launch = await run_confined(base, probes, {}, network="host")
    finally:
        service.close()
    assert "HOST-SECRET-3f9a" in results["loopback_tcp"]
    assert "network: the host's" in launch.account  # type: ignore[attr-defined]


READOPTED_AGENT = """
while [ ! -f go ]; do sleep 0.1; done
python3 - > net.txt 2>&1 <<'PY'
import urllib.request
for url in ["{allowed}", "{blocked}"]:
    try:
        print("got", urllib.request.urlopen(url, timeout=10).read().decode())
    except Exception as exc:
        print("refused", exc)
PY
"""


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
async def test_a_confined_agent_readopted_by_a_new_owner_keeps_its_list(
    world: World,  # noqa: F811 - the fixture imported above
    server: str,  # noqa: F811
) -> None:
    """The owner closes while a confined agent works (tmux keeps it): its
    proxy goes with the owner; the next owner re-adopts it and serves the
    same list, so what it was allowed still answers and a refusal still
    lands on its session's log."""
    service = HostService()
    port = server.rsplit(":", 1)[1].strip("/")
    allow = {"network_allow": [f"127.0.0.1:{port}"]}
    first = await open_sup(world, None, FEATURE, **allow)
    second = None
    try:
        body = READOPTED_AGENT.format(allowed=server, blocked=f"http://127.0.0.1:{service.port}/")
        started = await first.start("do the task", world.repo, engine=agent_script(world, body))
        sid, worktree = started.session_id, Path(started.worktree or "")
        await first.confirm(sid)
        await eventually(lambda: "Working" in screen_text(first, sid), timeout=30)
        await first.close()
        assert first.left_running == [sid]
        second = await open_sup(world, None, FEATURE, **allow)
        await eventually(
            lambda: any("re-adopted" in t for t in plan_texts(second, sid)), timeout=30
        )
        (worktree / "go").write_text("")
        row = await second.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=60)
        report = (worktree / "net.txt").read_text()
        assert row.state is S.NEEDS_APPROVAL, (row.error, report)
        assert "got NET-TOKEN-81c2" in report, report  # allowed: through the new owner's proxy
        assert "HOST-SECRET" not in report and "403" in report, report
        blocked = [e.data for e in second.replay(sid) if isinstance(e.data, BlockedData)]
        assert [b.what for b in blocked] == [f"connect 127.0.0.1:{service.port}"]
    finally:
        service.close()
        if second is not None:
            await second.close()


async def test_an_agents_own_network_allow_widens_only_its_list(base: Path) -> None:
    """`[agents.claude] network_allow` reaches the launch of that agent alone."""
    from corral.supervisor.agents.profiles import profile_for
    from corral.supervisor.agents.settings import AgentSettings, with_settings

    settings = {"claude": AgentSettings(network_allow=("127.0.0.1:4555",))}
    claude = with_settings(profile_for("claude"), settings)
    codex = with_settings(profile_for("codex"), settings)
    assert claude.network_allow == ("127.0.0.1:4555",) and codex.network_allow == ()
    with pytest.raises(ValueError, match="is not a host"):
        AgentSettings(network_allow=("no such host",))
    state = base / "state"
    sockets = state / "as" / "x"
    sockets.mkdir(parents=True)
    launch = launch_agent(
        ["/bin/true"],
        base,
        {"PATH": "/usr/bin:/bin", "HOME": str(base / "home")},
        policy=SandboxPolicy(state_dir=state, network_allow=("pypi.org",)),
        choice=None,
        own_dirs=[],
        own_files=[],
        hooks_file=state / "agents" / "x" / "hooks.jsonl",
        python=sys.executable,
        agent_socket_dir=sockets,
        agent="claude",
        network_allow=claude.network_allow,
    )
    assert launch.network is not None
    assert launch.network.texts()[-2:] == ["pypi.org", "127.0.0.1:4555"]
    assert "forward=127.0.0.1:4555" in launch.argv or "127.0.0.1:4555" in launch.argv


async def test_without_perl_the_relay_binds_and_the_same_holds(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No perl in /usr/bin or /bin: the relay binds its listeners itself
    before the agent runs (a few ms slower); the model endpoint still
    answers at its address, a host port stays out of reach, and a direct
    attempt is still a `blocked` event."""
    from corral.supervisor.sandbox import netstart

    monkeypatch.setattr(netstart, "binder_perl", lambda: None)
    service = HostService()
    try:
        with FakeModelServer(aux_text="MODEL-STREAM-OK") as srv:
            probes: dict[str, list[object]] = {
                "watch_up": ["watch_up"],
                "model_direct": ["http", f"{srv.url}/v1/messages", False, STREAM],
                "loopback_tcp": ["tcp", "127.0.0.1", service.port],
                "linger": ["pause", 1.0],
            }
            blocked: list[tuple[str, str]] = []
            results, blocked, launch = await run_confined(
                base, probes, {"ANTHROPIC_BASE_URL": srv.url}, linger=blocked
            )
    finally:
        service.close()
    assert "netbind.pl" not in " ".join(launch.argv)  # type: ignore[attr-defined]
    assert results["model_direct"].startswith("ok:") and "message_stop" in results["model_direct"]
    assert results["loopback_tcp"] == "refused:ConnectionRefusedError" and service.hits == 0
    assert results["watch_up"] == "up", results
    assert f"connect 127.0.0.1:{service.port}" in [w for w, _ in blocked], blocked
