"""Confinement: one bubblewrap policy for contract checks, the built-in
engine's shell and external agents' panes (unless the operator opts out).

`SandboxPolicy` says what a run may touch (the `[sandbox]` table);
`allowlist` says what any run may see at all; a `Grant` is what one kind of
run adds (an agent: the network, its terminal, its own config paths, its
program, its hooks file); `confined_argv` turns a command, the policy and a
grant into the `bwrap` command line; `launch_agent` decides whether an
agent's pane command is confined and says so, and puts an unconfined one
under the pane keeper (`keeper`: nothing it starts outlives it);
`sandbox_status` says (once per process) whether a sandbox can run here and,
if not, why.

Decision — `git stash` inside: the shared git dir stays read-only, and each
worktree gets a private view of it from corral's state dir, bound over it,
holding the live real entries read-only (refs subdirectories, packed refs,
HEAD, config) and whatever git writes beside them (`refs/stash`, its reflog,
lock files). Stash, list and pop work and persist across sandboxed runs of
that worktree; branch listing shows the user's branches as they are; the
user's refs, packed refs and HEAD are never written (see `gitview`). A copy
in the private view was rejected (it goes stale and needs corral to read
what a run wrote); an overlay needs bubblewrap 0.9+.
"""

from .agent import AgentLaunch, launch_agent
from .argv import confined_argv
from .policy import Grant, SandboxPolicy, active_policy, set_active_policy
from .status import SandboxStatus, sandbox_status

__all__ = [
    "AgentLaunch",
    "Grant",
    "SandboxPolicy",
    "SandboxStatus",
    "active_policy",
    "confined_argv",
    "launch_agent",
    "sandbox_status",
    "set_active_policy",
]
