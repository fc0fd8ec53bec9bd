"""What screens and widgets may use of the console app: its owner (the
supervisor's surface), the session actions, and what the console knows about
its own state. The app (`tui/app.py`) is a `ConsoleApp`; screens and widgets
name this class, never the app, so the app imports its screens and nothing
imports the app back (the import contract "the console's floors")."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

from textual.app import App

from .session_actions import SessionActions

if TYPE_CHECKING:
    from corral.supervisor.models import SessionSummary
    from corral.supervisor.remote import DiscussionsSurface, OwnerSurface


class ConsoleApp(App[None]):
    """The console as its screens see it; `CorralApp` fills it in."""

    # the supervisor has opened (until then the board shows `first_rows`)
    opened: asyncio.Event
    # the board's first full frame is out: what loads after it may start
    board_shown: asyncio.Event
    mount_done: bool  # Textual writes no frame until the mount handler returned
    default_repo: Path | None
    first_rows: list[SessionSummary] | None
    agents_note: str  # "agents unconfined: <why>" on the board's header ("": all confined)
    keys: dict[str, str]  # action -> key, from [keys]

    def __init__(self) -> None:
        super().__init__()
        self.actions = SessionActions(self)

    @property
    def supervisor(self) -> OwnerSurface:
        raise NotImplementedError

    @property
    def discussions(self) -> DiscussionsSurface:
        """The owner's discussions (never a copy of another process's)."""
        raise NotImplementedError

    def host_names(self) -> list[str]:
        raise NotImplementedError

    def report_unexpected(self, where: str, exc: BaseException) -> None:
        raise NotImplementedError

    def desktop_notify(self, title: str, body: str) -> None:
        raise NotImplementedError
