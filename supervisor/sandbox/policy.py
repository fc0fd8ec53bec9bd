"""What a confined run may touch beyond its worktree (the operator's
`[sandbox]` config table), the policy this process applies, and the
`Grant` one kind of run adds to it (an agent: its own config dirs, its hooks
file, its program, its terminal and the network; a check: nothing)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class SandboxPolicy:
    enabled: bool = True
    writable: tuple[Path, ...] = ()  # declared caches, bound read-write
    hidden: tuple[Path, ...] = ()  # extra paths hidden (an empty dir, or /dev/null for a file)
    state_dir: Path | None = None  # corral's own state: hidden except the run's worktree
    shell_network: bool = False  # the built-in engine's shell may reach the network
    agents: bool = True  # external agents' panes run confined too (opt out: false)
    # a confined agent's network: "allowlist" (its own namespace, only what
    # `network.agent_allow` lists, through corral's proxy) or "host" (unsafe:
    # the host's loopback services and abstract sockets are one connect away)
    network: str = "allowlist"
    network_allow: tuple[str, ...] = ()  # the operator's extra hosts (registries, a local model)

    def confines_agent(self, choice: bool | None) -> bool:
        """Whether an agent runs confined: its own `[agents.<name>] sandbox`
        when set, else `[sandbox] agents`; never when the sandbox is off."""
        wanted = self.agents if choice is None else choice
        return self.enabled and wanted


@dataclass(frozen=True)
class Grant:
    """What one run may use beyond the policy."""

    # Files or dirs bound read-write (those that exist). HOME itself is a
    # private tmpfs: agents write their own config files by a temp file
    # beside them and a rename; over a bound file the rename fails with
    # EBUSY and they fall back to writing it in place, through the bind.
    writable: tuple[Path, ...] = ()
    readable: tuple[Path, ...] = ()  # shown read-only (those that exist)
    terminal: bool = False  # keeps its controlling terminal (an agent in its pane)
    programs: tuple[Path, ...] = ()  # programs whose install prefix is shown read-only
    # the private /tmp and /var/tmp are this host dir's `tmp` and `var/tmp`
    # (not a tmpfs), so corral can read what the run left there after it ended
    # (an ACP terminal's writes outside the worktree: `acp.contained`)
    scratch: Path | None = None


_active = SandboxPolicy()


def active_policy() -> SandboxPolicy:
    """The policy checks, the native shell and agents run under in this process."""
    return _active


def set_active_policy(policy: SandboxPolicy) -> None:
    global _active
    _active = policy
