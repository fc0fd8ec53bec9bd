"""An ACP session's conversation, drawn as the blocks `conversation_blocks`
folds its events into: the agent's messages as rendered markdown, each
thought a collapsed block, each tool call with its title, status, diff or
command and output, the plan with its entries, the prompts corral sent.

Everything here is the agent's text, so nothing is obeyed: markdown is
rendered by `SafeMarkdown` (control characters made visible, raw HTML shown
as text, links drawn with their address and clickable nowhere), and every
other block is a `Content` built by `safe_content`/`safe_markup` (never
parsed as markup). Each block is one widget, and only a window of blocks is
mounted (`ConversationView`): a conversation of thousands of events opens
as fast as a screenful of them. The view follows the tail (Textual's
anchor: scrolling up lets go, scrolling back to the end takes it again); a
search highlights the words it found, not the whole block."""

from __future__ import annotations

import re
from typing import ClassVar

from rich.console import RenderableType
from rich.style import Style
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.content import Content
from textual.widgets import Static

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


class BlockView(Static):
    """One block as one widget (a conversation's screenful is a handful of
    widgets, whatever its markdown holds): `show` redraws it from the block
    as it is now, `mark` highlights a search's words in it. A thought or a
    prompt is folded to its title line; enter (it takes focus: tab reaches
    it) or a click opens and closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "fold", "Open/close", show=False),
    ]

    DEFAULT_CSS = """
    BlockView { height: auto; margin: 0 0 1 0; }
    BlockView.block-message { padding: 0 1; }
    BlockView.block-tool { background: $boost; padding: 0 1; }
    BlockView.block-prompt { color: $text-muted; }
    BlockView:focus { background: $boost; }
    BlockView.-current { border-left: thick $warning; }
    """

    def __init__(self, block: Block, index: int) -> None:
        super().__init__(classes=f"block-{block.kind}", markup=False)
        self.block = block
        self.index = index
        self.collapsed = block.kind in FOLDED
        self.can_focus = block.kind in FOLDED
        self.needle = ""  # the search's words, highlighted where they are shown
        self.current = False  # the match n/N is on
        self._shown = -1
        self.show()

    def show(self) -> None:
        """Redraw when the block changed since the last time (a streamed
        message, a tool call's new status or output, the plan's entries)."""
        if self.block.version != self._shown:
            self._draw()

    def _draw(self) -> None:
        self._shown = self.block.version
        self.update(self._drawn())

    def _drawn(self) -> RenderableType | Content:
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
        return str(self._fold()).split("\n", 1)[0] if self.block.kind in FOLDED else ""

    def mark(self, needle: str, current: bool) -> None:
        """Highlight `needle` where it is shown (none: ""); the current match
        is opened if it is folded, so its words can be seen."""
        if current and self.collapsed and needle.casefold() in self.block.text.casefold():
            self.collapsed = False
        if (needle, current) != (self.needle, self.current) or not self.is_mounted:
            self.needle, self.current = needle, current
            self.set_class(bool(needle), "-match")
            self.set_class(current, "-current")
            self._draw()

    def action_fold(self) -> None:
        if self.block.kind in FOLDED:
            self.collapsed = not self.collapsed
            self._draw()

    def on_click(self) -> None:
        self.action_fold()

    def text(self) -> str:
        """What this block holds, as plain text (tests, search)."""
        return "\n".join((self.block.title, self.block.text, self.block.output))


class ConversationView(VerticalScroll, can_focus=True):
    """The blocks, scrolled by keyboard (up/down, page up/down, home/end).

    Only a window of consecutive blocks is mounted (`first_mounted` to
    `end_mounted`); the blocks before and after it are counted in a line
    at either end. Opening mounts the tail and follows it (new blocks are
    mounted as they come while the window reaches the tail). Up or page up
    at the top mounts `WINDOW` more above, keeping the place; down or page
    down at the bottom, `WINDOW` more below. Home and end move the window
    to the first or the last blocks (not every block in between: a
    conversation of thousands of blocks stays a handful of widgets); a
    search's match far from the window moves it there. At most
    `MAX_MOUNTED` blocks stay mounted: reading up past that lets go of the
    blocks at the bottom."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "line_up", "Up", show=False),
        Binding("down", "line_down", "Down", show=False),
        Binding("pageup", "earlier_page", "Page up", show=False),
        Binding("pagedown", "later_page", "Page down", show=False),
        Binding("home", "earliest", "Start", show=False),
        Binding("end", "latest", "End", show=False),
    ]

    DEFAULT_CSS = """
    ConversationView { height: 1fr; padding: 0 1; }
    ConversationView #earlier { color: $text-muted; margin: 0 0 1 0; }
    ConversationView #later { color: $text-muted; }
    """

    def __init__(self, conversation: Conversation, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.conversation = conversation
        self.first_mounted = 0  # the earliest block mounted
        self.end_mounted = 0  # one past the last block mounted
        self.views: dict[int, BlockView] = {}
        self.needle = ""
        self.found: set[int] = set()
        self.current: int | None = None

    # -- the window ------------------------------------------------------------------------

    @property
    def at_the_end(self) -> bool:
        """Scrolled to the end (Textual's anchor can scroll a conversation
        shorter than the view to a negative offset: all of it shown is the end too)."""
        return self.max_scroll_y == 0 or self.scroll_y >= self.max_scroll_y

    @property
    def at_tail(self) -> bool:
        """The window reaches the last block (new ones are mounted as they come)."""
        return self.end_mounted >= len(self.conversation.blocks)

    def compose(self) -> ComposeResult:
        total = len(self.conversation.blocks)
        self.first_mounted, self.end_mounted = max(0, total - WINDOW), total
        yield Static(self._earlier_words(), id="earlier")
        yield from (self._view(i) for i in range(self.first_mounted, self.end_mounted))
        yield Static(self._later_words(), id="later")

    def _view(self, index: int) -> BlockView:
        view = BlockView(self.conversation.blocks[index], index)
        if self.needle and index in self.found:
            view.mark(self.needle, index == self.current)
        self.views[index] = view
        return view

    def on_mount(self) -> None:
        self._edges()
        self.anchor()
        self.call_after_refresh(self._fill)

    async def _fill(self) -> None:
        """A tall screen shows more than `WINDOW` blocks: mount more (above
        at the tail, below elsewhere) until the view scrolls or none are left."""
        if not self.is_attached:
            return
        if not self.size.height:  # not laid out yet: its height is not known
            self.call_after_refresh(self._fill)
            return
        if self.max_scroll_y > 0:
            return
        if self.at_tail and self.first_mounted > 0:
            await self.show_from(max(0, self.first_mounted - WINDOW))
            self.anchor()
        elif not self.at_tail:
            await self.show_until(self.end_mounted + WINDOW)
        else:
            return
        self.call_after_refresh(self._fill)

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

    def _edges(self) -> None:
        earlier, later = self.query_one("#earlier", Static), self.query_one("#later", Static)
        earlier.update(self._earlier_words())
        earlier.display = self.first_mounted > 0
        later.update(self._later_words())
        later.display = not self.at_tail

    async def changed(self, index: int) -> None:
        """Block `index` was added or changed: redraw it, mount it (the
        window reaches the tail), or count it (the window is elsewhere)."""
        view = self.views.get(index)
        if view is not None:
            view.show()
            return
        if index == self.end_mounted and index >= self.first_mounted:
            self.end_mounted = index + 1
            await self.mount(self._view(index), before=self.query_one("#later"))
        elif index > self.end_mounted:
            self._edges()

    async def show_from(self, index: int) -> None:
        """Mount the blocks from `index` on up to the window (the operator
        went up to them); past `MAX_MOUNTED`, let go of the bottom ones."""
        index = max(0, index)
        if index >= self.first_mounted:
            return
        views = [self._view(i) for i in range(index, self.first_mounted)]
        await self.mount_all(views, after=self.query_one("#earlier"))
        self.first_mounted = index
        excess = self.end_mounted - self.first_mounted - MAX_MOUNTED
        if excess > 0:
            gone = range(self.end_mounted - excess, self.end_mounted)
            await self.remove_children([self.views.pop(i) for i in gone])
            self.end_mounted -= excess
        self._edges()

    async def show_until(self, end: int) -> None:
        """Mount the blocks after the window up to `end` (the operator went down to them)."""
        end = min(end, len(self.conversation.blocks))
        if end <= self.end_mounted:
            return
        views = [self._view(i) for i in range(self.end_mounted, end)]
        await self.mount_all(views, before=self.query_one("#later"))
        self.end_mounted = end
        self._edges()

    async def _move(self, first: int, end: int) -> None:
        """The window becomes `first` to `end` (a jump far from where it was)."""
        await self.remove_children(list(self.views.values()))
        self.views = {}
        self.first_mounted = self.end_mounted = first
        await self.show_until(end)

    # -- the keys --------------------------------------------------------------------------

    async def action_earliest(self) -> None:
        self.anchor(False)  # a jump: the tail no longer followed (end takes it again)
        if self.first_mounted > 0:
            if self.end_mounted <= MAX_MOUNTED:
                await self.show_from(0)
            else:
                await self._move(0, WINDOW)
        self.call_after_refresh(self.scroll_home, animate=False)
        self.call_after_refresh(self._fill)

    async def action_latest(self) -> None:
        total = len(self.conversation.blocks)
        if not self.at_tail:
            if total - self.first_mounted <= MAX_MOUNTED:
                await self.show_until(total)
            else:
                await self._move(max(0, total - WINDOW), total)
        self.anchor()
        self.call_after_refresh(self._fill)

    async def action_line_up(self) -> None:
        self.release_anchor()
        await self._more_at_the_top()
        self.scroll_up(animate=False)

    async def action_earlier_page(self) -> None:
        self.release_anchor()
        await self._more_at_the_top()
        self.scroll_page_up(animate=False)

    async def action_line_down(self) -> None:
        await self._more_at_the_bottom()
        self.scroll_down(animate=False)
        self.call_after_refresh(self._follow_again)

    async def action_later_page(self) -> None:
        await self._more_at_the_bottom()
        self.scroll_page_down(animate=False)
        self.call_after_refresh(self._follow_again)

    def _follow_again(self) -> None:
        """Down to the very end of the conversation: follow its tail again."""
        if self.at_tail and self.at_the_end and not self.is_anchored:
            self.anchor()

    async def _more_at_the_top(self) -> None:
        """At the top with earlier blocks unshown: mount `WINDOW` more above,
        the view kept where it was (they appear above what was read)."""
        if self.scroll_y > 0 or self.first_mounted == 0:
            return
        before = self.virtual_size.height
        await self.show_from(self.first_mounted - WINDOW)
        self.call_after_refresh(self._keep_place, before)

    async def _more_at_the_bottom(self) -> None:
        if self.scroll_y < self.max_scroll_y or self.at_tail:
            return
        await self.show_until(self.end_mounted + WINDOW)

    def _keep_place(self, before: int) -> None:
        self.scroll_to(y=self.virtual_size.height - before, animate=False, immediate=True)

    # -- search ----------------------------------------------------------------------------

    async def reveal(self, index: int) -> None:
        """Scroll block `index` into view (moving the window to it if need be)."""
        self.anchor(False)  # a jump: the tail no longer followed (end takes it again)
        if index < self.first_mounted:
            if self.end_mounted - index <= MAX_MOUNTED:
                await self.show_from(index)
            else:
                await self._move(index, index + WINDOW)
        elif index >= self.end_mounted:
            if index + 1 - self.first_mounted <= MAX_MOUNTED:
                await self.show_until(index + 1)
            else:
                await self._move(index, index + WINDOW)
        view = self.views.get(index)
        if view is not None:  # once the blocks mounted for it have their height
            self.call_after_refresh(self.call_after_refresh, self._scroll_to_block, view)

    def _scroll_to_block(self, view: BlockView) -> None:
        self.scroll_to(y=view.virtual_region.y, animate=False, immediate=True)

    def mark(self, needle: str, matches: list[int], current: int | None) -> None:
        """Highlight the search's words in the blocks that hold them, the
        current match's more (and its block marked at the left)."""
        self.needle, self.found, self.current = needle, set(matches), current
        for index, view in self.views.items():
            shown = needle if index in self.found else ""
            view.mark(shown, index == current)
