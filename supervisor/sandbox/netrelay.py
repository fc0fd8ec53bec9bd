"""The relay inside a confined agent's network namespace (standard library
only: run as `python -I -S netrelay.py --socket S --proxy-port P
[--forward host:port]… -- agent args…`).

The sandbox has loopback and nothing else. Before the agent starts, the
relay binds, on loopback inside:

- `127.0.0.1:P`, the agent's HTTP(S) proxy (`HTTPS_PROXY` and friends): each
  connection is copied as it is to corral's allow-list proxy over the unix
  socket `S` (the only thing of the outside the sandbox can reach);
- each allowed loopback endpoint (`--forward 127.0.0.1:8080`: a local model
  server, a test's fake one) at the same address and port, because many
  CLIs never use a proxy for a loopback base URL: a connection there becomes
  `CONNECT host:port` to the proxy, sent at once with the client's first
  bytes (no round trip waits for the proxy's answer), whose `200` line the
  relay takes off before the client sees the stream.

Then it forks twice — the relay serves from a grandchild in a session of
its own (no terminal: Ctrl-C in the agent's pane is the agent's), its stdio
on /dev/null (an ACP agent's pipes end when the agent ends) — and execs the
agent in its own process, so the agent's exit ends the sandbox, and the
kernel ends the relay with its pid namespace.
"""

from __future__ import annotations

import _socket  # not `socket`: its enums cost more than the rest of the start
import os
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


def parse(args: list[str]) -> tuple[str | None, int | None, list[tuple[str, int]], list[str]]:
    sock: str | None = None
    port: int | None = None
    forwards: list[tuple[str, int]] = []
    i = 0
    while i < len(args):
        word = args[i]
        if word == "--":
            return sock, port, forwards, args[i + 1 :]
        if word in ("--socket", "--proxy-port", "--forward") and i + 1 < len(args):
            value = args[i + 1]
            if word == "--socket":
                sock = value
            elif word == "--proxy-port":
                port = int(value)
            else:
                host, _, digits = value.rpartition(":")
                forwards.append((host.strip("[]"), int(digits)))
            i += 2
            continue
        break
    raise SystemExit("netrelay: usage: --socket S --proxy-port P [--forward h:p]… -- argv…")


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
    path: str, proxy: _socket.socket, forwards: list[tuple[_socket.socket, str]]
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
    await asyncio.Event().wait()


def detach_and_serve(
    path: str, proxy: _socket.socket, forwards: list[tuple[_socket.socket, str]]
) -> None:
    """In the grandchild: no terminal, stdio on /dev/null, serve forever."""
    global asyncio, socket
    os.setsid()
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    import asyncio
    import socket

    try:
        asyncio.run(serve(path, proxy, forwards))
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


def main(args: list[str]) -> None:
    path, port, forwards, argv = parse(args)
    if not path or port is None or not argv:
        raise SystemExit("netrelay: usage: --socket S --proxy-port P [--forward h:p]… -- argv…")
    path = reachable(path)
    proxy, bound = bind_all(port, forwards)
    child = os.fork()
    if child == 0:
        try:
            if os.fork() == 0:
                detach_and_serve(path, proxy, bound)
        finally:
            os._exit(0)
    os.waitpid(child, 0)
    proxy.close()
    for sock, _ in bound:
        sock.close()
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        sys.stderr.write(f"{argv[0]}: {exc.strerror}\n")
        os._exit(127 if isinstance(exc, FileNotFoundError) else 126)


if __name__ == "__main__":
    main(sys.argv[1:])
