"""`corral panes`: every pane with corral's owner marker, and the session it
belongs to. A pane with no matching session is a stray: shown, never killed
by listing. `corral panes stop <owner|session id|pane id>… | --strays | --all`
stops panes (strays included): the agent's process group, then the window,
and says so only once it saw the pane gone."""

from __future__ import annotations

import sys

from corral.supervisor.housekeeping import AgentPane, agent_panes, attach_command, stop_panes
from corral.supervisor.paths import default_state_dir

from .common import fail


def _who(pane: AgentPane) -> str:
    if pane.session_id is None or pane.session_state is None:
        return "STRAY (no session)"
    return f"{pane.session_id[-8:]} {pane.session_state.value}"


def list_panes() -> int:
    panes = agent_panes(default_state_dir())
    if not panes:
        print("no corral panes are running")
    for pane in panes:
        life = "alive" if pane.alive else f"exited ({pane.exit_status})"
        print(f"{pane.pane_id:<6} {life:<14} {pane.command:<12} {_who(pane)}  {pane.owner}")
    if any(p.stray for p in panes):
        print("stop strays with: corral panes stop --strays")
    if panes:
        import shlex

        print(f"watch them all: {shlex.join(attach_command())}  (detach: the tmux prefix, then d)")
    return 0


def stop(which: list[str], *, strays: bool, every: bool) -> int:
    if not (which or strays or every):
        return fail(
            "say which panes to stop: an owner marker, a session id, a pane id, --strays or --all"
        )
    results = stop_panes(default_state_dir(), which, strays=strays, every=every)
    if not results:
        print("no corral pane matches; nothing stopped (see `corral panes`)")
        return 0 if (strays or every) else 1
    code = 0
    for r in results:
        if r.gone:
            print(f"stopped {r.pane.pane_id} ({_who(r.pane)}, {r.owner})")
        else:
            why = f": {r.error}" if r.error else ""
            print(f"could not stop {r.pane.pane_id} ({r.owner}){why}", file=sys.stderr)
            code = 1
    return code
