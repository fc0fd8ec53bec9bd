"""The relay inside a confined agent's network namespace (standard library
only: run as `python -I -S netrelay.py --socket S --proxy-port P
[--forward host:port]… [--watch [--through WORD]…] -- agent args…`).

Started by `netbind.pl` (perl: when the system has it) with its
listeners already bound (`--listening FD=ROLE`, no agent to run: perl
execs the agent at once, so the agent never waits for this interpreter), or
itself the sandbox's first command. The sandbox has loopback and nothing
else. Before the agent starts, these listen on loopback inside:

- `127.0.0.1:P`, the agent's HTTP(S) proxy (`HTTPS_PROXY` and friends): each
  connection is copied as it is to corral's allow-list proxy over the unix
  socket `S` (the only thing of the outside the sandbox can reach);
- each allowed loopback endpoint (`--forward 127.0.0.1:8080`: a local model
  server, a test's fake one) at the same address and port, because many
  CLIs never use a proxy for a loopback base URL: a connection there becomes
  `CONNECT host:port` to the proxy, sent at once with the client's first
  bytes (no round trip waits for the proxy's answer), whose `200` line the
  relay takes off before the client sees the stream.

Run as the first command, it binds them, then forks twice — the relay serves from a grandchild in a session of
its own (no terminal: Ctrl-C in the agent's pane is the agent's), its stdio
on /dev/null (an ACP agent's pipes end when the agent ends) — and execs the
agent in its own process, so the agent's exit ends the sandbox, and the
kernel ends the relay with its pid namespace. Nothing else waits before the
agent's exec: the relay runs from its bytecode (`netstart.relay_program`),
and everything slower happens in the grandchild while the agent starts.

`--watch` (bwrap gave the relay CAP_NET_ADMIN and CAP_NET_RAW over the
sandbox's network namespace): the grandchild makes every attempt to leave
visible — every address is routed to loopback as a local one (`local
0.0.0.0/0`, `local ::/0`), so a direct connection to 10.x, a metadata
address or a host port is refused at once with a reset instead of "network
unreachable", and a packet socket on `lo` (a kernel filter passes only
resets answering a SYN and port-unreachable errors) sees each refusal,
reported to corral's proxy (`REFUSED-TCP` / `REFUSED-UDP host:port`) as a
`blocked` event — then gives every capability up. The agent is exec'd
through `--through` words (`netstart.agent_through`: util-linux `unshare
--map-user` into a nested user namespace with the operator's ids, or
`setpriv` emptying root's bounding set), so it holds no capability and
cannot undo the routes or the watch (bwrap set no_new_privs: no exec
regains one). An attempt in the agent's first instants, before the routes
are up, fails unrecorded, as one in its last does (its report dies with
the sandbox).
"""

from __future__ import annotations

import _socket  # not `socket`: its enums cost more than the rest of the start
import os
import struct
import sys

# asyncio and socket are imported by the relay once forked: the agent's start
# never waits for them (they cost several times the interpreter's own start)
TYPE_CHECKING = False
if TYPE_CHECKING:
    import asyncio
    import socket
    from collections.abc import Awaitable, Callable

CHUNK = 256 * 1024
HEAD_LIMIT = 64 * 1024


class Options:
    def __init__(self) -> None:
        self.socket: str | None = None
        self.port: int | None = None
        self.forwards: list[tuple[str, int]] = []
        self.watch = False
        self.through: list[str] = []  # what the agent is exec'd through (`netstart.agent_through`)
        self.listening: list[tuple[int, str]] = []  # (fd, role) bound by netbind.pl
        self.argv: list[str] = []


def parse(args: list[str]) -> Options:
    out = Options()
    forwards = out.forwards
    i = 0
    while i < len(args):
        word = args[i]
        if word == "--":
            out.argv = args[i + 1 :]
            return out
        if word == "--watch":
            out.watch = True
            i += 1
            continue
        if word in ("--socket", "--proxy-port", "--forward", "--through", "--listening") and (
            i + 1 < len(args)
        ):
            value = args[i + 1]
            if word == "--listening":
                fd, _, role = value.partition("=")
                out.listening.append((int(fd), role))
            elif word == "--socket":
                out.socket = value
            elif word == "--through":
                out.through.append(value)
            elif word == "--proxy-port":
                out.port = int(value)
            else:
                host, _, digits = value.rpartition(":")
                forwards.append((host.strip("[]"), int(digits)))
            i += 2
            continue
        break
    if i == len(args) and out.listening:  # the relay netbind.pl started: no agent to run
        return out
    raise SystemExit(USAGE)


USAGE = "netrelay: usage: --socket S --proxy-port P [--forward h:p]… [--watch …] -- argv…"


def listener(host: str, port: int) -> _socket.socket:
    family = _socket.AF_INET6 if ":" in host else _socket.AF_INET
    sock = _socket.socket(family, _socket.SOCK_STREAM)
    try:
        sock.setsockopt(_socket.SOL_SOCKET, _socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return sock


def bind_all(
    port: int, forwards: list[tuple[str, int]]
) -> tuple[_socket.socket, list[tuple[_socket.socket, str]]]:
    """(proxy listener, [(listener, 'host:port' to CONNECT)]); a loopback
    address this namespace lacks (no IPv6) is skipped."""
    proxy = listener("127.0.0.1", port)
    out = []
    for host, fport in forwards:
        addrs = ["127.0.0.1", "::1"] if host == "localhost" else [host]
        target = f"[{host}]:{fport}" if ":" in host else f"{host}:{fport}"
        for addr in addrs:
            try:
                out.append((listener(addr, fport), target))
            except OSError:
                continue
    return proxy, out


# --- the watch: every address local, every refusal seen ---------------------

AF_INET, AF_INET6 = 2, 10
ETH_P_IP, ETH_P_IPV6 = 0x0800, 0x86DD
SO_ATTACH_FILTER = 26
# classic BPF (SOCK_DGRAM: offsets from the IP header): a TCP segment with
# RST set, or an ICMP destination-unreachable; everything else (the proxied
# streams) is never copied to the relay
IPV4_FILTER = (
    (0x30, 0, 0, 9),  # ldb [9]          protocol
    (0x15, 0, 3, 6),  # jeq #6 (tcp)     else -> icmp?
    (0xB1, 0, 0, 0),  # ldxb 4*([0]&0xf) header length
    (0x50, 0, 0, 13),  # ldb [x+13]      tcp flags
    (0x45, 4, 5, 4),  # jset #RST        -> keep / drop
    (0x15, 0, 4, 1),  # jeq #1 (icmp)    else drop
    (0xB1, 0, 0, 0),  # ldxb 4*([0]&0xf)
    (0x50, 0, 0, 0),  # ldb [x+0]        icmp type
    (0x15, 0, 1, 3),  # jeq #3 (unreachable)
    (0x06, 0, 0, 256),  # keep
    (0x06, 0, 0, 0),  # drop
)
IPV6_FILTER = (
    (0x30, 0, 0, 6),  # ldb [6]          next header
    (0x15, 0, 2, 6),  # jeq #6 (tcp)     else -> icmpv6?
    (0x30, 0, 0, 53),  # ldb [40+13]     tcp flags
    (0x45, 3, 4, 4),  # jset #RST        -> keep / drop
    (0x15, 0, 3, 58),  # jeq #58 (icmpv6) else drop
    (0x30, 0, 0, 40),  # ldb [40]        icmpv6 type
    (0x15, 0, 1, 1),  # jeq #1 (unreachable)
    (0x06, 0, 0, 256),  # keep
    (0x06, 0, 0, 0),  # drop
)


def route_everything_local(family: int) -> None:
    """`ip route add local 0.0.0.0/0 dev lo table local` (or `::/0`), by
    netlink: a connection to any address is then refused by this namespace's
    own kernel with a reset the watch sees, instead of failing unseen with
    "network unreachable"."""
    sock = _socket.socket(_socket.AF_NETLINK, _socket.SOCK_RAW, 0)  # NETLINK_ROUTE
    try:
        # rtmsg: family, dst_len 0, src_len, tos, table local (255), proto boot (3),
        # scope host (254), type local (2), flags; then RTA_OIF = 1 (lo)
        body = struct.pack("=BBBBBBBBI", family, 0, 0, 0, 255, 3, 254, 2, 0)
        body += struct.pack("=HHi", 8, 4, 1)
        flags = 0x1 | 0x4 | 0x400  # NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE
        sock.sendto(struct.pack("=IHHII", 16 + len(body), 24, flags, 1, 0) + body, (0, 0))
        answer = sock.recv(4096)
        error = struct.unpack_from("=i", answer, 16)[0] if len(answer) >= 20 else 0
        if error:
            raise OSError(-error, os.strerror(-error))
    finally:
        sock.close()


def refusal_socket(protocol: int, program: tuple[tuple[int, int, int, int], ...]) -> _socket.socket:
    """A packet socket on `lo` that receives only what `program` keeps."""
    import ctypes  # with the watch only (not `array`: it imports collections)

    sock = _socket.socket(_socket.AF_PACKET, _socket.SOCK_DGRAM, _socket.htons(protocol))
    try:
        code = ctypes.create_string_buffer(b"".join(struct.pack("=HBBI", *op) for op in program))
        address = ctypes.addressof(code)  # the kernel copies the program at once
        sock.setsockopt(
            _socket.SOL_SOCKET, SO_ATTACH_FILTER, struct.pack("@HP", len(program), address)
        )
        sock.bind(("lo", protocol))
    except OSError:
        sock.close()
        raise
    return sock


def _address(family: int, raw: bytes) -> str:
    text = _socket.inet_ntop(family, raw)
    return f"[{text}]" if family == AF_INET6 else text


def refusal(packet: bytes, family: int) -> tuple[str, str] | None:
    """(`tcp` or `udp`, `host:port` the agent tried) from a reset a refused
    connect drew (RST+ACK with sequence 0: the answer to a SYN, never a
    connection's abort) or a port-unreachable error for a datagram."""
    try:
        if family == AF_INET:
            start = (packet[0] & 0x0F) * 4
            proto, source, inner = packet[9], packet[12:16], start + 8
        else:
            start, proto, source, inner = 40, packet[6], packet[8:24], 48
        if proto == 6:
            flags = packet[start + 13]
            if flags & 0x14 != 0x14 or packet[start + 4 : start + 8] != b"\0\0\0\0":
                return None
            port = struct.unpack_from("!H", packet, start)[0]
            return "tcp", f"{_address(family, source)}:{port}"
        if family == AF_INET and packet[start] == 3 and packet[start + 1] == 3:
            if packet[inner + 9] != 17:
                return None
            target = packet[inner + 16 : inner + 20]
            port = struct.unpack_from("!H", packet, inner + (packet[inner] & 0x0F) * 4 + 2)[0]
            return "udp", f"{_address(family, target)}:{port}"
        if family == AF_INET6 and packet[start] == 1 and packet[start + 1] == 4:
            if packet[inner + 6] != 17:
                return None
            port = struct.unpack_from("!H", packet, inner + 42)[0]
            return "udp", f"{_address(family, packet[inner + 24 : inner + 40])}:{port}"
    except (IndexError, struct.error, ValueError, OSError):
        return None
    return None


def start_watch() -> tuple[list[tuple[_socket.socket, int]], list[str]]:
    """Open the refusal sockets, then route every address to loopback; returns
    the sockets (with their family) and what could not be done (said on stderr: the
    agent still starts, its direct attempts then unrecorded)."""
    watchers: list[tuple[_socket.socket, int]] = []
    problems: list[str] = []
    for family, protocol, program in (
        (AF_INET, ETH_P_IP, IPV4_FILTER),
        (AF_INET6, ETH_P_IPV6, IPV6_FILTER),
    ):
        watcher: _socket.socket | None = None
        try:  # the watch first: a refusal the new route makes is never unseen
            watcher = refusal_socket(protocol, program)
            route_everything_local(family)
            watchers.append((watcher, family))
        except OSError as exc:
            if watcher is not None:
                watcher.close()
            if family == AF_INET:  # a namespace without IPv6 has nothing to watch there
                problems.append(f"cannot watch direct connections ({exc.strerror or exc})")
    return watchers, problems


def drop_capabilities() -> None:
    """No capability left (the ambient set cleared, `capset` to nothing):
    the relay cannot change this namespace once its watch is up."""
    import ctypes  # only with --watch: the start without it stays lean

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(47, 4, 0, 0, 0)  # PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable: none
    if libc.capset(header, data) != 0:
        raise OSError(ctypes.get_errno(), "capset")


async def report(path: str, kind: str, target: str) -> None:
    try:
        _, writer = await asyncio.open_unix_connection(path)
    except OSError:
        return
    writer.write(f"REFUSED-{kind.upper()} {target} HTTP/1.1\r\n\r\n".encode("ascii"))
    try:  # noqa: SIM105 - contextlib would add its import to the start
        await writer.drain()
    except OSError:
        pass
    writer.close()


def watching(path: str, sock: _socket.socket, family: int) -> None:
    """Read `sock`'s refusals as they come and report each (the proxy keeps
    one event per target per ten minutes: a loop of attempts floods nothing)."""
    loop = asyncio.get_running_loop()
    tasks: set[asyncio.Task[None]] = set()

    def readable() -> None:
        while True:
            try:
                packet = sock.recv(512)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                loop.remove_reader(sock.fileno())
                return
            found = refusal(packet, family)
            if found is not None:
                task = asyncio.ensure_future(report(path, *found))
                tasks.add(task)
                task.add_done_callback(tasks.discard)

    sock.setblocking(False)
    loop.add_reader(sock.fileno(), readable)


async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            data = await reader.read(CHUNK)
            if not data:
                break
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except OSError:
        writer.close()


async def splice(
    ar: asyncio.StreamReader,
    aw: asyncio.StreamWriter,
    br: asyncio.StreamReader,
    bw: asyncio.StreamWriter,
) -> None:
    try:
        await asyncio.gather(pipe(ar, bw), pipe(br, aw))
    finally:
        aw.close()
        bw.close()


def nodelay(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        try:  # noqa: SIM105 - contextlib would add its import to the start
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass


async def as_proxy(path: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    nodelay(writer)
    try:
        up_reader, up_writer = await asyncio.open_unix_connection(path, limit=CHUNK)
    except OSError:
        writer.close()
        return
    await splice(reader, writer, up_reader, up_writer)


async def as_forward(
    path: str, target: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    nodelay(writer)
    try:
        up_reader, up_writer = await asyncio.open_unix_connection(path, limit=HEAD_LIMIT)
    except OSError:
        writer.close()
        return
    up_writer.write(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode("ascii"))
    sending = asyncio.ensure_future(pipe(reader, up_writer))
    try:
        head = await up_reader.readuntil(b"\r\n\r\n")
        ok = head.split(b" ", 2)[1:2] == [b"200"]
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError, IndexError):
        ok = False
    if not ok:
        sending.cancel()
        writer.close()
        up_writer.close()
        return
    try:
        await asyncio.gather(sending, pipe(up_reader, writer))
    finally:
        writer.close()
        up_writer.close()


async def serve(
    path: str,
    proxy: _socket.socket,
    forwards: list[tuple[_socket.socket, str]],
    watchers: list[tuple[_socket.socket, int]],
) -> None:
    def forwarding(
        target: str,
    ) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]:
        return lambda r, w: as_forward(path, target, r, w)

    def wrapped(raw: _socket.socket) -> socket.socket:
        return socket.socket(raw.family, raw.type, fileno=raw.detach())

    proxying = await asyncio.start_server(
        lambda r, w: as_proxy(path, r, w), sock=wrapped(proxy), limit=CHUNK
    )
    servers = [proxying]
    for sock, target in forwards:
        servers.append(
            await asyncio.start_server(forwarding(target), sock=wrapped(sock), limit=CHUNK)
        )
    for sock, family in watchers:
        watching(path, sock, family)
    await asyncio.Event().wait()


def detach_and_serve(
    path: str, proxy: _socket.socket, forwards: list[tuple[_socket.socket, str]], watch: bool
) -> None:
    """In the grandchild, while the agent starts: the watch set up (with the
    capabilities bwrap gave), every capability given up, then no terminal,
    stdio on /dev/null, serve forever."""
    global asyncio, socket
    watchers: list[tuple[_socket.socket, int]] = []
    if watch:
        watchers, problems = start_watch()
        for problem in problems:
            sys.stderr.write(f"corral's network relay: {problem}\n")
        try:
            drop_capabilities()
        except OSError:  # a relay with a capability over the network never serves
            os._exit(1)
    try:  # noqa: SIM105 - contextlib would add its import to the start
        os.setsid()
    except OSError:  # already a group of its own (netbind.pl's setpgrp): no terminal signal
        pass
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    import asyncio
    import socket

    try:
        asyncio.run(serve(path, proxy, forwards, watchers))
    finally:
        os._exit(0)


SHORT_SOCKET_PATH = 100  # sun_path is 108 bytes; a longer path is reached through its dir's fd


def reachable(path: str) -> str:
    """A path `connect` takes for the proxy's socket: a state dir deep in the
    tree makes it longer than a unix socket address allows, and then it is
    named through an open descriptor of its directory (/proc/self/fd/N/…),
    which stays open for the relay's life."""
    if len(os.fsencode(path)) <= SHORT_SOCKET_PATH:
        return path
    head, _, name = path.rpartition("/")
    fd = os.open(head or "/", os.O_RDONLY | os.O_DIRECTORY)
    return f"/proc/self/fd/{fd}/{name}"


def serve_bound(options: Options) -> None:
    """The listeners came bound from `netbind.pl` (this is its grandchild,
    started while the agent starts): serve them."""
    proxy: _socket.socket | None = None
    forwards: list[tuple[_socket.socket, str]] = []
    for fd, role in options.listening:
        sock = _socket.socket(fileno=fd)
        if role == "proxy":
            proxy = sock
        elif role.startswith("forward="):
            forwards.append((sock, role[len("forward=") :]))
    if proxy is None or not options.socket:
        raise SystemExit(USAGE)
    detach_and_serve(reachable(options.socket), proxy, forwards, options.watch)


def main(args: list[str]) -> None:
    options = parse(args)
    if options.listening:
        serve_bound(options)
        return
    if not options.socket or options.port is None or not options.argv:
        raise SystemExit(USAGE)
    path = reachable(options.socket)
    proxy, bound = bind_all(options.port, options.forwards)
    child = os.fork()
    if child == 0:
        try:
            if os.fork() == 0:
                detach_and_serve(path, proxy, bound, options.watch)
        finally:
            os._exit(0)
    os.waitpid(child, 0)
    proxy.close()
    for sock, _ in bound:
        sock.close()
    argv = [*options.through, *options.argv]  # `unshare`/`setpriv` leave the agent no capability
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        sys.stderr.write(f"{argv[0]}: {exc.strerror}\n")
        os._exit(127 if isinstance(exc, FileNotFoundError) else 126)


if __name__ == "__main__":
    main(sys.argv[1:])
