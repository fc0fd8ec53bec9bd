"""The operator's per-agent settings: `[agents.<name>]` tables of
`~/.config/corral/config.toml` (`CORRAL_CONFIG` names another file).

    [agents.claude]
    env_allow = ["MY_GATEWAY_TOKEN"]     # passed to claude's pane when set

    [agents.custom]                      # every custom: and oneshot: command line
    env_allow = ["MYTOOL_*"]
    sandbox = false                      # unconfined whatever `[sandbox] agents` says
    writable = ["~/.mytool"]             # its own config, writable when confined
    network_allow = ["mytool.example"]   # hosts it may reach besides [sandbox] network_allow
    idle_quiet_secs = 2                  # the quiet rule's N for this agent

`idle_quiet_secs` (agents without hooks: custom, gemini, aider, opencode) is
how long a screen must stay unchanged at a prompt-like last line before the
agent reads idle; `[supervisor] idle_quiet_secs` sets it for every agent.

`env_allow` adds variables (exact names or `fnmatch` patterns) to the ones the
agent's profile already passes through the scrub: a secret the operator's own
agent needs reaches that agent and nothing else. `sandbox` overrides the
global `[sandbox] agents` for this agent; `writable` adds paths to the ones
its profile keeps writable in the sandbox (its config and credentials). A missing file or table adds
nothing; a malformed one is a clear error naming the file.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..config import check_allow_entries
from ..errors import ConfigError
from ..paths import config_path
from .base import AgentProfile
from .profiles import PROFILES


def agent_names() -> tuple[str, ...]:
    """The names `[agents.<name>]` may take: every registered agent, and `custom`."""
    return (*PROFILES, "custom")


# A variable name, or a pattern of one; never `=` or blanks.
_ENTRY = re.compile(r"^[^\s=]+$")


class AgentSettings(BaseModel):
    """One `[agents.<name>]` table."""

    model_config = ConfigDict(extra="forbid")

    env_allow: tuple[str, ...] = ()
    sandbox: bool | None = None
    writable: tuple[str, ...] = ()
    network_allow: tuple[str, ...] = ()  # hosts this agent may reach besides `[sandbox]`'s
    idle_quiet_secs: float | None = Field(default=None, gt=0, le=600)

    @field_validator("network_allow")
    @classmethod
    def _hosts(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(check_allow_entries(value))

    @field_validator("env_allow")
    @classmethod
    def _names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for entry in value:
            if not _ENTRY.match(entry):
                raise ValueError(
                    f"{entry!r} is not a variable name; write names such as MY_TOKEN "
                    "or patterns such as MYTOOL_*"
                )
            if entry.strip("*?") == "":
                raise ValueError(
                    f"{entry!r} would pass every secret to the agent; name the variables it needs"
                )
        return value


def load_agent_settings(path: Path | None = None) -> dict[str, AgentSettings]:
    """Each configured agent's settings, by agent name (`claude`, …, `custom`)."""
    path = path or config_path()
    if not path.exists():
        return {}
    try:
        data: dict[str, Any] = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc}); fix or remove the file") from exc
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
    section = data.get("agents", {})
    if not isinstance(section, dict):
        raise ConfigError(f"{path}: [agents] must hold one table per agent, e.g. [agents.claude]")
    settings: dict[str, AgentSettings] = {}
    for name, table in section.items():
        if name not in agent_names():
            raise ConfigError(
                f"{path}: [agents.{name}] names no agent corral knows; "
                f"use one of {', '.join(agent_names())}"
            )
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: [agents.{name}] must be a table")
        try:
            settings[name] = AgentSettings.model_validate(table)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
            )
            raise ConfigError(f"{path}: [agents.{name}] {problems}") from exc
    return settings


def with_settings(
    profile: AgentProfile,
    settings: Mapping[str, AgentSettings],
    *,
    quiet_secs: float | None = None,
) -> AgentProfile:
    """`profile` with the operator's additions for it (none: `profile` itself).
    `quiet_secs` is the global quiet rule setting; the agent's own wins."""
    own = settings.get(profile.name)
    quiet = own.idle_quiet_secs if own is not None and own.idle_quiet_secs else quiet_secs
    if quiet is not None and quiet != profile.quiet_secs:
        profile = replace(profile, quiet_secs=quiet)
    if own is None:
        return profile
    return replace(
        profile,
        env_allow=(*profile.env_allow, *own.env_allow),
        writable=(*profile.writable, *own.writable),
        sandbox=profile.sandbox if own.sandbox is None else own.sandbox,
        network_allow=(*profile.network_allow, *own.network_allow),
    )
