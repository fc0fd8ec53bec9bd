"""`[[hosts]]` in the config file: where agents may run besides here.

Kept apart from `config.py` so the SSH layer can be read and tested without
the rest of the supervisor's settings."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator

_HOST_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")


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
