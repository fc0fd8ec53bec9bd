"""The board's live preview: the last screen of the selected session's agent
pane, beside or below the board (`p` shows or hides it).

It reads the screen the supervisor already keeps in memory from its batched
captures (never tmux), at the session terminal's pace, and only when the
version changed. Hidden, its timer is paused: it costs nothing. It never
resizes the agent's pane and takes no keys (`enter` opens the session for that).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.style import Style
from rich.text import Text
from textual import getters
from textual._styles_cache import StylesCache
from textual.geometry import Region
from textual.strip import Strip
from textual.timer import Timer
from textual.widget import Widget

from corral.supervisor.states import label, said

from ..console_app import ConsoleApp
from .terminal import row_text, shown_rows

if TYPE_CHECKING:
    from corral.supervisor.models import SessionSummary

POLL_SECS = 0.25  # the session terminal's pace: no more polling than it does
STRIP_CACHE_LIMIT = 2048  # rows kept drawn: a few screens of many sessions

# (row, width, base style) -> the row drawn (one strip per line it wraps to):
# a streaming screen scrolls, so nearly every row of a new capture was drawn
# for the capture before
_strips: dict[tuple[str, int, Style], list[Strip]] = {}
COMPOSED_LIMIT = 4096  # lines kept composed (border, padding, the row) per preview


class _ComposedRows(StylesCache):
    """Textual's line cache for a widget, keyed by the row, not only by y: a
    line between the borders is the row's strip (kept in `_strips`) inside
    the same border and padding wherever it lands, so a screen that scrolled
    by two rows composes two lines, not all of them. Textual keeps a line per
    y and a repaint of a scrolled screen makes every y dirty: with 50 ACP
    sessions streaming, composing the preview's 48 lines again (borders,
    padding, the app's colour filter on each) four times a second was most
    of the frames a key's repaint waited behind (`bench/status.py
    --acp-console --trace`, py-spy). The same strips come out; everything
    the composition reads (sizes, colours, border, outline, tint, opacities,
    hatch, theme) is part of the key, so a restyle composes afresh; the
    first and last lines (borders, outlines) are composed as ever."""

    def __init__(self) -> None:
        super().__init__()
        self._composed: dict[int, tuple[Strip, tuple[object, ...], Strip]] = {}
        self._pass: tuple[int, tuple[object, ...]] | None = None  # this render's gutter, setting

    def render(self, *args: Any, **kwargs: Any) -> list[Strip]:
        self._pass = None  # every line of one render shares its setting: read it once
        return super().render(*args, **kwargs)

    def render_line(
        self,
        styles: Any,
        y: int,
        size: Any,
        content_size: Any,
        padding: Any,
        base_background: Any,
        background: Any,
        render_content_line: Any,
        border_title: Any,
        border_subtitle: Any,
        opacity: float,
        ansi_theme: Any,
        native_ansi: bool,
    ) -> Strip:
        args = (styles, y, size, content_size, padding, base_background, background)
        rest = (render_content_line, border_title, border_subtitle, opacity, ansi_theme)
        if self._pass is None:
            setting: tuple[object, ...] = (
                size,
                content_size,
                padding,
                base_background,
                background,
                styles.border,
                styles.outline,
                styles.tint,
                styles.text_opacity,
                styles.has_rule("hatch") and styles.hatch,
                opacity,
                id(ansi_theme),
                native_ansi,
            )
            self._pass = (styles.gutter.top, setting)
        top, setting = self._pass
        row_y = y - top
        if not 0 <= row_y < content_size.height or y in (0, size.height - 1):  # edges: as ever
            return super().render_line(*args, *rest, native_ansi)
        row = render_content_line(row_y)
        kept = self._composed.get(id(row))
        if kept is not None and kept[0] is row and kept[1] == setting:
            return kept[2]
        line = super().render_line(*args, *rest, native_ansi)
        if len(self._composed) >= COMPOSED_LIMIT:
            self._composed.clear()
        self._composed[id(row)] = (row, setting, line)  # the row kept: its id stays its own
        return line


class AgentPreview(Widget):
    """A Line-API widget: each row of the agent's screen is drawn into a strip
    once and kept (`_strips`), so a repaint of a screen that scrolled, or of a
    session shown before, draws only its new rows. As a `Static`, every
    repaint formatted the whole screen again (Textual's content wrapping and
    strips): most of the console's frame time with 100 sessions streaming
    (bench/tui.py --profile), a frame a key's repaint could wait behind."""

    app = getters.app(ConsoleApp)

    DEFAULT_CSS = """
    AgentPreview {
        border: round $primary-background-lighten-2;
        padding: 0 1;
        overflow: hidden;
    }
    """

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self._rows: list[str] = []  # the screen's rows shown (ANSI), top first
        self._base: Style | None = None  # its own style, for the repaint under way
        self.session_id: str | None = None
        self._version = -2
        self._timer: Timer | None = None
        self._said: str | None = None  # the sentence shown in place of a screen
        self._lines: list[Strip] = []  # this repaint's lines, the rows wrapped to the width
        self._styles_cache = _ComposedRows()
        self._blank: tuple[tuple[int, Style], Strip] | None = None

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
        _start, rows = shown_rows(screen, max(1, self.content_size.height))
        if rows != self._rows or self._said is not None:
            self._said = None
            self._rows = rows
            self.refresh()  # a repaint: its size is set by the board, never by the text

    def _say(self, words: str) -> None:
        """One dim sentence in place of a screen: repainted only when it
        changes, and never laid out (the preview's size is the board's)."""
        if words != self._said:
            self._said = words
            self._rows = []
            self.refresh()

    @property
    def content(self) -> Text:
        """What it shows, as text (the sentence, or the screen's rows)."""
        if self._said is not None:
            return Text(self._said, style="dim")
        return Text("\n").join(row_text(row) for row in self._rows)

    def render_lines(self, crop: Region) -> list[Strip]:
        # the widget's own style, worked out once a repaint, not once a row;
        # the rows wrapped to the width once a repaint, each row drawn once
        base = self._base = self.rich_style
        width = self.content_size.width
        if self._said is not None:
            self._lines = self._wrapped(Text(self._said, style="dim"), width, base)
        else:
            lines: list[Strip] = []
            for row in self._rows:
                key = (row, width, base)
                strips = _strips.get(key)
                if strips is None:
                    if len(_strips) >= STRIP_CACHE_LIMIT:
                        _strips.clear()
                    strips = _strips[key] = self._wrapped(row_text(row), width, base)
                lines.extend(strips)
            self._lines = lines
        return super().render_lines(crop)

    def render_line(self, y: int) -> Strip:
        if y < len(self._lines):
            return self._lines[y]
        width, base = self.content_size.width, self._base or self.rich_style
        if self._blank is None or self._blank[0] != (width, base):
            self._blank = ((width, base), Strip.blank(width, base))
        return self._blank[1]  # one strip for every blank line: composed once (`_ComposedRows`)

    def _wrapped(self, text: Text, width: int, base: Style) -> list[Strip]:
        """One row drawn: the agent's styles over the preview's own, wrapped to
        the width (a preview is narrower than the agent's terminal: a line cut
        at its edge would hide what the agent said), each line padded."""
        line = text.copy()
        line.stylize_before(base)
        console = self.app.console
        return [
            Strip(list(part.render(console))).crop_extend(0, width, base)
            for part in line.wrap(console, max(1, width), overflow="fold")
        ] or [Strip.blank(width, base)]

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
