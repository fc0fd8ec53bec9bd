"""The pane backend seam. tmux (`tmux.py`) and pty (`pty.py`) implement it.

A pane belongs to exactly one owner, `"<session id>:<incarnation>"`. Every side
effect (send, kill, resize) re-checks that the pane still carries that owner,
so a late action can never touch a replacement. Methods block;
the supervisor calls them through `asyncio.to_thread`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol


class PaneError(Exception):
    """A pane operation failed; the message says what to do."""


class PaneGone(PaneError):
    """The pane no longer exists, or now belongs to another owner."""


class HostDown(PaneError):
    """The pane's host cannot be reached now; the pane may well be running,
    so this is never read as an exit."""


def owner_of(session_id: str, incarnation: int) -> str:
    return f"{session_id}:{incarnation}"


def incarnation_of(owner: str) -> int | None:
    """The incarnation an owner marker names (None: not one of ours)."""
    _, _, tail = owner.rpartition(":")
    return int(tail) if tail.isdigit() else None


@dataclass(frozen=True)
class PaneSpec:
    session_id: str
    incarnation: int
    name: str  # window name shown in tmux, e.g. "corral-1a2b3c4d"
    cwd: Path
    argv: list[str]
    env: dict[str, str]  # the complete, already scrubbed environment
    width: int = 200
    height: int = 50

    @property
    def owner(self) -> str:
        return owner_of(self.session_id, self.incarnation)


@dataclass(frozen=True)
class PaneHandle:
    """Enough to find a pane again and to prove it is still ours."""

    backend: str  # "tmux" | "pty"
    pane_id: str  # tmux "%12", or the pty's own id
    owner: str
    pid: int | None = None


@dataclass
class PaneInfo:
    """One row of a sweep: cheap facts about a pane, no screen content."""

    handle: PaneHandle
    alive: bool
    current_command: str = ""
    exit_status: int | None = None
    activity: float = 0.0  # last output time (epoch seconds) as the backend knows it
    width: int = 0
    height: int = 0


@dataclass
class Screen:
    """What a pane shows now: plain lines (for status heuristics), the same
    with ANSI styling (for the console's terminal view), and the cursor."""

    lines: list[str]
    ansi: list[str] = field(default_factory=list)
    cursor_x: int = 0
    cursor_y: int = 0
    width: int = 0
    height: int = 0

    def tail(self, n: int = 30) -> list[str]:
        lines = list(self.lines)
        while lines and not lines[-1].strip():
            lines.pop()
        return lines[-n:]


class PaneBackend(Protocol):
    name: str

    def spawn(self, spec: PaneSpec) -> PaneHandle:
        """Start `spec.argv` in a new pane; raises PaneError and leaves nothing behind."""
        ...

    def sweep(self) -> dict[str, PaneInfo]:
        """All of our panes by owner, in ONE batched call (no per-pane subprocess)."""
        ...

    def capture(self, handles: list[PaneHandle]) -> dict[str, Screen]:
        """Screens of the given panes by owner, batched (one call for all)."""
        ...

    def scrollback(self, handle: PaneHandle, lines: int = 2000) -> list[str]:
        """Up to `lines` of history plus the screen, oldest first (ANSI kept)."""
        ...

    def send_text(
        self, handle: PaneHandle, text: str, *, enter: bool = True, confirm_timeout: float = 5.0
    ) -> None:
        """Bracketed paste `text`, wait until it shows on screen, then Enter.
        Serialised per pane. Raises PaneGone if the owner changed."""
        ...

    def send_keys(self, handle: PaneHandle, keys: list[str]) -> None:
        """Named keys (tmux names: "Enter", "Escape", "Down", "1", "C-c"...)."""
        ...

    def resize(self, handle: PaneHandle, width: int, height: int) -> None: ...

    def kill(self, handle: PaneHandle, timeout: float = 5.0) -> None:
        """Stop the pane's whole process group and wait for it (SIGTERM, then
        SIGKILL at the deadline). Killing a pane that is gone is not an error."""
        ...

    def attach_argv(self, handle: PaneHandle) -> list[str] | None:
        """A command that attaches a real terminal to this pane, if possible."""
        ...

    def close(self) -> None:
        """Release backend resources (panes keep running under tmux)."""
        ...
