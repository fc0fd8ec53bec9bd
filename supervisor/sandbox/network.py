"""What a confined agent may reach on the network: an allow-list of
`host:port` entries, and where it comes from.

A confined agent runs in its own network namespace (`bwrap --unshare-net`):
the host's loopback services and abstract unix sockets do not exist there.
Its one way out is corral's allow-list proxy (`netproxy`), reached through a
relay inside the sandbox (`netrelay`). The list holds:

- the agent's model provider endpoints: its profile's known API hosts
  (`DEFAULT_HOSTS`), every endpoint URL its environment names (among the
  variables its profile reads, one named like an endpoint:
  `ANTHROPIC_BASE_URL`, `OPENAI_API_BASE`, `OLLAMA_HOST`, …, or an
  `http(s)://` URL inside a `*_CONFIG_CONTENT` document) and the providers'
  base URLs in its own config files (Codex's `config.toml`, OpenCode's
  `opencode.json`) as corral first read them (`pinned`: the agent can write
  those files, so what it adds there later widens nothing);
- the operator's `[sandbox] network_allow` entries (package registries, a
  local model server): `host` (ports 443 and 80), `host:port`,
  `*.example.com` (any subdomain), `[::1]:8080`, or a URL.

Nothing else: not the host's loopback (unless an entry names it, as a local
model server's `127.0.0.1:11434`), not a cloud metadata address, not any
other host. Decision: a bare host allows 443 and 80 only — registries and
APIs speak HTTPS, and a wider default would reopen every port of an allowed
machine.
"""

from __future__ import annotations

import fnmatch
import hashlib
import ipaddress
import json
import os
import re
import shutil
import sys
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

ALLOWLIST = "allowlist"  # `[sandbox] network`: own namespace, reach only the allow-list
HOST = "host"  # `[sandbox] network`: the host's network (unsafe: loopback, abstract sockets)
NETWORK_MODES = (ALLOWLIST, HOST)
DEFAULT_PORTS = (443, 80)
PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")

# Every provider an agent that can use many (Aider, OpenCode) may be configured for.
PROVIDERS = (
    "api.anthropic.com",
    "api.openai.com",
    "generativelanguage.googleapis.com",
    "openrouter.ai",
    "api.deepseek.com",
    "api.groq.com",
    "api.mistral.ai",
    "api.x.ai",
    "api.cohere.com",
)
# Each agent's own API and sign-in hosts (a subscription login talks to these).
DEFAULT_HOSTS: dict[str, tuple[str, ...]] = {
    "claude": ("api.anthropic.com", "console.anthropic.com", "claude.ai", "platform.claude.com"),
    "codex": ("api.openai.com", "auth.openai.com", "chatgpt.com"),
    "gemini": (
        "generativelanguage.googleapis.com",
        "cloudcode-pa.googleapis.com",
        "oauth2.googleapis.com",
        "www.googleapis.com",
    ),
    "aider": PROVIDERS,
    "opencode": (*PROVIDERS, "models.dev", "opencode.ai"),
}
# Variable names that hold an endpoint (proxies excluded: corral sets those).
ENDPOINT_NAME = re.compile(r"(_BASE_URL|_API_BASE|_BASE|_ENDPOINT|_URL)$")
URL_IN_TEXT = re.compile(r"https?://[^\s\"'<>\\]+")
CONFIG_CONTENT = re.compile(r"_CONFIG_CONTENT$")


class BadAllowEntry(ValueError):
    pass


@dataclass(frozen=True)
class AllowEntry:
    host: str  # lower-case, no trailing dot, IPv6 without brackets; `*.x` matches subdomains
    port: int | None  # None: DEFAULT_PORTS

    def permits(self, host: str, port: int) -> bool:
        if port not in ((self.port,) if self.port is not None else DEFAULT_PORTS):
            return False
        if self.host.startswith("*."):
            return host.endswith(self.host[1:]) and fnmatch.fnmatchcase(host, self.host)
        return host == self.host

    def text(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port is None else f"{host}:{self.port}"


def normal_host(raw: str) -> str:
    """A host as compared: lower case, no brackets, no trailing dot."""
    host = raw.strip().lower()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host.rstrip(".")


def parse_entry(raw: str) -> AllowEntry:
    """`host`, `host:port`, `*.host`, `[v6]:port` or a URL -> an entry;
    anything else raises `BadAllowEntry` with what to write instead."""
    text = raw.strip()
    if "://" in text:
        parts = urlsplit(text)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise BadAllowEntry(f"{raw!r}: give a host, host:port or an http(s) URL")
        try:
            url_port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError as exc:
            raise BadAllowEntry(f"{raw!r}: {exc}") from exc
        text = normal_host(parts.hostname) + f":{url_port}"
        if ":" in normal_host(parts.hostname):
            text = f"[{normal_host(parts.hostname)}]:{url_port}"
        return parse_entry(text)  # the same rules for the host as a bare entry
    host = text
    port: int | None = None
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            raise BadAllowEntry(f"{raw!r}: an IPv6 address goes in brackets, like [::1]:8080")
        host, rest = text[: end + 1], text[end + 1 :]
        if rest:
            if not rest.startswith(":") or not rest[1:].isdigit():
                raise BadAllowEntry(f"{raw!r}: write [address]:port")
            port = int(rest[1:])
    elif text.count(":") == 1:
        host, _, digits = text.partition(":")
        if not digits.isdigit():
            raise BadAllowEntry(f"{raw!r}: the port must be a number, like pypi.org:443")
        port = int(digits)
    host = normal_host(host)
    if not host or not re.fullmatch(r"(\*\.)?[a-z0-9_.:-]+", host):
        raise BadAllowEntry(
            f"{raw!r}: give a host name or address, like pypi.org or 127.0.0.1:8080"
        )
    if port is not None and not 0 < port < 65536:
        raise BadAllowEntry(f"{raw!r}: a port is between 1 and 65535")
    return AllowEntry(host, port)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class NetworkAllow:
    """One agent's allow-list, in the order it was given (duplicates dropped)."""

    entries: tuple[AllowEntry, ...] = ()

    def permits(self, host: str, port: int) -> bool:
        target = normal_host(host)
        return any(entry.permits(target, port) for entry in self.entries)

    def loopback(self) -> list[tuple[str, int]]:
        """Allowed loopback endpoints with their port: inside the sandbox each
        gets a listener at the same address that forwards through the proxy,
        so a `http://127.0.0.1:PORT` base URL works unchanged."""
        out: list[tuple[str, int]] = []
        for entry in self.entries:
            if is_loopback(entry.host):
                for port in (entry.port,) if entry.port is not None else DEFAULT_PORTS:
                    if (entry.host, port) not in out:
                        out.append((entry.host, port))
        return out

    def texts(self) -> list[str]:
        return [entry.text() for entry in self.entries]

    def describe(self) -> str:
        return ", ".join(self.texts()) or "nothing"

    @classmethod
    def of(cls, raws: Iterable[str]) -> NetworkAllow:
        seen: list[AllowEntry] = []
        for raw in raws:
            try:
                entry = parse_entry(raw)
            except BadAllowEntry:
                continue  # an endpoint corral could not read is not reachable; config is checked
            if entry not in seen:
                seen.append(entry)
        return cls(tuple(seen))


def env_endpoints(env: Mapping[str, str], names: Iterable[str] | None = None) -> list[str]:
    """Endpoint URLs the agent's own variables name: only variables its
    profile passes on by name or pattern (`names`: `ANTHROPIC_BASE_URL`,
    `AIDER_*`; None: every one), so an operator's unrelated `JENKINS_URL`
    opens nothing."""
    patterns = None if names is None else list(names)
    out: list[str] = []
    for key, value in env.items():
        upper = key.upper()
        if upper in PROXY_VARS:
            continue
        if patterns is not None and not any(fnmatch.fnmatchcase(key, p) for p in patterns):
            continue
        if CONFIG_CONTENT.search(upper):
            out += URL_IN_TEXT.findall(value)
        elif ENDPOINT_NAME.search(upper) and value.strip():
            text = value.strip()
            if "://" in text:
                out.append(text)
        elif upper == "OLLAMA_HOST" and value.strip():
            text = value.strip()
            out.append(text if "://" in text else "http://" + text)
    return out


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ""


def codex_endpoints(env: Mapping[str, str]) -> list[str]:
    """`base_url` of every model provider in Codex's `config.toml`."""
    home = env.get("CODEX_HOME") or os.path.join(env.get("HOME", "~"), ".codex")
    try:
        data = tomllib.loads(_read(Path(home).expanduser() / "config.toml"))
    except tomllib.TOMLDecodeError:
        return []
    providers = data.get("model_providers")
    out: list[str] = []
    for provider in providers.values() if isinstance(providers, dict) else ():
        url = provider.get("base_url") if isinstance(provider, dict) else None
        if isinstance(url, str):
            out.append(url)
    return out


BASE_URL_KEY = re.compile(r'"(?:baseURL|base_url|baseUrl)"\s*:\s*"([^"]+)"')


def opencode_endpoints(env: Mapping[str, str]) -> list[str]:
    """Providers' `baseURL` in OpenCode's config files (`$OPENCODE_CONFIG`,
    `$OPENCODE_CONFIG_DIR` and its XDG config dir; never the worktree's)."""
    home = Path(env.get("HOME") or os.path.expanduser("~"))
    config_home = Path(env.get("XDG_CONFIG_HOME") or home / ".config") / "opencode"
    files = [Path(env["OPENCODE_CONFIG"])] if env.get("OPENCODE_CONFIG") else []
    for folder in (Path(env["OPENCODE_CONFIG_DIR"]),) if env.get("OPENCODE_CONFIG_DIR") else ():
        files += [folder / "opencode.json", folder / "opencode.jsonc"]
    files += [config_home / "opencode.json", config_home / "opencode.jsonc"]
    return [url for path in files for url in BASE_URL_KEY.findall(_read(path.expanduser()))]


CONFIG_ENDPOINTS = {"codex": codex_endpoints, "opencode": opencode_endpoints}
# the variables that say where each agent's config files are: one pin per place
CONFIG_PLACES = {
    "codex": ("CODEX_HOME", "HOME"),
    "opencode": ("OPENCODE_CONFIG", "OPENCODE_CONFIG_DIR", "XDG_CONFIG_HOME", "HOME"),
}


def config_place(agent: str, env: Mapping[str, str]) -> str:
    """A short key for where `agent`'s config files are (its own pin)."""
    where = [env.get(name, "") for name in CONFIG_PLACES.get(agent, ())]
    return hashlib.sha256(json.dumps(where).encode()).hexdigest()[:12]


def pinned(
    state_dir: Path | None,
    agent: str,
    found: list[str],
    *,
    place: str = "",
    record_first: bool = True,
) -> list[str]:
    """The endpoints of an agent's own config files as corral first read
    them. Those files are the agent's to write (they sit in its writable
    config dir): an endpoint it adds there later must not widen its own
    list, so what corral read first is kept under its state dir (hidden
    from every sandbox) and used from then on; a new one needs
    `[sandbox] network_allow`."""
    if state_dir is None:
        return found
    record = state_dir / "network" / f"{agent or 'agent'}-{place or 'config'}-endpoints.json"
    try:
        kept = json.loads(record.read_text(encoding="utf-8"))["endpoints"]
        if isinstance(kept, list):
            return [str(url) for url in kept]
    except FileNotFoundError:
        pass
    except (OSError, ValueError, KeyError, TypeError):
        return []  # a record corral cannot read trusts nothing new
    if not record_first:
        return found
    try:
        record.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        temp = record.with_name(record.name + ".tmp")
        temp.write_text(json.dumps({"endpoints": found}), encoding="utf-8")
        os.replace(temp, record)
    except OSError:
        return []
    return found


def agent_allow(
    agent: str,
    env: Mapping[str, str],
    extra: Iterable[str] = (),
    names: Iterable[str] | None = None,
    state_dir: Path | None = None,
    record_first: bool = True,
) -> NetworkAllow:
    """What the agent named `agent` (a profile name) may reach: its
    endpoints (`names`: the variables its profile reads; its own config
    files' providers, `pinned` under `state_dir`), its known hosts and
    `extra` (the operator's `network_allow`)."""
    raws: list[str] = [*env_endpoints(env, names)]
    if agent in CONFIG_ENDPOINTS:
        found = CONFIG_ENDPOINTS[agent](env)
        place = config_place(agent, env)
        raws += pinned(state_dir, agent, found, place=place, record_first=record_first)
    raws += DEFAULT_HOSTS.get(agent, ())
    raws += list(extra)
    return NetworkAllow.of(raws)


RELAY = Path(__file__).resolve().with_name("netrelay.py")
RELAY_PORT = 3128  # the proxy's address inside (the namespace is the agent's own)
PROXY_SOCKET_NAME = "net.sock"


def relay_port(allow: NetworkAllow) -> int:
    """A port on 127.0.0.1 inside that no loopback forward takes."""
    taken = {port for _host, port in allow.loopback()}
    port = RELAY_PORT
    while port in taken:
        port += 1
    return port


BINDER = RELAY.with_name("netbind.pl")
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
    found = shutil.which("perl", path="/usr/bin:/bin")
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
    the source (`__pycache__`, as an import would leave it) and checked
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

    cache = Path(importlib.util.cache_from_source(str(RELAY)))
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
        tool = shutil.which("setpriv")
        if tool is None:
            return None
        return [tool, "--bounding-set=-all", "--inh-caps=-all", "--ambient-caps=-all", "--"]
    tool = shutil.which("unshare")
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

_watching: dict[tuple[str, str], bool] = {}


def can_watch(bwrap: str, python: str) -> bool:
    """Whether the relay's watch works here, tried once per process with the
    real relay in a real sandbox: a setuid bwrap refuses capabilities to a
    user who is not root, a host may refuse nested user namespaces, an old
    `unshare` lacks `--map-user`, `setpriv` may be missing; then agents still start as before, their
    direct attempts unrecorded (the start line says so)."""
    key = (bwrap, python)
    if key in _watching:
        return _watching[key]
    import subprocess

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
    _watching[key] = ok
    return ok


def proxy_env(allow: NetworkAllow) -> dict[str, str]:
    """The variables that send an agent's HTTP(S) through the relay: every
    spelling CLIs read, NO_PROXY emptied (a loopback endpoint through the
    proxy works too), Node's built-in fetch told to use them."""
    url = f"http://127.0.0.1:{relay_port(allow)}"
    out: dict[str, str] = {}
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        out[name] = out[name.lower()] = url
    out["NO_PROXY"] = out["no_proxy"] = ""
    out["NODE_USE_ENV_PROXY"] = "1"
    return out
