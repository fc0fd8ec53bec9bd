"""`corral panes`: every pane with corral's owner marker, and the session it
belongs to. A pane with no matching session is a stray: shown, never killed."""

from __future__ import annotations

from corral.supervisor.housekeeping import agent_panes
from corral.supervisor.paths import default_state_dir


def list_panes() -> int:
    panes = agent_panes(default_state_dir())
    if not panes:
        print("no corral panes are running")
    for pane in panes:
        if pane.session_id is None or pane.session_state is None:
            who = "STRAY (no session)"
        else:
            who = f"{pane.session_id[-8:]} {pane.session_state.value}"
        life = "alive" if pane.alive else f"exited ({pane.exit_status})"
        print(f"{pane.pane_id:<6} {life:<14} {pane.command:<12} {who}")
    return 0
