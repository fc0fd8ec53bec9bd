"""What this machine offers corral, as `corral doctor` and `corral agents`
report it (and the board's header, for confinement): the agent CLIs and
one-shot presets found, git and tmux versions, the configured models, the
config file, whether checks and agents run confined, and each `[[hosts]]`
machine checked over SSH. Reads only; never changes a setting.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .errors import CorralError
from .hosts.probe import HostReport

__all__ = [
    "MIN_TMUX",
    "AgentCli",
    "ConfigStatus",
    "ConfinementStatus",
    "HostReport",
    "HostTool",
    "ModelCheck",
    "ModelStatus",
    "agent_clis",
    "agents_on_path",
    "config_status",
    "confinement_status",
    "host_reports",
    "host_tool",
    "model_checks",
    "model_status",
    "oneshot_presets",
]

MIN_TMUX = (3, 2)
_VERSION_ARGS = {"git": ("--version",), "tmux": ("-V",)}
_MINIMUM = {"tmux": MIN_TMUX}


@dataclass(frozen=True)
class AgentCli:
    """An agent corral can run, as found on this host."""

    name: str
    label: str
    binary: str | None  # None: not installed
    version: str | None  # None: not installed, or it would not say
    install: str = ""  # the command that installs it, when its profile says


def agent_clis() -> list[AgentCli]:
    """The agents in corral's order of preference, then the demo agent."""
    from .agents.profiles import preference, profile_for

    found: list[AgentCli] = []
    for name in (*preference(), "demo"):
        profile = profile_for(name)
        binary = profile.find()
        version = profile.version(binary) if binary is not None else None
        found.append(AgentCli(name, profile.label, binary, version, profile.install))
    return found


def oneshot_presets() -> list[AgentCli]:
    """The one-shot presets (`claude-p`, …): label and command line (as the
    version), with the binary they need (None: not installed)."""
    from .agents.oneshot import oneshot_profile, preset_forms

    found: list[AgentCli] = []
    for name in preset_forms():
        profile = oneshot_profile(name)
        found.append(AgentCli(name, profile.label, profile.find(), profile.command))
    return found


def agents_on_path() -> list[tuple[str, str | None]]:
    """Each agent CLI's executable on PATH (None: not installed), every
    registered profile's (`agents/profiles.py`)."""
    from .agents.profiles import registered_profiles

    return [(p.name, p.find()) for p in registered_profiles()]


@dataclass(frozen=True)
class HostTool:
    """git or tmux: its version line (None: not found) and whether it is
    new enough for corral."""

    name: str
    version: str | None
    minimum: tuple[int, int] | None = None

    @property
    def too_old(self) -> bool:
        if self.version is None or self.minimum is None:
            return False
        return _parse_version(self.version) < self.minimum


def host_tool(name: str) -> HostTool:
    """`git` or `tmux`."""
    version = _version_of([name, *_VERSION_ARGS[name]]) if shutil.which(name) else None
    return HostTool(name, version, _MINIMUM.get(name))


def _version_of(cmd: list[str]) -> str | None:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (out.stdout or out.stderr).strip().splitlines()
    return text[0] if text else None


def _parse_version(text: str) -> tuple[int, ...]:
    m = re.search(r"(\d+)\.(\d+)", text)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


@dataclass(frozen=True)
class ModelStatus:
    """The configured model: none is fine (agents, manual and convention
    contracts still work); a broken configuration is a problem to fix."""

    configured: bool
    description: str  # what is configured, when something is
    error: str | None = None


def model_status() -> ModelStatus:
    from .llm.catalog import load_catalog

    try:
        catalog = load_catalog()
    except CorralError as exc:
        return ModelStatus(False, "", str(exc))
    if not catalog.entries:
        return ModelStatus(False, "")
    return ModelStatus(True, f"{len(catalog.entries)} in order: {', '.join(catalog.names)}")


@dataclass(frozen=True)
class ModelCheck:
    """One configured model as `corral doctor` checks it (never its key)."""

    name: str
    ok: bool
    detail: str


def model_checks(timeout: float = 2.0) -> list[ModelCheck]:
    """Each configured model: its key's variable set or not, and a TCP
    connect to its server (no request is sent, so nothing is billed)."""
    from .llm.catalog import check_entry, describe_entry, load_catalog

    try:
        catalog = load_catalog()
    except CorralError:
        return []
    checks = [check_entry(e, timeout=timeout) for e in catalog.entries]
    return [ModelCheck(c.entry.name, c.ok, describe_entry(c)) for c in checks]


@dataclass(frozen=True)
class ConfigStatus:
    path: Path
    exists: bool  # False: absent, so the defaults apply
    error: str | None = None


def config_status() -> ConfigStatus:
    from .config import load_config
    from .paths import config_path

    path = config_path()
    try:
        load_config(path)
    except CorralError as exc:
        return ConfigStatus(path, path.exists(), str(exc))
    return ConfigStatus(path, path.exists())


@dataclass(frozen=True)
class ConfinementStatus:
    confined: bool  # checks and the built-in shell run in the sandbox
    detail: str  # one line for the operator
    agents: str = ""  # how external agents' panes run, one line
    agents_unconfined: bool = False  # agents were asked to be confined and cannot be
    # "agents unconfined: <why>" for the board's header, "" when every agent is confined
    agents_note: str = ""
    # (agent, what it may reach) for each agent CLI, when agents run confined
    network: tuple[tuple[str, str], ...] = ()


KEPT = "whatever they start still ends with them (pane keeper)"


def _agents_line(enabled: bool, available: bool, why: str) -> tuple[str, bool, str]:
    """How agents run: the `[sandbox] agents` setting (on by default) and the
    per-agent overrides, against whether a sandbox can run here; returns
    (the line, whether confinement was wanted and cannot be had, the
    header's note)."""
    from .agents.settings import load_agent_settings
    from .config import load_config

    try:
        default = load_config().sandbox.agents
        overrides = {
            n: s.sandbox for n, s in load_agent_settings().items() if s.sandbox is not None
        }
    except CorralError:
        default, overrides = True, {}
    on = sorted(n for n, v in overrides.items() if v)
    off = sorted(n for n, v in overrides.items() if not v)
    if not enabled:
        return (
            f"unconfined ([sandbox] enabled = false): {KEPT}",
            False,
            ("agents unconfined: [sandbox] enabled = false"),
        )
    if not default and not on:
        return (
            f"unconfined ([sandbox] agents = false): {KEPT}",
            False,
            ("agents unconfined: [sandbox] agents = false"),
        )
    if not available:
        return (
            f"unconfined: no sandbox can run here ({why}); {KEPT}",
            True,
            f"agents unconfined: {why}",
        )
    words = _network_words()
    host = "" if words.startswith("network by") else "agents on the host's network (unsafe)"
    if default:
        who, note = "every agent", host
        if off:
            who += f" except {', '.join(off)}"
            note = "; ".join(
                n for n in (f"agents unconfined: {', '.join(off)} (sandbox = false)", host) if n
            )
        return f"confined, {words}: {who}", False, note
    return (
        f"confined, {words}: {', '.join(on)}",
        False,
        "; ".join(
            n
            for n in (
                f"agents unconfined: all but {', '.join(on)} ([sandbox] agents = false)",
                host,
            )
            if n
        ),
    )


def _network_words() -> str:
    from .config import load_config

    try:
        mode = load_config().sandbox.network
    except CorralError:
        mode = "allowlist"
    if mode == "host":
        return 'the host\'s network ([sandbox] network = "host": unsafe)'
    return "network by allow-list"


def _state_dir() -> Path | None:
    from .paths import default_state_dir

    try:
        return default_state_dir()
    except CorralError:
        return None


def agent_reach() -> tuple[tuple[str, str], ...]:
    """What each agent CLI may reach when it runs confined, from this
    environment and config as its launch would read them."""
    import os

    from .agents.profiles import registered_profiles
    from .agents.settings import load_agent_settings
    from .config import load_config
    from .sandbox.agent import reach
    from .sandbox.network import HOST, agent_allow

    try:
        sandbox = load_config().sandbox
        own = load_agent_settings()
    except CorralError:
        return ()
    out: list[tuple[str, str]] = []
    for profile in registered_profiles():
        name = profile.name
        allow = None
        if sandbox.network != HOST:
            allow = agent_allow(
                name,
                os.environ,
                [*sandbox.network_allow, *(own[name].network_allow if name in own else ())],
                names=profile.env_allow,
                state_dir=_state_dir(),
                record_first=False,
                hosts=profile.network_hosts,
            )
        out.append((name, reach(allow)))
    if sandbox.network != HOST:
        out.append(("direct", direct_words()))
    return tuple(out)


def direct_words() -> str:
    """What becomes of a confined agent's connection that skips the proxy."""
    import sys

    from .sandbox import sandbox_status
    from .sandbox.netstart import can_watch

    bwrap = sandbox_status().bwrap
    if bwrap is not None and can_watch(bwrap, sys.executable):
        return "a connection not through the proxy is refused, and recorded as a blocked event"
    return (
        "a connection not through the proxy is refused, not recorded "
        "(bwrap cannot give the relay its watch here)"
    )


def confinement_status() -> ConfinementStatus:
    """Whether checks and the built-in shell will run in the sandbox, and if
    not, why (no bwrap, user namespaces refused, not Linux, or opted out);
    and how external agents will run."""
    from .config import load_config
    from .sandbox import sandbox_status

    try:
        enabled = load_config().sandbox.enabled
    except CorralError:
        enabled = True
    status = sandbox_status()
    agents, agents_unconfined, note = _agents_line(enabled, status.available, status.detail)
    if not enabled:
        return ConfinementStatus(
            False,
            "off ([sandbox] enabled = false): checks run unconfined, "
            "guarded only by the inspector chain",
            agents,
            agents_note=note,
        )
    network = agent_reach() if agents.startswith("confined") else ()
    return ConfinementStatus(
        status.available, status.describe(), agents, agents_unconfined, note, network
    )


def host_reports(state_dir: Path) -> list[HostReport]:
    """`[[hosts]]` from the config, each checked over SSH (in parallel: a
    host that does not answer must not hold up the others)."""
    from concurrent.futures import ThreadPoolExecutor

    from .config import load_config
    from .hosts.probe import probe

    hosts = load_config().hosts
    if not hosts:
        return []
    with ThreadPoolExecutor(max_workers=min(8, len(hosts))) as pool:
        return list(pool.map(lambda h: probe(h, state_dir), hosts))
