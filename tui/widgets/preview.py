"""The board's live preview: the last screen of the selected session's agent
pane, beside or below the board (`p` shows or hides it).

It reads the screen the supervisor already keeps in memory from its batched
captures (never tmux), at the session terminal's pace, and only when the
version changed. Hidden, its timer is paused: it costs nothing. It never
resizes the agent's pane and takes no keys (`enter` opens the session for that).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import getters
from textual.timer import Timer
from textual.widgets import Static

from corral.supervisor.states import label, said

from ..console_app import ConsoleApp
from .terminal import screen_text

if TYPE_CHECKING:
    from corral.supervisor.models import SessionSummary

POLL_SECS = 0.25  # the session terminal's pace: no more polling than it does


class AgentPreview(Static):
    app = getters.app(ConsoleApp)

    DEFAULT_CSS = """
    AgentPreview {
        border: round $primary-background-lighten-2;
        padding: 0 1;
        overflow: hidden;
    }
    """

    def __init__(self, **kw: Any) -> None:
        super().__init__("", **kw)
        # an agent's links are dropped before they are drawn (terminal.py), so
        # Textual's pass over every segment of every line looking for one is
        # work for nothing: ~40 % of a redraw in the 100-session profile
        self.auto_links = False
        self.session_id: str | None = None
        self._version = -2
        self._timer: Timer | None = None
        self._said: str | None = None  # the sentence shown in place of a screen

    def on_mount(self) -> None:
        self._timer = self.set_interval(POLL_SECS, self.refresh_screen, pause=not self.display)
        self.border_subtitle = "p hides · enter opens"

    def show(self, visible: bool) -> None:
        """Show or hide; hidden, nothing is read until it is shown again."""
        self.display = visible
        if self._timer is not None:
            if visible:
                self._version = -2
                self._timer.resume()
                self.refresh_screen()
            else:
                self._timer.pause()

    def follow(self, session_id: str | None) -> None:
        """The board's cursor moved: show this session's agent."""
        if session_id == self.session_id:
            return
        self.session_id = session_id
        self._version = -2
        self.border_title = f"{label(session_id)} — agent terminal" if session_id else "preview"
        if self.display:
            self.refresh_screen()

    def refresh_screen(self) -> None:
        sid = self.session_id
        if sid is None:
            self._say("No session selected.")
            return
        if not self.app.opened.is_set():  # the stored rows: no agent is followed yet
            self._version = -2
            self._say("corral is opening: the agent's terminal shows then.")
            return
        supervisor = self.app.supervisor
        version = supervisor.agent_screen_version(sid)
        if version == self._version:
            return
        self._version = version
        screen = supervisor.agent_screen(sid)
        if screen is None:
            row = getattr(self.screen, "summaries", {}).get(sid)
            self._say(no_terminal_reason(row))
            return
        rows = max(1, self.content_size.height)
        text = screen_text(screen, last=rows)
        text.no_wrap = True
        text.overflow = "crop"
        self._said = None
        self.update(text, layout=False)  # its size is set by the board, never by the text

    def _say(self, words: str) -> None:
        """One dim sentence in place of a screen: repainted only when it
        changes, and never laid out (the preview's size is the board's)."""
        if words != self._said:
            self._said = words
            self.update(Text(words, style="dim"), layout=False)

    def on_resize(self) -> None:
        self._version = -2  # more or fewer lines fit now
        if self.display:
            self.refresh_screen()


def no_terminal_reason(row: SessionSummary | None) -> str:
    """Why a session shows no agent terminal, in one line."""
    if row is None:
        return "No agent terminal: this session is not on the board."
    if row.dormant:
        return "No agent terminal: its agent stopped and can resume (R revives it)."
    if row.state.is_terminal:
        return f"No agent terminal: the session has ended ({said(row.state)})."
    if row.needs_you is not None and row.needs_you.value == "contract":
        return "No agent terminal yet: the agent starts once you confirm the contract (c)."
    if not row.live:
        return "No agent terminal: this console does not run the session (stored state)."
    if not row.engine.startswith(("external:", "custom:", "foreman:")):
        return f"No agent terminal: {row.engine} does not run in a terminal."
    return "No agent terminal yet: the agent's pane has not started, or has closed."
