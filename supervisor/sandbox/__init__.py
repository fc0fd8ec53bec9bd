"""Confinement: one bubblewrap policy for contract checks and the built-in
engine's shell. `SandboxPolicy` says what a run may touch; `confined_argv`
turns a command and a policy into the `bwrap` command line; `sandbox_status`
says (once per process) whether a sandbox can run here and, if not, why."""

from .argv import confined_argv
from .policy import SandboxPolicy, active_policy, set_active_policy
from .status import SandboxStatus, sandbox_status

__all__ = [
    "SandboxPolicy",
    "SandboxStatus",
    "active_policy",
    "confined_argv",
    "sandbox_status",
    "set_active_policy",
]
