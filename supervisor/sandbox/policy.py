"""What a confined run may touch beyond its worktree (the operator's
`[sandbox]` config table), and the policy this process applies."""

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


_active = SandboxPolicy()


def active_policy() -> SandboxPolicy:
    """The policy checks and the native shell run under in this process."""
    return _active


def set_active_policy(policy: SandboxPolicy) -> None:
    global _active
    _active = policy
