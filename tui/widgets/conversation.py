"""An ACP session's conversation, drawn as the blocks `conversation_blocks`
folds its events into: the agent's messages as rendered markdown, each
thought a collapsed block, each tool call with its title, status, diff or
command and output, the plan with its entries, the prompts corral sent.

Everything here is the agent's text, so nothing is obeyed: markdown is
rendered by `SafeMarkdown` (control characters made visible, raw HTML shown
as text, links drawn with their address and clickable nowhere), and every
other block is a `Content` built by `safe_content`/`safe_markup` (never
parsed as markup).

The whole transcript is ONE widget drawn line by line (Textual's line API,
a `ScrollView` with `render_line`), not a widget per block: opening a
conversation of 5,000 events costs folding the events (a few ms) and
drawing the blocks of one screenful, not mounting, styling and laying out
a widget per block (issue 45: it opens in 200 ms). Each block's lines are
drawn once per width and kept (`BlockView.lines`) until the block, its
fold or its search marks change. Only a window of consecutive blocks is
laid out (`first_mounted` to `end_mounted`; the blocks before and after it
are counted in a line at either end), so even the lines kept stay a
screenful or a few. The view follows the tail (scrolling up lets go,
scrolling back to the end takes it again); a search highlights the words
it found, not the whole block."""

from __future__ import annotations

import bisect
import re
from typing import ClassVar

from rich.console import RenderableType
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding, BindingType
from textual.content import Content
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.visual import Visual, visualize

from ..conversation_blocks import Block, Conversation
from ..safe_markdown import Highlighted, SafeMarkdown
from ..safe_text import safe_content, safe_markup

WINDOW = 8  # blocks mounted when the view opens (the tail), and added each time up reaches the top
MAX_MOUNTED = 96  # blocks mounted at most (reading up further lets go of the bottom ones)
OUTPUT_LINES = 40  # a tool call's output shown (its tail)
PROMPT_LINES = 6  # a prompt's first lines in its folded block
TITLE_CHARS = 70

_PLAN_MARKS = {"completed": "✓", "in_progress": "▸", "pending": "○"}


def _first_line(text: str, width: int = TITLE_CHARS) -> str:
    line = next((ln for ln in text.splitlines() if ln.strip()), "")
    line = line.strip()
    return line if len(line) <= width else line[: width - 1] + "…"


def _diff_or_command(text: str) -> Content:
    """A diff's lines coloured as a diff, anything else plain (all of it safe)."""
    lines: list[Content] = []
    is_diff = text.startswith(("--- ", "diff ")) or "\n@@ " in text
    for line in text.splitlines():
        style = ""
        if is_diff and line.startswith("+") and not line.startswith("+++"):
            style = "green"
        elif is_diff and line.startswith("-") and not line.startswith("---"):
            style = "red"
        elif is_diff and line.startswith("@@"):
            style = "cyan"
        elif line.startswith("$ "):
            style = "bold"
        lines.append(safe_content(line, style))
    return Content("\n").join(lines)


def tool_body(block: Block) -> Content:
    """A tool call's diff or command, then the tail of its output."""
    parts: list[Content] = []
    if block.text:
        parts.append(_diff_or_command(block.text))
    if block.output:
        lines = block.output.rstrip("\n").splitlines()
        cut = len(lines) - OUTPUT_LINES
        head = safe_markup(
            "[dim]output[/dim]" + (f" [dim](last {OUTPUT_LINES} lines)[/dim]" if cut > 0 else "")
        )
        parts.append(head)
        parts.append(safe_content("\n".join(lines[-OUTPUT_LINES:]), multiline=True))
    return Content("\n").join(parts) if parts else safe_markup("[dim](no detail told)[/dim]")


def tool_title(block: Block) -> Content:
    status = block.status or "pending"
    style = {"completed": "green", "failed": "red", "in_progress": "yellow"}.get(status, "dim")
    kind = f" ({block.tool_kind})" if block.tool_kind else ""
    return safe_markup(
        "⚙ {}{} · " + f"[{style}]" + "{}" + f"[/{style}]", _first_line(block.title), kind, status
    )


def plan_content(block: Block) -> Content:
    lines = [safe_markup("[b]Plan[/b]")]
    for line in block.text.splitlines():
        status, _, entry = line.partition("] ")
        status = status.removeprefix("[")
        if not entry:
            status, entry = "", line
        mark = _PLAN_MARKS.get(status, "·")
        style = "dim" if status == "completed" else ""
        lines.append(safe_content(f" {mark} {entry}", style))
    return Content("\n").join(lines)


FOLDED = ("thought", "prompt")  # kinds drawn folded: a title line, the text on enter or a click
MATCH_STYLE = "bold black on #ffff00"  # the words a search found
CURRENT_STYLE = "bold black on #ff8700"  # … in the match n/N is on
CURRENT_MARK = "▌"  # at the left of the block n/N is on


class BlockView:
    """One block's drawing (not a widget: the view draws its lines): `show`
    notes the block changed, `mark` highlights a search's words in it, and
    a thought or a prompt is folded to its title line until it is opened
    (enter on it, or a click). `lines` are drawn once per width and kept
    until the block, its fold, its marks or its selection change."""

    def __init__(self, block: Block, index: int) -> None:
        self.block = block
        self.index = index
        self.collapsed = block.kind in FOLDED
        self.needle = ""  # the search's words, highlighted where they are shown
        self.current = False  # the match n/N is on
        self.selected = False  # the block enter opens and closes (tab moves it)
        self._key: tuple[object, ...] | None = None
        self._lines: list[Strip] = []

    @property
    def foldable(self) -> bool:
        return self.block.kind in FOLDED

    def render(self) -> RenderableType | Content:
        """What the block shows now (a message's markdown, else a `Content`)."""
        block = self.block
        style = CURRENT_STYLE if self.current else MATCH_STYLE
        if block.kind == "message":
            markdown = SafeMarkdown(block.text)
            return (
                Highlighted(markdown, self.needle, Style.parse(style)) if self.needle else markdown
            )
        if block.kind == "tool":
            content = tool_title(block) + Content("\n") + tool_body(block)
        elif block.kind in FOLDED:
            content = self._fold()
        else:
            content = self._line()
        if self.needle:
            pattern = re.compile(re.escape(self.needle), re.IGNORECASE)
            content = content.highlight_regex(pattern, style=style)
        return content

    def _fold(self) -> Content:
        block = self.block
        mark = "▶" if self.collapsed else "▼"
        if block.kind == "thought":
            lines = len(block.text.splitlines())
            title = safe_markup(
                mark + " [i]thought[/i] · {} [dim]({} lines)[/dim]", _first_line(block.text), lines
            )
            body_style = "italic"
        else:
            title = safe_markup(mark + " [b]» you/corral[/b] · {}", _first_line(block.text))
            body_style = "dim"
        if self.collapsed:
            return title
        indented = "\n".join("   " + line for line in block.text.splitlines())
        return title + Content("\n") + safe_content(indented, body_style, multiline=True)

    def _line(self) -> Content:
        block = self.block
        if block.kind == "plan":
            return plan_content(block)
        if block.kind == "turn_end":
            return safe_markup("[dim]— turn ended: {}[/dim]", block.text)
        return safe_markup("[yellow]{}[/yellow]", block.text)

    def title(self) -> str:
        """A folded block's title line, as plain text."""
        return str(self._fold()).split("\n", 1)[0] if self.foldable else ""

    def mark(self, needle: str, current: bool) -> None:
        """Highlight `needle` where it is shown (none: ""); the current match
        is opened if it is folded, so its words can be seen."""
        if current and self.collapsed and needle.casefold() in self.block.text.casefold():
            self.collapsed = False
        self.needle, self.current = needle, current

    def fold(self) -> None:
        """Open a folded block, or fold an open one."""
        if self.foldable:
            self.collapsed = not self.collapsed

    def text(self) -> str:
        """What this block holds, as plain text (tests, search)."""
        return "\n".join((self.block.title, self.block.text, self.block.output))

    def forget(self) -> None:
        """Draw the lines again next time (the theme changed)."""
        self._key = None

    def lines(self, view: ConversationView, width: int) -> list[Strip]:
        """The block's lines at `width` (kept until something they show changes)."""
        key = (
            self.block.version,
            width,
            self.collapsed,
            self.needle,
            self.current,
            self.selected,
        )
        if key != self._key:
            self._lines = view.draw(self, width)
            self._key = key
        return self._lines


class ConversationView(ScrollView, can_focus=True):
    """The blocks, scrolled by keyboard (up/down, page up/down, home/end),
    drawn line by line by this one widget.

    Only a window of consecutive blocks is laid out (`first_mounted` to
    `end_mounted`); the blocks before and after it are counted in a line at
    either end. Opening lays out the tail (a screenful) and follows it (new
    blocks join the window as they come while it reaches the tail). Up or
    page up at the top adds `WINDOW` more above, keeping the place; down or
    page down at the bottom, `WINDOW` more below. Home and end move the
    window to the first or the last blocks (not every block in between); a
    search's match far from the window moves it there. At most
    `MAX_MOUNTED` blocks stay in the window: reading up past that lets go
    of the blocks at the bottom. Tab and shift+tab select the next or
    previous thought or prompt in view (past the last, focus moves on);
    enter or a click opens and closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "line_up", "Up", show=False),
        Binding("down", "line_down", "Down", show=False),
        Binding("pageup", "earlier_page", "Page up", show=False),
        Binding("pagedown", "later_page", "Page down", show=False),
        Binding("home", "earliest", "Start", show=False),
        Binding("end", "latest", "End", show=False),
        Binding("enter", "fold", "Open/close", show=False),
        Binding("tab", "select_next", "Next thought", show=False),
        Binding("shift+tab", "select_previous", "Previous thought", show=False),
    ]

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "conversation--tool",
        "conversation--prompt",
        "conversation--selected",
        "conversation--current",
        "conversation--edge",
    }

    DEFAULT_CSS = """
    ConversationView { height: 1fr; padding: 0 1; scrollbar-gutter: stable; }
    ConversationView > .conversation--tool { background: $boost; }
    ConversationView > .conversation--prompt { color: $text-muted; }
    ConversationView > .conversation--selected { background: $boost; }
    ConversationView > .conversation--current { color: $warning; }
    ConversationView > .conversation--edge { color: $text-muted; }
    """

    def __init__(self, conversation: Conversation, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.conversation = conversation
        total = len(conversation.blocks)
        self.first_mounted = max(0, total - WINDOW)  # the earliest block laid out
        self.end_mounted = total  # one past the last block laid out
        self.views: dict[int, BlockView] = {
            i: BlockView(conversation.blocks[i], i) for i in range(self.first_mounted, total)
        }
        self.needle = ""
        self.found: set[int] = set()
        self.current: int | None = None
        self.following = True  # at the tail, new blocks scroll into view
        self.selected: int | None = None
        self._lines: list[Strip] = []  # the window's lines, edges and gaps included
        self._tops: list[int] = []  # each window block's first line, in window order
        self._width = 0
        self._blank = Strip.blank(0)  # a line past the end (the view's style: kept per layout)
        self._style = Style()
        self._layout_pending = False  # a layout is due (events came in a burst)

    # -- the window ------------------------------------------------------------------------

    @property
    def at_the_end(self) -> bool:
        """Scrolled to the end (a conversation shorter than the view is all shown: the end too)."""
        return self.max_scroll_y == 0 or self.scroll_y >= self.max_scroll_y

    @property
    def at_tail(self) -> bool:
        """The window reaches the last block (new ones join it as they come)."""
        return self.end_mounted >= len(self.conversation.blocks)

    def on_mount(self) -> None:
        self.watch(self.app, "theme", self._restyle, init=False)
        self.call_after_refresh(self._fill)

    def _restyle(self) -> None:
        """A new theme: the kept lines hold the old one's colours (drawn
        again once the new styles are applied: after the next refresh)."""

        def redraw() -> None:
            for view in self.views.values():
                view.forget()
            self._layout()

        self.call_after_refresh(redraw)

    def on_resize(self, event: events.Resize) -> None:
        self._layout()
        self.call_after_refresh(self._fill)

    def _fill(self) -> None:
        """A tall screen shows more than `WINDOW` blocks: lay out more (above
        at the tail, below elsewhere) until the view scrolls or none are left."""
        if not self.is_attached or not self.size.height or not self._width:
            return
        while self.max_scroll_y == 0:
            if self.at_tail and self.first_mounted > 0:
                self.show_from(self.first_mounted - WINDOW)
            elif not self.at_tail:
                self.show_until(self.end_mounted + WINDOW)
            else:
                return

    def _edge(self, words: Content) -> Strip:
        style = self.get_visual_style("conversation--edge")
        return Visual.to_strips(self, words, self._width, 1, style, pad=True)[0]

    def _layout(self) -> None:
        """Lay the window's blocks out again (their kept lines reused) and
        follow the tail if it is followed."""
        width = self.scrollable_content_region.width
        if width <= 0:
            return
        self._width = width
        lines: list[Strip] = []
        self._style = self.rich_style  # kept: render_line draws with it on every line
        blank = Strip.blank(width, self._style)
        if self.first_mounted > 0:
            lines.append(self._edge(self._earlier_words()))
            lines.append(blank)
        tops: list[int] = []
        for index in range(self.first_mounted, self.end_mounted):
            tops.append(len(lines))
            lines.extend(self.views[index].lines(self, width))
            lines.append(blank)
        if not self.at_tail:
            lines.append(self._edge(self._later_words()))
        self._lines, self._tops = lines, tops
        self._blank = blank
        self.virtual_size = Size(width, len(lines))
        if self.following:
            self.scroll_to(y=self.max_scroll_y, animate=False, immediate=True, force=True)
        self.refresh()

    def _scroll_update(self, virtual_size: Size) -> None:
        """Textual shows the scrollbar after the view scrolled to the tail:
        put its thumb where the view is."""
        super()._scroll_update(virtual_size)
        if self.show_vertical_scrollbar:
            self.vertical_scrollbar.position = self.scroll_y

    def draw(self, view: BlockView, width: int) -> list[Strip]:
        """A block's lines at `width`: its padding, background and marks drawn here."""
        kind = view.block.kind
        components = ("conversation--tool",) if kind == "tool" else ()
        if kind == "prompt":
            components = ("conversation--prompt",)
        if view.selected:
            components = (*components, "conversation--selected")
        style = self.get_visual_style(*components)
        left = 1 if kind in ("message", "tool") or view.current else 0
        right = 1 if kind in ("message", "tool") else 0
        inner = max(1, width - left - right)
        visual = visualize(self, view.render(), markup=False)
        strips = Visual.to_strips(self, visual, inner, None, style, pad=True)
        rich_style = style.rich_style
        if view.current:  # the mark takes the left column
            mark = self.get_visual_style("conversation--current").rich_style
            marked = Segment(CURRENT_MARK, rich_style + mark)
            return [
                Strip([marked, *strip], inner + 1).crop_pad(inner + 1, 0, right, rich_style)
                for strip in strips
            ]
        return [strip.crop_pad(inner, left, right, rich_style) for strip in strips]

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        row = scroll_y + y
        width = self.scrollable_content_region.width
        strip = self._lines[row] if 0 <= row < len(self._lines) else self._blank
        return strip.crop_extend(scroll_x, scroll_x + width, self._style)

    def _earlier_words(self) -> Content:
        return safe_markup(
            "[dim]{} earlier blocks: [b]up[/b] here shows more, [b]home[/b] the first[/dim]",
            self.first_mounted,
        )

    def _later_words(self) -> Content:
        return safe_markup(
            "[dim]{} later blocks: [b]down[/b] here shows more, [b]end[/b] the latest[/dim]",
            len(self.conversation.blocks) - self.end_mounted,
        )

    def _view(self, index: int) -> BlockView:
        view = BlockView(self.conversation.blocks[index], index)
        if self.needle and index in self.found:
            view.mark(self.needle, index == self.current)
        self.views[index] = view
        return view

    async def changed(self, index: int) -> None:
        """Block `index` was added or changed: draw it again, add it to the
        window (the window reaches the tail), or count it (it is elsewhere).
        A burst of events is laid out once, after it (not once per event)."""
        if index == self.end_mounted and index >= self.first_mounted:
            self._view(index)
            self.end_mounted = index + 1
        if index in self.views or index >= self.end_mounted:
            self._layout_soon()

    def _layout_soon(self) -> None:
        if not self._layout_pending:
            self._layout_pending = True
            self.call_next(self._layout_now)

    def _layout_now(self) -> None:
        self._layout_pending = False
        self._layout()

    def show_from(self, index: int) -> None:
        """Lay out the blocks from `index` on up to the window (the operator
        went up to them); past `MAX_MOUNTED`, let go of the bottom ones."""
        index = max(0, index)
        if index >= self.first_mounted:
            return
        for i in range(index, self.first_mounted):
            self._view(i)
        self.first_mounted = index
        excess = self.end_mounted - self.first_mounted - MAX_MOUNTED
        if excess > 0:
            for i in range(self.end_mounted - excess, self.end_mounted):
                self.views.pop(i)
            self.end_mounted -= excess
        self._layout()

    def show_until(self, end: int) -> None:
        """Lay out the blocks after the window up to `end` (the operator went down to them)."""
        end = min(end, len(self.conversation.blocks))
        if end <= self.end_mounted:
            return
        for i in range(self.end_mounted, end):
            self._view(i)
        self.end_mounted = end
        self._layout()

    def _move(self, first: int, end: int) -> None:
        """The window becomes `first` to `end` (a jump far from where it was)."""
        self.views = {}
        self.selected = None
        self.first_mounted = self.end_mounted = first
        self.show_until(end)

    def top_of(self, index: int) -> int | None:
        """Block `index`'s first line in the view's lines (None: not laid out)."""
        if not self.first_mounted <= index < self.end_mounted or not self._tops:
            return None
        return self._tops[index - self.first_mounted]

    def shown(self, index: int) -> bool:
        """Some line of block `index` is on screen."""
        top = self.top_of(index)
        if top is None:
            return False
        bottom = top + len(self.views[index].lines(self, self._width))
        return (
            top < self.scroll_y + self.scrollable_content_region.height and bottom > self.scroll_y
        )

    def drawn(self, index: int) -> list[Strip]:
        """Block `index`'s lines as drawn now (tests, search)."""
        return self.views[index].lines(self, self._width)

    def block_at(self, y: int) -> int | None:
        """The block drawn on the view's line `y` (scrolled lines counted)."""
        at = bisect.bisect_right(self._tops, y) - 1
        if at < 0:
            return None
        index = self.first_mounted + at
        if y >= self._tops[at] + len(self.views[index].lines(self, self._width)):
            return None  # the gap below it
        return index

    # -- the keys --------------------------------------------------------------------------

    def _let_go(self) -> None:
        self.following = False

    def _follow_again(self) -> None:
        """Down to the very end of the conversation: follow its tail again."""
        if self.at_tail and self.at_the_end:
            self.following = True

    def action_earliest(self) -> None:
        self._let_go()  # a jump: the tail no longer followed (end takes it again)
        if self.first_mounted > 0:
            if self.end_mounted <= MAX_MOUNTED:
                self.show_from(0)
            else:
                self._move(0, WINDOW)
        self.scroll_to(y=0, animate=False, immediate=True, force=True)
        self._fill()

    def action_latest(self) -> None:
        total = len(self.conversation.blocks)
        self.following = True
        if not self.at_tail:
            if total - self.first_mounted <= MAX_MOUNTED:
                self.show_until(total)
            else:
                self._move(max(0, total - WINDOW), total)
        self._layout()
        self._fill()

    def action_line_up(self) -> None:
        self._let_go()
        self._more_at_the_top()
        self.scroll_to(y=self.scroll_y - 1, animate=False, immediate=True, force=True)

    def action_earlier_page(self) -> None:
        self._let_go()
        self._more_at_the_top()
        page = self.scrollable_content_region.height
        self.scroll_to(y=self.scroll_y - page, animate=False, immediate=True, force=True)

    def action_line_down(self) -> None:
        self._more_at_the_bottom()
        self.scroll_to(y=self.scroll_y + 1, animate=False, immediate=True, force=True)
        self._follow_again()

    def action_later_page(self) -> None:
        self._more_at_the_bottom()
        page = self.scrollable_content_region.height
        self.scroll_to(y=self.scroll_y + page, animate=False, immediate=True, force=True)
        self._follow_again()

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        self._let_go()

    def on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        self.call_after_refresh(self._follow_again)

    def _more_at_the_top(self) -> None:
        """At the top with earlier blocks not laid out: add `WINDOW` more
        above, the view kept where it was (they appear above what was read)."""
        if self.scroll_y > 0 or self.first_mounted == 0:
            return
        before = len(self._lines)
        self.show_from(self.first_mounted - WINDOW)
        self.scroll_to(y=len(self._lines) - before, animate=False, immediate=True, force=True)

    def _more_at_the_bottom(self) -> None:
        if self.scroll_y < self.max_scroll_y or self.at_tail:
            return
        self.show_until(self.end_mounted + WINDOW)

    # -- folding ---------------------------------------------------------------------------

    def select(self, index: int | None) -> None:
        """Block `index` (a thought or a prompt) is the one enter opens and closes."""
        if self.selected is not None and self.selected in self.views:
            self.views[self.selected].selected = False
        self.selected = index if index is not None and index in self.views else None
        if self.selected is not None:
            self.views[self.selected].selected = True
            self._layout()
            self._scroll_into_view(self.selected)
        else:
            self._layout()

    def _scroll_into_view(self, index: int) -> None:
        top = self.top_of(index)
        if top is None:
            return
        height = self.scrollable_content_region.height
        bottom = top + len(self.views[index].lines(self, self._width))
        if top < self.scroll_y:
            self._let_go()
            self.scroll_to(y=top, animate=False, immediate=True, force=True)
        elif bottom > self.scroll_y + height:
            self.scroll_to(y=min(top, bottom - height), animate=False, immediate=True, force=True)

    def action_fold(self) -> None:
        if self.selected is not None and self.selected in self.views:
            self.views[self.selected].fold()
            self._layout()
            self._scroll_into_view(self.selected)  # what was opened stays in sight

    def _foldable_in_view(self) -> list[int]:
        return [
            i
            for i in range(self.first_mounted, self.end_mounted)
            if self.views[i].foldable and self.shown(i)
        ]

    def action_select_next(self) -> None:
        after = [i for i in self._foldable_in_view() if self.selected is None or i > self.selected]
        if after:
            self.select(after[0])
        else:
            self.select(None)
            self.screen.focus_next()

    def action_select_previous(self) -> None:
        before = [i for i in self._foldable_in_view() if self.selected is None or i < self.selected]
        if before:
            self.select(before[-1])
        else:
            self.select(None)
            self.screen.focus_previous()

    def on_click(self, event: events.Click) -> None:
        index = self.block_at(int(self.scroll_y) + event.y)
        if index is not None and self.views[index].foldable:
            self.select(index)
            self.action_fold()

    # -- search ----------------------------------------------------------------------------

    async def reveal(self, index: int) -> None:
        """Scroll block `index` to the top of the view (moving the window to it if need be)."""
        self._let_go()  # a jump: the tail no longer followed (end takes it again)
        if index < self.first_mounted:
            if self.end_mounted - index <= MAX_MOUNTED:
                self.show_from(index)
            else:
                self._move(index, index + WINDOW)
        elif index >= self.end_mounted:
            if index + 1 - self.first_mounted <= MAX_MOUNTED:
                self.show_until(index + 1)
            else:
                self._move(index, index + WINDOW)
        self._fill()
        top = self.top_of(index)
        if top is not None:
            self.scroll_to(y=top, animate=False, immediate=True, force=True)

    def mark(self, needle: str, matches: list[int], current: int | None) -> None:
        """Highlight the search's words in the blocks that hold them, the
        current match's more (and a mark at its left)."""
        self.needle, self.found, self.current = needle, set(matches), current
        for index, view in self.views.items():
            shown = needle if index in self.found else ""
            view.mark(shown, index == current)
        self._layout()
