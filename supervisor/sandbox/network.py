"""What a confined agent may reach on the network: an allow-list of
`host:port` entries, and where it comes from.

A confined agent runs in its own network namespace (`bwrap --unshare-net`):
the host's loopback services and abstract unix sockets do not exist there.
Its one way out is corral's allow-list proxy (`netproxy`), reached through a
relay inside the sandbox (`netrelay`). The list holds:

- the agent's model provider endpoints: its profile's known API hosts
  (`AgentProfile.network_hosts`, passed in as `hosts`), every endpoint URL its environment names (among the
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

# Every provider an agent that can use many (Aider, OpenCode) may be configured
# for: their profiles' `network_hosts` (agents/profiles.py) name them.
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
    hosts: Iterable[str] = (),
) -> NetworkAllow:
    """What the agent named `agent` (a profile name) may reach: its
    endpoints (`names`: the variables its profile reads; its own config
    files' providers, `pinned` under `state_dir`), its known hosts (`hosts`:
    its profile's `network_hosts`) and
    `extra` (the operator's `network_allow`)."""
    raws: list[str] = [*env_endpoints(env, names)]
    if agent in CONFIG_ENDPOINTS:
        found = CONFIG_ENDPOINTS[agent](env)
        place = config_place(agent, env)
        raws += pinned(state_dir, agent, found, place=place, record_first=record_first)
    raws += list(hosts)
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
