"""The agent's live terminal inside the console.

Shows the pane's last captured screen with its colours (the supervisor keeps
it in memory from its batched captures; this widget never calls tmux). When
focused, keystrokes go to the agent; `ctrl+g` leaves. `A` (on the session
screen) attaches the real terminal instead.
"""

from __future__ import annotations

from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.widgets import Static

KEYMAP = {
    "enter": "Enter",
    "escape": "Escape",
    "tab": "Tab",
    "backspace": "BSpace",
    "delete": "DC",
    "up": "Up",
    "down": "Down",
    "left": "Left",
    "right": "Right",
    "home": "Home",
    "end": "End",
    "pageup": "PPage",
    "pagedown": "NPage",
    "space": "Space",
}
LEAVE_KEY = "ctrl+g"


class TerminalView(Static, can_focus=True):
    BINDINGS = [Binding(LEAVE_KEY, "leave", "Leave terminal")]

    DEFAULT_CSS = """
    TerminalView {
        height: auto;
        min-height: 6;
        border: round $primary-background;
        padding: 0 1;
    }
    TerminalView:focus {
        border: round $accent;
    }
    """

    def __init__(self, session_id: str, **kw: object) -> None:
        super().__init__("", **kw)  # type: ignore[arg-type]
        self.session_id = session_id
        self._version = -2

    def on_mount(self) -> None:
        self.border_title = "agent terminal (enter to type into it, ctrl+g to leave)"
        self.set_interval(0.25, self.refresh_screen)
        self.refresh_screen()

    @property
    def supervisor(self):  # type: ignore[no-untyped-def]
        return self.app.supervisor  # type: ignore[attr-defined]

    def refresh_screen(self) -> None:
        version = self.supervisor.agent_screen_version(self.session_id)
        if version == self._version:
            return
        self._version = version
        screen = self.supervisor.agent_screen(self.session_id)
        if screen is None:
            self.display = False
            return
        self.display = True
        rows = screen.ansi or screen.lines
        while rows and not Text.from_ansi(rows[-1]).plain.strip():
            rows = rows[:-1]
        self.update(Text.from_ansi("\n".join(rows[-40:])))

    async def on_key(self, event: events.Key) -> None:
        if event.key == LEAVE_KEY:
            return
        key = KEYMAP.get(event.key)
        if key is None and event.key.startswith("ctrl+") and len(event.key) == 6:
            key = "C-" + event.key[-1]
        if key is None and event.character and event.is_printable:
            key = event.character
        if key is None:
            return
        event.stop()
        event.prevent_default()
        try:
            await self.supervisor.send_keys_to_agent(self.session_id, [key])
        except Exception as exc:  # the pane is gone: say so once
            self.notify(str(exc), severity="warning")

    def action_leave(self) -> None:
        self.screen.focus_next()
