"""What corral's network allow-list costs a confined agent on a model stream.

A streaming server (its own process, on the host's 127.0.0.1) answers each
request with its headers and first SSE event at once, then more events; a
client runs inside the sandbox exactly as an agent does (`launch_agent`),
twice: with `[sandbox] network = "host"` (it reaches the server directly:
the baseline) and with the allow-list (its own namespace: the relay inside,
corral's proxy outside, served by this process's event loop). Measured, as
medians over N requests:

- time to first byte of a fresh request: connect, send, first byte back
  (through the proxy: unix socket, CONNECT, upstream connect included);
- time to first byte of a request on a connection already open (an agent
  keeps its connection to the model: only the two copy hops are left);
- throughput of one 256 MB download.

Budgets (issue 41): ≤ 5 ms added to the first byte (each kind), and no cap
below 50 MB/s through the proxy. Exits 1 when one is exceeded.

Run (from the repo root): .venv/bin/python bench/netproxy.py [--runs 50]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from corral.supervisor.sandbox import SandboxPolicy, sandbox_status
from corral.supervisor.sandbox.agent import launch_agent
from corral.supervisor.sandbox.netproxy import AllowListProxy

TTFB_BUDGET_MS = 5.0
THROUGHPUT_FLOOR = 50.0  # MB/s
BIG = 256 * 1024 * 1024

SERVER = textwrap.dedent(
    """
    import socket, sys, threading
    BIG = int(sys.argv[1])
    EVENT = b"event: content_block_delta\\ndata: {\\"delta\\": \\"hello\\"}\\n\\n"
    def handle(conn):
        try:
            serve(conn)
        except OSError:
            pass  # the client went away
    def serve(conn):
        with conn:
            buf = b""
            while True:
                while b"\\r\\n\\r\\n" not in buf:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    buf += chunk
                head, _, buf = buf.partition(b"\\r\\n\\r\\n")
                if b" /big " in head.split(b"\\r\\n", 1)[0]:
                    conn.sendall(b"HTTP/1.1 200 OK\\r\\nContent-Length: %d\\r\\n\\r\\n" % BIG)
                    block = b"x" * (1 << 20)
                    for _ in range(BIG >> 20):
                        conn.sendall(block)
                    continue
                body = EVENT * 4
                conn.sendall(
                    b"HTTP/1.1 200 OK\\r\\nContent-Type: text/event-stream\\r\\n"
                    b"Content-Length: %d\\r\\n\\r\\n" % len(body) + EVENT
                )
                conn.sendall(body[len(EVENT):])
    srv = socket.create_server(("127.0.0.1", 0))
    print(srv.getsockname()[1], flush=True)
    while True:
        c, _ = srv.accept()
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=handle, args=(c,), daemon=True).start()
    """
)

CLIENT = textwrap.dedent(
    """
    import json, socket, sys, time
    port, runs, big = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    REQ = b"POST /v1/messages HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\nContent-Length: 2\\r\\n\\r\\n{}"

    def finish(s, buf):
        while b"\\r\\n\\r\\n" not in buf:
            buf += s.recv(65536)
        head, _, body = buf.partition(b"\\r\\n\\r\\n")
        length = int(head.lower().split(b"content-length: ")[1].split(b"\\r\\n")[0])
        while len(body) < length:
            body += s.recv(65536)

    def connect():
        s = socket.create_connection(("127.0.0.1", port))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return s

    def first_byte(s):
        t = time.perf_counter()
        s.sendall(REQ)
        first = s.recv(1)
        return (time.perf_counter() - t) * 1000, first

    fresh, kept = [], []
    for n in range(runs + 3):  # the first 3 warm up
        t = time.perf_counter()
        s = connect()
        _, first = first_byte(s)
        took = (time.perf_counter() - t) * 1000  # connect included
        finish(s, first)
        again, first = first_byte(s)
        finish(s, first)
        s.close()
        if n >= 3:
            fresh.append(took)
            kept.append(again)
    s = connect()
    s.sendall(b"GET /big HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\n\\r\\n")
    t = time.perf_counter()
    got = 0
    while got < big:
        chunk = s.recv(1 << 20)
        if not chunk:
            break
        got += len(chunk)
    secs = time.perf_counter() - t
    print(json.dumps({"fresh": fresh, "kept": kept, "mbps": got / secs / 1e6}))
    """
)


async def confined_client(
    base: Path, port: int, runs: int, network: str
) -> dict[str, list[float] | float]:
    work = base / "work"
    work.mkdir(parents=True, exist_ok=True)
    state = base / "state"
    sockets = state / "sockets" / "bench"
    sockets.mkdir(parents=True, exist_ok=True)
    script = base / "client.py"
    script.write_text(CLIENT)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(base / "home"), "LANG": "C.UTF-8"}
    launch = launch_agent(
        [sys.executable, str(script), str(port), str(runs), str(BIG)],
        work,
        env,
        policy=SandboxPolicy(
            state_dir=state, network=network, network_allow=(f"127.0.0.1:{port}",)
        ),
        choice=None,
        own_dirs=[],
        own_files=[],
        hooks_file=state / "agents" / "bench" / "hooks.jsonl",
        python=sys.executable,
        agent_socket_dir=sockets,
        agent="bench",
    )
    proxy = AllowListProxy()
    if launch.network is not None and launch.proxy_socket is not None:
        await proxy.serve("bench", launch.proxy_socket, launch.network, lambda *_: None)
    try:
        proc = await asyncio.create_subprocess_exec(
            *launch.argv,
            cwd=work,
            env=launch.env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await proc.communicate()
    finally:
        proxy.close_all()
    if proc.returncode != 0:
        raise SystemExit(f"the client failed: {err.decode()[-2000:]}")
    result: dict[str, list[float] | float] = json.loads(out.decode().strip().splitlines()[-1])
    return result


async def main(runs: int) -> int:
    status = sandbox_status()
    if not status.available:
        print(f"no sandbox can run here: {status.detail}")
        return 1
    with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp:
        server = subprocess.Popen(
            [sys.executable, "-c", SERVER, str(BIG)], stdout=subprocess.PIPE, text=True
        )
        try:
            assert server.stdout is not None
            port = int(server.stdout.readline())
            direct = await confined_client(Path(tmp) / "host", port, runs, "host")
            proxied = await confined_client(Path(tmp) / "allow", port, runs, "allowlist")
        finally:
            server.kill()
            server.wait()
    over = False
    print(f"{runs} model-stream requests from inside the sandbox, median time to first byte:")
    for kind, words in (("fresh", "a fresh request"), ("kept", "on an open connection")):
        d = statistics.median(direct[kind])  # type: ignore[arg-type]
        p = statistics.median(proxied[kind])  # type: ignore[arg-type]
        added = p - d
        verdict = "within" if added <= TTFB_BUDGET_MS else "OVER"
        over = over or added > TTFB_BUDGET_MS
        print(
            f"  {words:<22} direct {d:6.2f} ms, through the proxy {p:6.2f} ms: "
            f"adds {added:5.2f} ms ({verdict} the {TTFB_BUDGET_MS:g} ms budget)"
        )
    d_mbps, p_mbps = float(direct["mbps"]), float(proxied["mbps"])  # type: ignore[arg-type]
    verdict = "above" if p_mbps >= THROUGHPUT_FLOOR else "BELOW"
    over = over or p_mbps < THROUGHPUT_FLOOR
    print(
        f"throughput of one {BIG >> 20} MB download: direct {d_mbps:7.1f} MB/s, "
        f"through the proxy {p_mbps:7.1f} MB/s ({verdict} the {THROUGHPUT_FLOOR:g} MB/s floor)"
    )
    return 1 if over else 0


if __name__ == "__main__":
    from load import run_with_load  # bench/load.py: --load N busy loops

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    sys.exit(run_with_load(lambda: asyncio.run(main(parser.parse_args().runs))))
