"""corral's allow-list proxy: the one way a confined agent reaches the network.

It runs in the owner's event loop, outside every sandbox: one proxy per
owner, one unix socket per session (in the session's agent socket directory,
which its sandbox binds read-only), each with that session's allow-list. It
speaks the two forms an HTTP client sends a proxy:

- `CONNECT host:port` (HTTPS, and the relay's loopback forwards): allowed,
  it connects and answers `200`, then copies bytes both ways (bytes sent
  after the request head, before the answer, are passed on: the relay sends
  them at once to save a round trip);
- `GET http://host:port/path` (plain HTTP in absolute form): allowed, the
  request goes on in origin form with `Connection: close`, so a client can
  never reuse the connection for a request to another host; a websocket
  (`ws://`: `Upgrade: websocket`) goes on as an upgrade, and after its `101`
  the connection is that host's websocket (a `wss://` one is a CONNECT).

The relay inside also reports what never reached the proxy: a direct
connection the sandbox's own kernel refused (`REFUSED-TCP host:port`, or
`REFUSED-UDP` for a datagram; see `netrelay`'s watch) becomes a `blocked`
event the same way. Only an address and a port are taken from it (what
the agent could say there is no more than what its own attempts show).

A target not on the list gets `403` and the session's log a typed `blocked`
event (`BlockedData`, by `policy`), once per target per `REPEAT_SECS` and
for at most `BLOCKED_PER_WINDOW` targets in that time, so a loop cannot
flood the log; a session holds at most `MAX_CONNECTIONS` sockets, so an
agent cannot exhaust the owner. Names resolve here, outside: the sandbox has
no DNS. What is compared is the host as the client wrote it (lower-cased,
no trailing dot), never an address it resolves to; what is connected to is
that same host. What is allowed goes on through the operator's own proxy
when corral runs with one (`Upstreams`), loopback excepted.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ipaddress
import json
import logging
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

from ..errors import StateDirError
from ..events import BLOCKED_BY_POLICY, BlockedData, EventData
from .network import NetworkAllow, is_loopback, normal_host

log = logging.getLogger(__name__)

HEAD_LIMIT = 64 * 1024  # a request head longer than this is refused
HEAD_TIMEOUT = 30.0  # seconds a client has to send its request head
CONNECT_TIMEOUT = 15.0
CHUNK = 256 * 1024
REPEAT_SECS = 600.0  # one blocked event per target per this long (an agent retrying its telemetry)
BLOCKED_PER_WINDOW = 20  # targets recorded per REPEAT_SECS before one "more" line
MAX_CONNECTIONS = 512  # open sockets (both ends) per session: more is refused at once
MAX_SOCKET_PATH = 104  # sun_path is 108 bytes on Linux, 104 on the BSDs
REFUSED = {b"REFUSED-TCP": "connect", b"REFUSED-UDP": "send to"}  # the relay's reports
HOP_HEADERS = (b"proxy-connection", b"proxy-authorization", b"connection", b"keep-alive")

Blocked = Callable[[str, str], None]  # (what, why) -> a `blocked` event on the session's log


class ProxyRefusal(Exception):
    def __init__(self, status: str, why: str, target: str | None = None) -> None:
        super().__init__(why)
        self.status = status
        self.why = why
        self.target = target


@dataclass
class _Session:
    allow: NetworkAllow
    on_blocked: Blocked
    server: asyncio.AbstractServer
    path: Path
    said: dict[str, float] = field(default_factory=dict)
    live: set[asyncio.StreamWriter] = field(default_factory=set)  # both ends of each connection

    def blocked(self, target: str, why: str, verb: str = "connect") -> None:
        """Record a refusal: once per target per REPEAT_SECS, and at most
        BLOCKED_PER_WINDOW targets per REPEAT_SECS (then one line saying
        more were refused), so no loop of attempts floods the log."""
        now = time.monotonic()
        if now - self.said.get(target, -REPEAT_SECS) < REPEAT_SECS:
            return
        self.said = {t: at for t, at in self.said.items() if now - at < REPEAT_SECS}
        self.said[target] = now
        if len(self.said) > BLOCKED_PER_WINDOW + 1:
            return
        what = f"{verb} {target}"
        if len(self.said) == BLOCKED_PER_WINDOW + 1:
            what, why = (
                "connect (more targets)",
                (
                    f"more than {BLOCKED_PER_WINDOW} targets off the allow-list were refused "
                    f"within {REPEAT_SECS:g} s; the rest are not listed"
                ),
            )
        try:
            self.on_blocked(what, why)
        except Exception:  # a log that cannot take it must not stop the proxy
            log.exception("netproxy: could not record a blocked connection")


def split_target(text: str, default_port: int) -> tuple[str, int]:
    """`host:port`, `[v6]:port` or `host` -> (host, port); ValueError if bad."""
    if text.startswith("["):
        end = text.index("]")
        host, rest = text[1:end], text[end + 1 :]
        port = int(rest[1:]) if rest.startswith(":") else default_port
    elif text.count(":") == 1:
        host, _, digits = text.partition(":")
        port = int(digits)
    elif ":" in text:
        raise ValueError("an IPv6 address goes in brackets")
    else:
        host, port = text, default_port
    if not host or not 0 < port < 65536:
        raise ValueError("no host or a bad port")
    return normal_host(host), port


def show(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _upgrade(lines: list[bytes]) -> bytes | None:
    """The `Upgrade:` line of a request asking to switch protocols (a
    `ws://` websocket: `Connection: Upgrade` and `Upgrade: websocket`), or None."""
    wanted = None
    asked = False
    for line in lines:
        name, _, value = line.partition(b":")
        key = name.strip().lower()
        if key == b"upgrade" and value.strip():
            wanted = line
        elif key == b"connection":
            asked = asked or b"upgrade" in [t.strip().lower() for t in value.split(b",")]
    return wanted if asked else None


def _origin_form(head: bytes) -> tuple[str, int, bytes]:
    """A plain-HTTP absolute-form request head -> (host, port, the head to send
    upstream: origin form, hop-by-hop headers dropped, `Connection: close`;
    a proxy of the operator's gets it back in absolute form: `absolute`).
    A request to switch protocols (a `ws://` websocket through the proxy)
    keeps its `Upgrade` and gets `Connection: Upgrade` instead: after the
    server's `101` the bytes go on both ways, to that same host only."""
    lines = head.split(b"\r\n")
    method, target, version = lines[0].split(b" ", 2)
    url = target.decode("ascii", "strict")
    if not url.lower().startswith("http://"):
        raise ProxyRefusal("400 Bad Request", "only http:// URLs and CONNECT are proxied")
    rest = url[len("http://") :]
    authority, slash, path = rest.partition("/")
    authority = authority.rpartition("@")[2]  # credentials in a URL are not a host
    host, port = split_target(authority, 80)
    upgrade = _upgrade(lines[1:])
    dropped = HOP_HEADERS if upgrade is None else (*HOP_HEADERS, b"upgrade")
    kept = [
        line for line in lines[1:] if line and line.split(b":", 1)[0].strip().lower() not in dropped
    ]
    ending = [b"Connection: close"] if upgrade is None else [b"Connection: Upgrade", upgrade]
    first = b" ".join([method, ("/" + path if slash else "/").encode("ascii"), version])
    return host, port, b"\r\n".join([first, *kept, *ending, b"", b""])


def absolute(head: bytes, where: str, authorization: bytes = b"") -> bytes:
    """An origin-form head (from `_origin_form`) in absolute form for
    `where`, for the operator's proxy (with its `Proxy-Authorization` line)."""
    first, _, rest = head.partition(b"\r\n")
    method, path, version = first.split(b" ", 2)
    line = b" ".join([method, b"http://" + where.encode("ascii") + path, version])
    return line + b"\r\n" + authorization + rest


@dataclass(frozen=True)
class Upstream:
    """The operator's own proxy (corral's environment: `HTTPS_PROXY`,
    `HTTP_PROXY`, `ALL_PROXY`, `NO_PROXY`): where the allow-list proxy sends
    what it allows, so agents behind a company proxy keep working. Only
    `http://` proxies; credentials in its URL go as `Proxy-Authorization`
    from here (the agent never sees them)."""

    host: str
    port: int
    authorization: bytes = b""  # a `Proxy-Authorization: …\r\n` line, or nothing

    @classmethod
    def parse(cls, url: str) -> Upstream | None:
        parts = urlsplit(url if "://" in url else "http://" + url)
        if parts.scheme != "http" or not parts.hostname:
            return None
        try:
            port = parts.port or 80
        except ValueError:
            return None
        auth = b""
        if parts.username is not None:
            pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
            auth = b"Proxy-Authorization: Basic " + base64.b64encode(pair) + b"\r\n"
        return cls(parts.hostname, port, auth)


@dataclass(frozen=True)
class Upstreams:
    https: Upstream | None = None  # for CONNECT
    http: Upstream | None = None  # for plain http://
    proxies: dict[str, str] = field(default_factory=dict)  # as urllib read them (NO_PROXY)

    @classmethod
    def from_environment(cls) -> Upstreams:
        import urllib.request  # with the first agent's network, not in the idle console

        proxies = urllib.request.getproxies_environment()
        https = proxies.get("https") or proxies.get("all")
        http = proxies.get("http") or proxies.get("all")
        return cls(
            Upstream.parse(https) if https else None,
            Upstream.parse(http) if http else None,
            proxies,
        )

    def via(self, host: str, tunnel: bool) -> Upstream | None:
        """The operator's proxy for `host`, or None: straight there (a
        loopback host, one `NO_PROXY` names, or no proxy configured)."""
        chosen = self.https if tunnel else self.http
        if chosen is None or is_loopback(host):
            return None
        if _bypassed(host, self.proxies.get("no", "")):
            return None
        return chosen


def _bypassed(host: str, no_proxy: str) -> bool:
    """Whether `NO_PROXY` (`*`, or names and suffixes such as `.corp`,
    `corp.example:8080`) sends `host` straight, as curl and urllib read it."""
    for raw in no_proxy.split(","):
        entry = raw.strip().lower()
        if entry == "*":
            return True
        entry = normal_host(entry.rsplit(":", 1)[0] if entry.count(":") == 1 else entry)
        entry = entry.lstrip(".").lstrip("*").lstrip(".")
        if entry and (host == entry or host.endswith("." + entry)):
            return True
    return False


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            data = await reader.read(CHUNK)
            if not data:
                break
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        writer.close()


async def splice(
    a_reader: asyncio.StreamReader,
    a_writer: asyncio.StreamWriter,
    b_reader: asyncio.StreamReader,
    b_writer: asyncio.StreamWriter,
) -> None:
    """Copy both ways until both sides have ended, then close both."""
    try:
        await asyncio.gather(_pipe(a_reader, b_writer), _pipe(b_reader, a_writer))
    finally:
        for writer in (a_writer, b_writer):
            writer.close()


class AllowListProxy:
    """The owner's proxy: `serve` a session's socket, `close` it when its agent ends."""

    def __init__(self, upstreams: Upstreams | None = None) -> None:
        self._sessions: dict[str, _Session] = {}
        self.upstreams = Upstreams.from_environment() if upstreams is None else upstreams

    def serving(self) -> list[str]:
        return list(self._sessions)

    def allow_of(self, session_id: str) -> NetworkAllow | None:
        found = self._sessions.get(session_id)
        return None if found is None else found.allow

    async def serve(
        self, session_id: str, path: Path, allow: NetworkAllow, on_blocked: Blocked
    ) -> None:
        """Listen on `path` for `session_id`'s sandbox (bound before this
        returns; a socket already served for it is replaced)."""
        self.close(session_id)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        # a deep state dir makes the path longer than a unix socket address
        # allows: it is then named through an open descriptor of its directory
        where = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            named = str(path)
            if len(os.fsencode(path)) > MAX_SOCKET_PATH:
                named = f"/proc/self/fd/{where}/{path.name}"
            sock.bind(named)
            sock.listen(128)
        except OSError as exc:
            sock.close()
            raise StateDirError(
                f"the network proxy could not listen on {path} ({exc.strerror}): set "
                "CORRAL_HOME to a directory on a local disk"
            ) from exc
        finally:
            os.close(where)
            os.umask(old)
        holder: list[_Session] = []
        server = await asyncio.start_unix_server(
            lambda r, w: self._handle(holder[0], r, w), sock=sock, limit=HEAD_LIMIT
        )
        session = _Session(allow, on_blocked, server, path)
        holder.append(session)
        self._sessions[session_id] = session

    def close(self, session_id: str) -> None:
        """Stop serving `session_id` (its agent ended); connections in flight end with it."""
        session = self._sessions.pop(session_id, None)
        if session is None:
            return
        session.server.close()
        for writer in list(session.live):  # its connections in flight end with it
            writer.transport.abort()
        session.live.clear()
        with contextlib.suppress(FileNotFoundError):
            session.path.unlink()

    def close_all(self) -> None:
        for session_id in list(self._sessions):
            self.close(session_id)

    async def _handle(
        self, session: _Session, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        if len(session.live) >= MAX_CONNECTIONS:
            writer.transport.abort()  # an agent opening sockets without end cannot exhaust the owner
            return
        session.live.add(writer)
        try:
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT)
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
                return
            try:
                await self._forward(session, head, reader, writer)
            except ProxyRefusal as refusal:
                if refusal.target is not None:
                    session.blocked(refusal.target, refusal.why)
                body = f"corral: {refusal.why}\n".encode()
                writer.write(
                    f"HTTP/1.1 {refusal.status}\r\nContent-Type: text/plain\r\n"
                    f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                    + body
                )
                with contextlib.suppress(ConnectionError, OSError):
                    await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            session.live.discard(writer)
            writer.close()

    async def _forward(
        self,
        session: _Session,
        head: bytes,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        try:
            method = head.split(b" ", 1)[0]
            if method in REFUSED:
                self._refused(session, REFUSED[method], head)
                return
            if method == b"CONNECT":
                target = head.split(b" ", 2)[1].decode("ascii", "strict")
                host, port = split_target(target, 443)
                send = b""
            else:
                host, port, send = _origin_form(head)
        except ProxyRefusal:
            raise
        except (ValueError, IndexError, UnicodeDecodeError) as exc:
            raise ProxyRefusal("400 Bad Request", f"a request corral cannot read ({exc})") from exc
        where = show(host, port)
        if not session.allow.permits(host, port):
            raise ProxyRefusal(
                "403 Forbidden",
                f"{where} is not on this agent's network allow-list "
                "([sandbox] network_allow widens it)",
                where,
            )
        via = self.upstreams.via(host, tunnel=method == b"CONNECT")
        try:
            up_reader, up_writer = await asyncio.wait_for(
                asyncio.open_connection(
                    host if via is None else via.host,
                    port if via is None else via.port,
                    limit=CHUNK,
                ),
                CONNECT_TIMEOUT,
            )
        except (OSError, TimeoutError) as exc:
            through = "" if via is None else f" through your proxy {via.host}:{via.port}"
            raise ProxyRefusal(
                "502 Bad Gateway", f"{where} could not be reached{through} ({exc})"
            ) from exc
        if via is not None and method == b"CONNECT":
            await self._tunnel(via, where, up_reader, up_writer)
        elif via is not None:
            send = absolute(send, where, via.authorization)
        sock = up_writer.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        session.live.add(up_writer)
        try:
            if method == b"CONNECT":
                writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            else:
                up_writer.write(send)
            await splice(reader, writer, up_reader, up_writer)
        finally:
            session.live.discard(up_writer)

    @staticmethod
    def _refused(session: _Session, verb: str, head: bytes) -> None:
        """The relay saw a direct attempt refused inside the sandbox: an IP
        address and a port, nothing else, become a `blocked` event."""
        target = head.split(b" ", 2)[1].decode("ascii", "strict")
        host, port = split_target(target, 0)
        ipaddress.ip_address(host)  # ValueError: not an address, not recorded
        session.blocked(
            show(host, port),
            "a direct connection from inside the sandbox: the only way out is "
            "corral's proxy, for what the allow-list holds",
            verb,
        )

    @staticmethod
    async def _tunnel(
        via: Upstream,
        where: str,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        """`CONNECT where` through the operator's proxy; its refusal is a 502."""
        writer.write(
            f"CONNECT {where} HTTP/1.1\r\nHost: {where}\r\n".encode("ascii")
            + via.authorization
            + b"\r\n"
        )
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), CONNECT_TIMEOUT)
            status = head.split(b"\r\n", 1)[0].decode("latin-1")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError, TimeoutError):
            status = "no answer"
        if status.split(" ")[1:2] != ["200"]:
            writer.close()
            raise ProxyRefusal(
                "502 Bad Gateway",
                f"your proxy {via.host}:{via.port} refused {where} ({status[:80]})",
            )


ALLOW_FILE = "net-allow.json"  # beside the socket: what a later owner serves it with


async def serve_agent(
    session_id: str, allow: NetworkAllow, path: Path, emit: Callable[[EventData], None]
) -> None:
    """Serve a confined agent's proxy socket with its allow-list, each
    refusal a `blocked` event through `emit`; the list is kept beside the
    socket (read-only to the agent, like the rest of that directory) so a
    later owner serves the same list to an agent that outlived this one."""
    record = path.with_name(ALLOW_FILE)
    temp = record.with_name(ALLOW_FILE + ".tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump({"allow": allow.texts()}, out)
    os.replace(temp, record)
    await network_proxy().serve(session_id, path, allow, _blocked_to(emit))


async def serve_agent_again(session_id: str, path: Path, emit: Callable[[EventData], None]) -> bool:
    """Serve an agent's socket again with the list it started with (an
    agent re-adopted by a new owner); False when it had none."""
    try:
        data = json.loads(path.with_name(ALLOW_FILE).read_text(encoding="utf-8"))
        allow = NetworkAllow.of(str(t) for t in data["allow"])
    except (OSError, ValueError, KeyError, TypeError):
        return False
    await network_proxy().serve(session_id, path, allow, _blocked_to(emit))
    return True


def forget_agent(session_id: str) -> None:
    """The agent's pane is gone: its proxy socket and kept list go too."""
    proxy = network_proxy()
    session = proxy._sessions.get(session_id)
    if session is not None:
        proxy.close(session_id)
        with contextlib.suppress(OSError):
            session.path.with_name(ALLOW_FILE).unlink()
        with contextlib.suppress(OSError):
            session.path.parent.rmdir()  # the agent socket's dir, once nothing is left in it


def _blocked_to(emit: Callable[[EventData], None]) -> Blocked:
    def blocked(what: str, why: str) -> None:
        emit(BlockedData(what=what, why=why, by=BLOCKED_BY_POLICY))

    return blocked


_proxy: AllowListProxy | None = None


def network_proxy() -> AllowListProxy:
    """This owner's proxy (one per process)."""
    global _proxy
    if _proxy is None:
        _proxy = AllowListProxy()
    return _proxy
