"""Confinement: one bubblewrap policy for contract checks, the built-in
engine's shell and external agents' panes (unless the operator opts out).

`SandboxPolicy` says what a run may touch (the `[sandbox]` table);
`allowlist` says what any run may see at all; a `Grant` is what one kind of
run adds (an agent: its terminal, its own config paths, its program, its
hooks file); an agent's network is an allow-list (`network`: what it may
reach; `netproxy`: the owner's proxy; `netstart`: the command line that
starts it; `netrelay`: the relay inside its namespace, its listeners bound
by `netbind.pl` when perl is there); `confined_argv` turns a command, the policy and a
grant into the `bwrap` command line; `launch_agent` decides whether an
agent's pane command is confined and says so, and puts an unconfined one
under the pane keeper (`keeper`: nothing it starts outlives it);
`sandbox_status` says (once per process) whether a sandbox can run here and,
if not, why.

Decision — git inside: nothing of the real repository is writable. Each
worktree gets a private git dir from corral's state dir, bound over its admin
dir (HEAD, a copy of the index, read-only copies of the operator's refs, its
own objects with the real store as read-only alternates), so status, commit,
stash and gc work and persist across sandboxed runs while no object or ref of
the operator's can be deleted or changed (see `gitview`). corral never reads
what a run left there: it reviews the worktree's files. Live read-only ref
directories with the shared packed-refs were rejected: `git gc` inside could
then not pack its own refs.
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
