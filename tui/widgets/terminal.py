"""The agent's live terminal inside the console.

Shows the pane's last captured screen with its colours (the supervisor keeps
it in memory from its batched captures; this widget never calls tmux). When
focused, keystrokes go to the agent; `ctrl+g` leaves. `A` (on the session
screen) attaches the real terminal instead.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from rich.color import Color
from rich.style import Style
from rich.text import Span, Text
from textual import events, getters
from textual.binding import Binding
from textual.widgets import Static

from corral.supervisor.errors import swallowed

from ..console_app import ConsoleApp
from ..safe_text import made_visible

log = logging.getLogger("corral.tui.widgets.terminal")

if TYPE_CHECKING:
    from corral.supervisor.interface import AgentScreen
    from corral.supervisor.remote import OwnerSurface

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


def _plain_colour(colour: Color | None) -> Color | None:
    return None if colour is None or colour.is_default else colour


def _without_default_colours(text: Text) -> Text:
    """tmux resets colours with SGR 39/49, which Rich keeps as "the terminal's
    default" colour; inside the console that paints black boxes behind the
    agent's text. Dropping them lets the widget's own colours show through.
    The agent's colours are its screen; its links (OSC 8) and any control
    character Rich kept are not: links are dropped, controls shown as marks."""

    def fixed(span: Span) -> Span:
        style = span.style
        if isinstance(style, Style) and (style.link or style.meta):
            style = style.clear_meta_and_links()
            span = span._replace(style=style)
        if not isinstance(style, Style) or not (style.color or style.bgcolor):
            return span
        fg, bg = _plain_colour(style.color), _plain_colour(style.bgcolor)
        if fg is style.color and bg is style.bgcolor:
            return span
        return span._replace(style=style.without_color + Style(color=fg, bgcolor=bg))

    text.spans[:] = [fixed(span) for span in text.spans]
    return made_visible(text)


ROW_CACHE_LIMIT = 1024  # parsed rows kept: a few screens' worth
_parsed_rows: dict[str, Text] = {}


def _row_text(row: str) -> Text:
    """One ANSI row as Rich text (default colours dropped, made visible),
    parsed once: a streaming screen scrolls, so nearly every row of a new
    capture was a row of the one before, and parsing every row again was
    most of a preview's repaint. The kept text is shared: never changed."""
    text = _parsed_rows.get(row)
    if text is None:
        if len(_parsed_rows) >= ROW_CACHE_LIMIT:
            _parsed_rows.clear()
        # a row with no escape, control or line-break character is its own
        # text: Rich's ANSI decoder would only cost its time (most of a
        # preview's repaint when the cursor moves to another agent)
        parsed = Text(row) if row.isprintable() else Text.from_ansi(row)
        text = _parsed_rows[row] = _without_default_colours(parsed)
    return text


def shown_rows(screen: AgentScreen, last: int = 40) -> tuple[int, list[str]]:
    """(index of the first row shown, the rows shown, ANSI kept): trailing
    blank lines below the cursor dropped, then the `last` lines."""
    rows = screen.ansi or screen.lines
    plain = screen.lines if len(screen.lines) == len(rows) else None

    def blank(i: int) -> bool:  # from the plain lines when there are (nothing to parse)
        return not (plain[i] if plain is not None else _row_text(rows[i]).plain).strip()

    end = len(rows)
    while end > 0 and end - 1 > screen.cursor_y and blank(end - 1):
        end -= 1
    start = max(0, end - last) if last > 0 else end
    return start, list(rows[start:end])


def row_text(row: str) -> Text:
    """One ANSI row as Rich text, shown as the terminal view shows it (parsed
    once; the text is shared: never change it)."""
    return _row_text(row)


def screen_text(screen: AgentScreen, *, cursor: bool = False, last: int = 40) -> Text:
    """The pane's screen as Rich text, its colours kept: trailing blank lines
    below the cursor dropped, then the `last` lines; with `cursor`, the
    agent's cursor drawn reversed (while the operator types into it). Only
    the rows shown are parsed (each new row once, see `_row_text`)."""
    start, shown = shown_rows(screen, last)
    end = start + len(shown)
    texts = [_row_text(row) for row in shown]
    if cursor and start <= screen.cursor_y < end:
        line = texts[screen.cursor_y - start] = texts[screen.cursor_y - start].copy()
        x = screen.cursor_x
        if x >= len(line.plain):
            line.append(" " * (x - len(line.plain) + 1))
        line.stylize("reverse", x, x + 1)
    return Text("\n").join(texts)


class TerminalView(Static, can_focus=True):
    app = getters.app(ConsoleApp)

    TAKES_KEYS = True  # while focused, the screen's keys go to the agent

    BINDINGS = [
        Binding(LEAVE_KEY, "leave", "Leave terminal"),
        Binding("ctrl+b", "toggle_history", "History", priority=True),
    ]

    DEFAULT_CSS = """
    TerminalView {
        height: auto;
        min-height: 6;
        border: round $primary-lighten-1;
        padding: 0 1;
    }
    TerminalView:focus {
        border: round $accent;
    }
    """

    def __init__(self, session_id: str, **kw: Any) -> None:
        super().__init__("", **kw)
        self.session_id = session_id
        self._version = -2
        self.history: list[str] | None = None  # scrollback shown instead of the live screen

    def on_mount(self) -> None:
        self.border_title = "agent terminal (t types into it, ctrl+g leaves, ctrl+b history)"
        self.set_interval(0.25, self.refresh_screen)
        self.refresh_screen()

    @property
    def supervisor(self) -> OwnerSurface:
        return self.app.supervisor

    def refresh_screen(self) -> None:
        if self.history is not None or not getattr(self.screen, "loaded", True):
            return  # an attached console's session screen is still loading its detail
        version = self.supervisor.agent_screen_version(self.session_id)
        if version == self._version:
            return
        self._version = version
        screen = self.supervisor.agent_screen(self.session_id)
        if screen is None:
            self._show(False)
            return
        self._show(True)
        self.update(screen_text(screen, cursor=self.has_focus, last=40))

    def _show(self, visible: bool) -> None:
        """Show or hide the view; the screen's footer offers the terminal keys
        only while there is a terminal, so it is told when that changes."""
        if self.display != visible:
            self.display = visible
            self.screen.refresh_bindings()

    async def action_toggle_history(self) -> None:
        """ctrl+b: the agent's scrollback (last 2,000 lines) instead of its screen."""
        if self.history is not None:
            self.history = None
            self._version = -2
            self.border_subtitle = ""
            self.refresh_screen()
            return
        self.history = await self.supervisor.agent_scrollback(self.session_id)
        self.border_subtitle = "history — ctrl+b returns to the live screen"
        self.update(_without_default_colours(Text.from_ansi("\n".join(self.history))))

    async def on_resize(self, event: events.Resize) -> None:
        """The agent's pane follows the view's width (owner-checked)."""
        if self._version < 0:
            return  # no agent screen yet: nothing to fit (showing one resizes again)
        width = max(40, event.size.width - 4)
        if abs(width - getattr(self, "_sent_width", 0)) >= 4:
            self._sent_width = width
            with swallowed(
                log, "resizing the agent's pane (it may be gone)"
            ):  # a pane that is gone: nothing to resize
                await self.supervisor.resize_agent(self.session_id, width, 50)

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
