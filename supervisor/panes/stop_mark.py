"""The mark `corral panes stop` leaves for the owner: the pane it stops was
stopped on purpose, so the session's agent is not started again as after a
crash. The mark names the pane's owner marker, so it speaks only of that
incarnation; a later pane of the same session is not covered by it."""

from __future__ import annotations

import contextlib
from pathlib import Path

MARK = "stopped"


def agents_dir(state_dir: Path) -> Path:
    """Where each session's agent files live (hooks, this mark)."""
    return state_dir / "agents"


def mark_stopped(agents: Path, session_id: str, owner: str) -> None:
    """Say, before the pane is killed, that this stop was asked for."""
    folder = agents / session_id
    folder.mkdir(parents=True, exist_ok=True)
    (folder / MARK).write_text(owner + "\n", encoding="utf-8")


def stopped_on_purpose(agents: Path, session_id: str, owner: str) -> bool:
    """Whether the pane with this owner marker was stopped by `corral panes stop`."""
    with contextlib.suppress(OSError):
        return (agents / session_id / MARK).read_text(encoding="utf-8").strip() == owner
    return False
