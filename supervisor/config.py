"""Supervisor settings, read once from `~/.config/corral/config.toml`
(`[supervisor]` table, plus `[sandbox]` for confinement and `[[hosts]]` for
other machines; `CORRAL_CONFIG`
names another file). A missing file
gives the defaults; a file that does not parse is a clear error naming it.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .errors import ConfigError
from .hosts.settings import HostSettings, unique_hosts
from .paths import config_path


class Retention(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_sessions: int = Field(default=500, ge=1)
    max_age_days: float = Field(default=30, gt=0)


class SandboxSettings(BaseModel):
    """`[sandbox]`: checks, the built-in shell and agents run under bubblewrap;
    `agents = false` (or `[agents.<name>] sandbox = false` for one agent)
    opts agents out, and the board and `corral doctor` say so."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True  # false: run unconfined (the inspector chain still applies)
    writable: list[str] = Field(default_factory=list)  # caches a run may write (~ expands)
    hidden: list[str] = Field(default_factory=list)  # more paths a run never sees
    shell_network: bool = False  # the built-in engine's shell may reach the network
    agents: bool = True  # external agents' panes run confined too (with network)


class McpSettings(BaseModel):
    """What callers of the MCP tools may do (table `[mcp]`). Approval of a
    diff is never theirs: it is always the operator's, in the console."""

    model_config = ConfigDict(extra="forbid")

    # confirm gate 1 for the caller when it gives the contract itself
    callers_may_confirm: bool = False
    # an agent running inside corral (CORRAL_INVOKED_BY names corral) may start runs
    agents_may_start: bool = False
    http: bool = True  # serve MCP over HTTP on 127.0.0.1 beside the control socket


class SupervisorConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    default_max_iterations: int = Field(default=8, ge=1)
    repair_invokes: int = Field(default=2, ge=0)
    # A plain failure removes its worktree; a budget cut, a crash (the owner
    # went away mid-run) and a drafting failure always keep theirs.
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
    # Agents without hooks read idle after their screen stayed unchanged this
    # long at a prompt-like last line ([agents.<name>] idle_quiet_secs overrides).
    idle_quiet_secs: float = Field(default=3.0, gt=0, le=600)
    # How long an ACP agent has to answer `initialize` and `session/new`.
    acp_start_timeout_secs: float = Field(default=60, gt=0)
    retention: Retention = Field(default_factory=Retention)
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)
    mcp: McpSettings = Field(default_factory=McpSettings)
    hosts: list[HostSettings] = Field(default_factory=list)  # [[hosts]]: other machines
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
