"""How a confined agent's network starts inside its sandbox: the command
line that puts the relay (`netrelay`) in front of the agent, and the watch
that records the direct connections the sandbox refuses.

- `relay_argv`: with perl there, `netbind.pl` binds the relay's listeners
  and execs the agent at once, the relay starting beside it (a connection
  made meanwhile waits in the listener's backlog); else the relay binds,
  then execs the agent. The relay runs from its bytecode (`relay_program`).
- the watch (`can_watch`, tried once per process with the real relay in a
  real sandbox): bwrap gives the relay the capabilities over the sandbox's
  network namespace that it needs to route every address to loopback and
  see the refusals (`watch_flags`), and the agent is exec'd through
  `agent_through`, which leaves it none.

What the agent may reach is `network`'s; the proxy outside is `netproxy`'s.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from .network import RELAY, NetworkAllow, relay_port

BINDER = RELAY.with_name("netbind.pl")
SYSTEM_BIN = "/usr/bin:/bin:/usr/sbin:/sbin"  # shown in every sandbox (system_mounts)
PERL_VARS = ("PERL5OPT", "PERL5LIB", "PERLLIB", "PERL5DB", "PERL_UNICODE")  # perl's own


def relay_argv(
    python: str,
    proxy_socket: Path,
    allow: NetworkAllow,
    argv: list[str],
    watch: bool = False,
    env: dict[str, str] | None = None,
) -> list[str]:
    """`argv` started with the relay (`netrelay`), which serves the proxy
    port and the loopback forwards inside the sandbox; `watch`: it also
    records every direct connection the sandbox refuses (bwrap must then run
    it with `watch_flags`) and the agent runs through `agent_through`, which
    leaves it no capability. With perl there, `netbind.pl` binds the
    listeners and execs the agent at once, the relay starting beside it
    (perl's own variables are taken out of `env`, given back to the agent);
    else the relay binds them, then execs the agent."""
    through = agent_through() if watch else None
    relay = [python, "-I", "-S", str(relay_program(python)), "--socket", str(proxy_socket)]
    if through is not None:
        relay.append("--watch")
    perl = binder_perl()
    if perl is not None:
        out = [perl, str(BINDER)]
        out += ["--bind", "proxy", *_sockaddr("127.0.0.1", relay_port(allow))]
        for host, port in allow.loopback():
            target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
            addrs = ["127.0.0.1", "::1"] if host == "localhost" else [host]
            for addr in addrs:
                role = f"forward?={target}" if ":" in addr else f"forward={target}"
                out += ["--bind", role, *_sockaddr(addr, port)]
        for name in PERL_VARS:
            if env is not None and name in env:
                out += ["--env", f"{name}={env.pop(name)}"]
        for word in through or ():
            out += ["--through", word]
        for word in relay:
            out += ["--relay", word]
        return [*out, "--", *argv]
    out = [*relay, "--proxy-port", str(relay_port(allow))]
    for host, port in allow.loopback():
        out += ["--forward", f"[{host}]:{port}" if ":" in host else f"{host}:{port}"]
    for word in through or ():
        out += ["--through", word]
    return [*out, "--", *argv]


def binder_perl() -> str | None:
    """The perl that runs `netbind.pl`: the system's (`/usr/bin`, `/bin`:
    shown in every sandbox), or None (the relay binds, a few ms slower)."""
    found = shutil.which("perl", path="/usr/bin:/bin")  # not /usr/sbin: perl lives in bin
    return found if found is not None and BINDER.is_file() else None


def _sockaddr(host: str, port: int) -> list[str]:
    """(family, the `struct sockaddr` bytes in hex) for netbind.pl's bind."""
    import socket
    import struct

    if ":" in host:
        raw = struct.pack("=H", socket.AF_INET6) + struct.pack("!HI", port, 0)
        raw += socket.inet_pton(socket.AF_INET6, host) + struct.pack("=I", 0)
        return [str(int(socket.AF_INET6)), raw.hex()]
    raw = struct.pack("=H", socket.AF_INET) + struct.pack("!H", port)
    raw += socket.inet_aton(host) + bytes(8)
    return [str(int(socket.AF_INET)), raw.hex()]


_compiled: dict[tuple[str, int, int], Path] = {}


def relay_program(python: str) -> Path:
    """What the relay's interpreter runs: its bytecode, compiled once beside
    the source (its `__pycache__`, never under PYTHONPYCACHEPREFIX, which the
    sandbox does not see) and checked
    against the source's time and size — a script given as `.py` is
    compiled at every start, which under load costs more than the
    interpreter's own start. The source itself when `python` is another
    interpreter (another bytecode) or the bytecode cannot be written."""
    if os.path.realpath(python) != os.path.realpath(sys.executable):
        return RELAY
    try:
        source = RELAY.stat()
    except OSError:
        return RELAY
    key = (str(RELAY), source.st_mtime_ns, source.st_size)
    if key in _compiled:
        return _compiled[key]
    import importlib.util
    import py_compile

    # beside the source, whatever PYTHONPYCACHEPREFIX says: the sandbox sees
    # the source's folder, not the operator's cache prefix
    tag = sys.implementation.cache_tag
    if tag is None:
        return RELAY
    cache = RELAY.parent / "__pycache__" / f"{RELAY.stem}.{tag}.pyc"
    expected = importlib.util.MAGIC_NUMBER + (0).to_bytes(4, "little")
    expected += (int(source.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little")
    expected += (source.st_size & 0xFFFFFFFF).to_bytes(4, "little")
    try:
        with open(cache, "rb") as kept:
            fresh = kept.read(16) == expected
    except OSError:
        fresh = False
    if not fresh:
        try:
            py_compile.compile(
                str(RELAY),
                cfile=str(cache),
                doraise=True,
                invalidation_mode=py_compile.PycInvalidationMode.TIMESTAMP,
            )
        except (OSError, py_compile.PyCompileError):
            return RELAY
    _compiled[key] = cache
    return cache


def agent_through() -> list[str] | None:
    """The command the relay execs the agent through when it watches, so
    the agent holds no capability: for an operator who is not root,
    util-linux `unshare` nests a user namespace where the agent has the
    operator's own ids (the network namespace belongs to the sandbox's,
    where the relay is uid 0); for root (bwrap then makes no user
    namespace), `setpriv` empties the bounding set, so root's exec gains
    nothing. None: the tool is missing (no watch)."""
    if os.geteuid() == 0:
        tool = shutil.which("setpriv", path=SYSTEM_BIN)
        if tool is None:
            return None
        return [tool, "--bounding-set=-all", "--inh-caps=-all", "--ambient-caps=-all", "--"]
    tool = shutil.which("unshare", path=SYSTEM_BIN)
    if tool is None:
        return None
    return [tool, f"--map-user={os.getuid()}", f"--map-group={os.getgid()}", "--"]


def watch_flags() -> list[str]:
    """What bwrap adds so the relay can watch: CAP_NET_ADMIN and CAP_NET_RAW
    over the sandbox's network namespace (the relay's grandchild gives them
    up once the watch is up) and what `agent_through` needs to leave the
    agent none: for an operator who is not root, uid 0 of the sandbox's user
    namespace (the one its network namespace belongs to) and CAP_SETFCAP
    (the kernel's condition for a nested namespace mapping that uid); for
    root, CAP_SETPCAP (to empty the bounding set)."""
    flags = ["--cap-add", "CAP_NET_ADMIN", "--cap-add", "CAP_NET_RAW"]
    if os.geteuid() == 0:
        return [*flags, "--cap-add", "CAP_SETPCAP"]
    return ["--unshare-user", "--uid", "0", "--gid", "0", *flags, "--cap-add", "CAP_SETFCAP"]


# the probe's agent: the watch must be up (a private address refused, not
# unreachable) and the agent must hold no power over its network (a packet socket refused)
WATCH_CHECK = """
import os, socket, sys, time
try:
    socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, 0)
    sys.exit("the agent holds CAP_NET_RAW")
except PermissionError:
    pass
for _ in range(100):
    s = socket.socket()
    try:
        s.connect(("10.255.255.1", 9))
    except ConnectionRefusedError:
        sys.exit(0)
    except OSError:
        time.sleep(0.02)
    finally:
        s.close()
sys.exit("no catch-all route")
"""

_watching: dict[tuple[str, str], tuple[bool, float]] = {}  # -> (works, when tried)
REPROBE_SECS = 60.0  # a probe that failed (bwrap slow under load) is tried again after this


def can_watch(bwrap: str, python: str) -> bool:
    """Whether the relay's watch works here, tried once per process with the
    real relay in a real sandbox: a setuid bwrap refuses capabilities to a
    user who is not root, a host may refuse nested user namespaces, an old
    `unshare` lacks `--map-user`, `setpriv` may be missing; then agents
    still start as before, their direct attempts unrecorded (the start line
    says so). A failure is tried again after REPROBE_SECS."""
    import subprocess
    import time

    key = (bwrap, python)
    known = _watching.get(key)
    if known is not None and (known[0] or time.monotonic() - known[1] < REPROBE_SECS):
        return known[0]

    ok = False
    setuid = os.path.exists(bwrap) and bool(os.stat(bwrap).st_mode & 0o4000)
    if (not setuid or os.geteuid() == 0) and agent_through() is not None:
        argv = [bwrap, "--die-with-parent", "--cap-drop", "ALL", *watch_flags()]
        argv += ["--unshare-pid", "--unshare-net", "--ro-bind", "/", "/", "--dev", "/dev"]
        argv += ["--proc", "/proc", "--tmpfs", "/tmp"]
        inner = [python or sys.executable, "-I", "-S", "-c", WATCH_CHECK]
        probe = relay_argv(
            python or sys.executable, Path("/nonexistent/net.sock"), NetworkAllow(), inner, True
        )
        try:
            ran = subprocess.run(
                [*argv, *probe],
                capture_output=True,
                timeout=10,
                check=False,
                stdin=subprocess.DEVNULL,
            )
            ok = ran.returncode == 0 and b"corral's network relay" not in ran.stderr
        except (OSError, subprocess.TimeoutExpired):
            ok = False
    _watching[key] = (ok, time.monotonic())
    return ok
