"""Supervisor settings, read once from `~/.config/corral/config.toml`
(`[supervisor]` table, plus `[sandbox]` for confinement, `[notify]` for
notifications, `[budget]` and `[prices]` for what sessions cost, and
`[[hosts]]` for other machines; `CORRAL_CONFIG`
names another file). A missing file
gives the defaults; a file that does not parse is a clear error naming it.
"""

from __future__ import annotations

import re
import shlex
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .errors import ConfigError
from .paths import config_path

# `[[hosts]]`: where agents may run besides here (the SSH layer is hosts/)
_HOST_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")
# `[sandbox] network_allow`: the grammar `sandbox.network.parse_entry` reads
_ALLOW_ENTRY = re.compile(
    r"https?://(\[[0-9A-Fa-f:.]+\]|[^\s/:\[\]]+)(:\d{1,5})?(/\S*)?"
    r"|\[[0-9A-Fa-f:.]+\](:\d{1,5})?|(\*\.)?[A-Za-z0-9_.-]+(:\d{1,5})?"
)


class HostSettings(BaseModel):
    """One `[[hosts]]` entry. `destination` is anything `ssh` accepts
    (`user@host`, an alias from `~/.ssh/config`); `state_dir` is corral's
    directory on that host (`~/` means the remote user's home)."""

    model_config = ConfigDict(extra="forbid")

    name: str
    destination: str
    state_dir: str = "~/.local/state/corral"
    max_sessions: int = Field(default=4, ge=1)
    ssh_options: list[str] = Field(
        default_factory=list
    )  # extra `ssh` arguments, e.g. ["-p", "2222"]

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _HOST_NAME.fullmatch(value) or value == "local":
            raise ValueError("a host name is letters, digits, . _ - (and not 'local')")
        return value

    @field_validator("destination")
    @classmethod
    def _destination(cls, value: str) -> str:
        if not value.strip() or value.startswith("-") or any(c.isspace() for c in value):
            raise ValueError("the SSH destination must be one word that does not start with '-'")
        return value


def unique_hosts(hosts: list[HostSettings]) -> list[HostSettings]:
    """Refuse two hosts with one name: a session names its host by name."""
    seen: set[str] = set()
    for host in hosts:
        if host.name in seen:
            raise ValueError(f"host {host.name!r} is configured twice")
        seen.add(host.name)
    return hosts


class Retention(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_sessions: int = Field(default=500, ge=1)
    max_age_days: float = Field(default=30, gt=0)


def check_allow_entries(entries: Iterable[str]) -> Iterable[str]:
    """`network_allow` entries as given; a ValueError names the first that is not a host."""
    for entry in entries:
        if not _ALLOW_ENTRY.fullmatch(entry.strip()):
            raise ValueError(
                f"{entry!r} is not a host: write pypi.org, pypi.org:443, *.example.com, "
                "127.0.0.1:8080, [::1]:8080 or an http(s) URL"
            )
    return entries


class SandboxSettings(BaseModel):
    """`[sandbox]`: checks, the built-in shell and agents run under bubblewrap;
    `agents = false` (or `[agents.<name>] sandbox = false` for one agent)
    opts agents out, and the board and `corral doctor` say so."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True  # false: run unconfined (the inspector chain still applies)
    writable: list[str] = Field(default_factory=list)  # caches a run may write (~ expands)
    hidden: list[str] = Field(default_factory=list)  # more paths a run never sees
    shell_network: bool = False  # the built-in engine's shell may reach the network
    agents: bool = True  # external agents' panes run confined too
    # a confined agent's network: "allowlist" (its own namespace; only its model
    # endpoints and `network_allow`, through corral's proxy) or "host" (unsafe:
    # the host's loopback services and abstract unix sockets are reachable)
    network: Literal["allowlist", "host"] = "allowlist"
    network_allow: list[str] = Field(default_factory=list)  # hosts every confined agent may reach

    @field_validator("network_allow")
    @classmethod
    def _allow_entries(cls, value: list[str]) -> list[str]:
        return list(check_allow_entries(value))


class McpSettings(BaseModel):
    """What callers of the MCP tools may do (table `[mcp]`). Approval of a
    diff is never theirs: it is always the operator's, in the console."""

    model_config = ConfigDict(extra="forbid")

    # confirm gate 1 for the caller when it gives the contract itself
    callers_may_confirm: bool = False
    # an agent running inside corral (CORRAL_INVOKED_BY names corral) may start runs
    agents_may_start: bool = False
    http: bool = True  # serve MCP over HTTP on 127.0.0.1 beside the control socket


Hook = str | list[str] | None


class NotifySettings(BaseModel):
    """`[notify]`: what happens when a session starts needing you or finishes
    without you having done it. A hook is the operator's own command: a string
    split like a shell would (no shell runs it) or an argv list; it learns the
    session from `CORRAL_*` environment variables, never from its command line."""

    model_config = ConfigDict(extra="forbid")

    terminal: bool = True  # the console writes OSC 9 / OSC 777 to its terminal
    desktop: bool = True  # `notify-send`, where it is installed and a desktop runs
    on_needs_you: Hook = None
    on_finished: Hook = None
    on_over_budget: Hook = None
    hook_timeout_secs: float = Field(default=30, gt=0)

    @field_validator("on_needs_you", "on_finished", "on_over_budget")
    @classmethod
    def _argv(cls, value: Hook) -> Hook:
        if value is None:
            return None
        argv = shlex.split(value) if isinstance(value, str) else value
        if not argv or not argv[0].strip():
            raise ValueError("a hook needs a command (a string or an argv list), or leave it out")
        return argv


class AdoptionSettings(BaseModel):
    """`[adoption]`: the opt-in scanner. Off by default: corral adopts only the
    panes you name (`corral adopt`). On, it looks at your tmux servers every
    `scan_secs` and adopts each agent pane it finds that carries no marker
    (one you released stays yours); `sockets` adds servers to the default ones."""

    model_config = ConfigDict(extra="forbid")

    scan: bool = False
    scan_secs: float = Field(default=10, gt=0)
    sockets: list[str] = Field(default_factory=list)


class BudgetSettings(BaseModel):
    """`[budget]`: what one session may use before its row warns (and one
    notice says so). Unset: no limit."""

    model_config = ConfigDict(extra="forbid")

    per_session_usd: float | None = Field(default=None, gt=0)
    per_session_tokens: int | None = Field(default=None, gt=0)


class ModelPrice(BaseModel):
    """`[prices."<model>"]`: USD per million tokens. A cache price left out
    is the input price (never less than it may be)."""

    model_config = ConfigDict(extra="forbid")

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_write: float | None = Field(default=None, ge=0)
    cache_read: float | None = Field(default=None, ge=0)


class SupervisorConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    default_max_iterations: int = Field(default=8, ge=1)
    repair_invokes: int = Field(default=2, ge=0)
    # Read for older configs and ignored: every failed session keeps its
    # worktree (a failure is not the operator's decision to throw work away).
    keep_workspace_on_failure: bool = False
    max_replay_events: int = Field(default=2000, ge=0)  # 0 = unbounded
    max_check_timeout_secs: int = Field(default=3600, ge=1)
    max_session_wall_secs: int = Field(default=3600, ge=0)  # 0 = unbounded
    ask_user_timeout_secs: float = Field(default=600, gt=0)
    finished_retention_secs: float = Field(default=1800, ge=0)
    disk_gc_interval_secs: float = Field(default=3600, ge=0)
    subscriber_backlog: int = Field(default=4096, ge=1)
    watcher_shed_secs: float = Field(default=10, gt=0)
    # How often a worktree waiting for approval is compared with its verified tree.
    verified_watch_secs: float = Field(default=3, gt=0)
    # How often live sessions' git stats (files, +/- lines, base lead) are read.
    git_stats_secs: float = Field(default=5, gt=0)
    # How often agents' own usage records (tokens, cost) are read further.
    usage_secs: float = Field(default=10, gt=0)
    # Agents without hooks read idle after their screen stayed unchanged this
    # long at a prompt-like last line ([agents.<name>] idle_quiet_secs overrides).
    idle_quiet_secs: float = Field(default=3.0, gt=0, le=600)
    # After this much active work (seconds an agent reads running) a session's
    # row and log say a fresh context is due; 0 = never (session/active_context.py).
    context_refresh_after_active_secs: float = Field(default=0, ge=0)
    # How long an ACP agent has to answer `initialize` and `session/new`.
    acp_start_timeout_secs: float = Field(default=60, gt=0)
    retention: Retention = Field(default_factory=Retention)
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)
    mcp: McpSettings = Field(default_factory=McpSettings)
    notify: NotifySettings = Field(default_factory=NotifySettings)
    hosts: list[HostSettings] = Field(default_factory=list)  # [[hosts]]: other machines
    budget: BudgetSettings = Field(default_factory=BudgetSettings)
    adoption: AdoptionSettings = Field(default_factory=AdoptionSettings)
    prices: dict[str, ModelPrice] = Field(default_factory=dict)  # over the built-in table
    # Where a foreman places its subtasks: on the hosts above (up to each one's
    # max_sessions) and on this machine; either can be turned off.
    foreman_hosts: bool = True
    foreman_local: bool = True
    # How long a foreman subtask waits for its host to answer again before it
    # is given up there and re-placed (elsewhere when another place has room).
    foreman_host_wait_secs: float = Field(default=60, gt=0)

    @field_validator("hosts")
    @classmethod
    def _hosts(cls, value: list[HostSettings]) -> list[HostSettings]:
        return unique_hosts(value)


def load_config(path: Path | None = None) -> SupervisorConfig:
    path = path or config_path()
    if not path.exists():
        return SupervisorConfig()
    try:
        data: dict[str, Any] = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc}); fix or remove the file") from exc
    section = data.get("supervisor", {})
    if not isinstance(section, dict):
        raise ConfigError(f"{path}: [supervisor] must be a table")
    sandbox = data.get("sandbox", {})
    if not isinstance(sandbox, dict):
        raise ConfigError(f"{path}: [sandbox] must be a table")
    if sandbox:
        section = {**section, "sandbox": sandbox}
    mcp = data.get("mcp", {})
    if not isinstance(mcp, dict):
        raise ConfigError(f"{path}: [mcp] must be a table")
    if mcp:
        section = {**section, "mcp": mcp}
    for table in ("notify", "budget", "prices", "adoption"):
        value = data.get(table, {})
        if not isinstance(value, dict):
            raise ConfigError(f"{path}: [{table}] must be a table")
        if value:
            section = {**section, table: value}
    hosts = data.get("hosts", [])
    if not isinstance(hosts, list):
        raise ConfigError(f"{path}: hosts must be [[hosts]] tables")
    if hosts:
        section = {**section, "hosts": hosts}
    try:
        return SupervisorConfig.model_validate(section)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
        )
        raise ConfigError(f"{path}: [supervisor] {problems}") from exc
