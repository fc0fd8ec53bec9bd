"""`corral panes`: every pane with corral's owner marker, here and on the
configured hosts (shown as `host:%id`), and the session it belongs to. A pane with no matching session is a stray: shown, never killed
by listing. `corral panes stop <owner|session id|pane id>… | --strays | --all`
stops panes (strays included): the agent's process group, then the window,
and says so only once it saw the pane gone."""

from __future__ import annotations

import sys

from corral.supervisor.pane_cleanup import AgentPane, agent_panes, attach_command, stop_panes
from corral.supervisor.paths import default_state_dir
from corral.supervisor.states import said

from .common import fail
from .output import say


def _who(pane: AgentPane) -> str:
    if pane.session_id is None or pane.session_state is None:
        return "STRAY (no session)"
    return f"{pane.session_id[-8:]} {said(pane.session_state)}"


def _where(pane: AgentPane) -> str:
    return f"{pane.host}:{pane.pane_id}" if pane.host else pane.pane_id


def list_panes() -> int:
    listing = agent_panes(default_state_dir())
    panes = listing.panes
    if not panes:
        say("no corral panes are running")
    for pane in panes:
        life = "alive" if pane.alive else f"exited ({pane.exit_status})"
        say(f"{_where(pane):<6} {life:<14} {pane.command:<12} {_who(pane)}  {pane.owner}")
    for host, reason in listing.unreachable.items():
        say(f"host {host} did not answer, so its panes are not listed: {reason}")
    if any(p.stray for p in panes):
        say("stop strays with: corral panes stop --strays")
    if any(not p.host for p in panes):
        import shlex

        say(f"watch them all: {shlex.join(attach_command())}  (detach: the tmux prefix, then d)")
    return 0


def stop(which: list[str], *, strays: bool, every: bool) -> int:
    if not (which or strays or every):
        return fail(
            "say which panes to stop: an owner marker, a session id, a pane id, --strays or --all"
        )
    results = stop_panes(default_state_dir(), which, strays=strays, every=every)
    if not results:
        say("no corral pane matches; nothing stopped (see `corral panes`)")
        return 0 if (strays or every) else 1
    code = 0
    for r in results:
        if r.gone:
            say(f"stopped {_where(r.pane)} ({_who(r.pane)}, {r.owner})")
        else:
            why = f": {r.error}" if r.error else ""
            say(f"could not stop {_where(r.pane)} ({r.owner}){why}", file=sys.stderr)
            code = 1
    return code
