"""An ACP session's conversation, drawn as the blocks `conversation_blocks`
folds its events into: the agent's messages as rendered markdown, each
thought a collapsed block, each tool call with its title, status, diff or
command and output, the plan with its entries, the prompts corral sent.

Everything here is the agent's text, so nothing is obeyed: markdown is
rendered from text whose control characters are made visible first
(`visible`), its links open nothing (`open_links=False`), and every other
block is a `Content` built by `safe_content`/`safe_markup` (never parsed as
markup). The view follows the tail (Textual's anchor: scrolling up lets go,
scrolling back to the end takes it again) and mounts only the last
`WINDOW` blocks at first (a screenful: Textual's Markdown widget costs a
widget per paragraph and list item, so a conversation of thousands of
events opens at once only if few are drawn), and mounts earlier ones when
asked for: `WINDOW` more each time up or page up reaches the top, all of
them on home, the one a search finds."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.content import Content
from textual.widget import Widget
from textual.widgets import Collapsible, Markdown, Static

from ..conversation_blocks import Block, Conversation
from ..safe_text import safe_content, safe_markup
from ..visible import visible

WINDOW = 8  # blocks mounted when the view opens (the tail), and added each time up reaches the top
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


class BlockView(Widget):
    """One block; `show` redraws it from the block as it is now."""

    DEFAULT_CSS = """
    BlockView { height: auto; margin: 0 0 1 0; }
    BlockView.-match { background: $warning 20%; }
    BlockView.-current { background: $warning 45%; }
    BlockView Markdown { margin: 0; padding: 0 1 0 1; }
    BlockView Markdown > *:last-child { margin-bottom: 0; }
    BlockView Collapsible { margin: 0; padding: 0; border-top: none; }
    BlockView Collapsible > Contents { padding: 0 0 0 3; }
    BlockView .tool { background: $boost; padding: 0 1; }
    BlockView .prompt { color: $text-muted; }
    """

    def __init__(self, block: Block, index: int) -> None:
        super().__init__(classes=f"block-{block.kind}")
        self.block = block
        self.index = index
        self._shown = -1

    def compose(self) -> ComposeResult:
        block = self.block
        if block.kind == "message":
            yield Markdown(visible(block.text, multiline=True), open_links=False)
        elif block.kind == "thought":
            with Collapsible(title=self._thought_title(), collapsed=True):  # type: ignore[arg-type]
                yield Static(safe_content(block.text, "italic", multiline=True), classes="body")
        elif block.kind == "tool":  # one widget: a conversation has hundreds of them
            yield Static(self._tool(), classes="body tool")
        elif block.kind == "prompt":
            with Collapsible(title=self._prompt_title(), collapsed=True):  # type: ignore[arg-type]
                yield Static(safe_content(block.text, "dim", multiline=True), classes="body")
        else:
            yield Static(self._line(), classes="body")
        self._shown = block.version

    def _tool(self) -> Content:
        return tool_title(self.block) + Content("\n") + tool_body(self.block)

    def _thought_title(self) -> Content:
        lines = len(self.block.text.splitlines())
        return safe_markup(
            "[i]thought[/i] · {} [dim]({} lines)[/dim]", _first_line(self.block.text), lines
        )

    def _prompt_title(self) -> Content:
        return safe_markup("[b]» you/corral[/b] · {}", _first_line(self.block.text))

    def _line(self) -> Content:
        block = self.block
        if block.kind == "plan":
            return plan_content(block)
        if block.kind == "turn_end":
            return safe_markup("[dim]— turn ended: {}[/dim]", block.text)
        return safe_markup("[yellow]{}[/yellow]", block.text)

    async def show(self) -> None:
        """Redraw what changed since the last time (a streamed message, a
        tool call's new status or output, the plan's entries)."""
        block = self.block
        if block.version == self._shown or not self.is_mounted:
            return
        self._shown = block.version
        if block.kind == "message":
            await self.query_one(Markdown).update(visible(block.text, multiline=True))
        elif block.kind == "thought":
            self.query_one(Collapsible).title = self._thought_title()  # type: ignore[assignment]
            self.query_one(".body", Static).update(
                safe_content(block.text, "italic", multiline=True)
            )
        elif block.kind == "tool":
            self.query_one(".body", Static).update(self._tool())
        elif block.kind == "prompt":
            self.query_one(".body", Static).update(safe_content(block.text, "dim", multiline=True))
        else:
            self.query_one(".body", Static).update(self._line())

    def text(self) -> str:
        """What this block shows, as plain text (tests, search)."""
        return "\n".join((self.block.title, self.block.text, self.block.output))


class ConversationView(VerticalScroll, can_focus=True):
    """The blocks, scrolled by keyboard (up/down, page up/down, home/end)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "line_up", "Up", show=False),
        Binding("down", "scroll_down", "Down", show=False),
        Binding("pageup", "earlier_page", "Page up", show=False),
        Binding("pagedown", "page_down", "Page down", show=False),
        Binding("home", "earliest", "Start", show=False),
        Binding("end", "latest", "End", show=False),
    ]

    DEFAULT_CSS = """
    ConversationView { height: 1fr; padding: 0 1; }
    ConversationView #earlier { color: $text-muted; margin: 0 0 1 0; }
    """

    def __init__(self, conversation: Conversation, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.conversation = conversation
        self.first_mounted = 0  # the earliest block mounted
        self.views: dict[int, BlockView] = {}

    def compose(self) -> ComposeResult:
        blocks = self.conversation.blocks
        self.first_mounted = max(0, len(blocks) - WINDOW)
        yield Static(self._earlier_words(), id="earlier")
        for index in range(self.first_mounted, len(blocks)):
            view = BlockView(blocks[index], index)
            self.views[index] = view
            yield view

    def on_mount(self) -> None:
        self.query_one("#earlier", Static).display = self.first_mounted > 0
        self.anchor()
        self.call_after_refresh(self._fill)

    async def _fill(self) -> None:
        """A tall screen shows more than `WINDOW` blocks: mount earlier ones
        until the view scrolls (or none are left)."""
        if self.max_scroll_y > 0 or self.first_mounted == 0:
            return
        await self.show_from(max(0, self.first_mounted - WINDOW))
        self.anchor()
        self.call_after_refresh(self._fill)

    def _earlier_words(self) -> Content:
        return safe_markup(
            "[dim]{} earlier blocks: [b]up[/b] here shows more, [b]home[/b] all of them[/dim]",
            self.first_mounted,
        )

    async def changed(self, index: int) -> None:
        """Block `index` was added or changed: mount or redraw it."""
        view = self.views.get(index)
        if view is not None:
            await view.show()
            return
        if index < self.first_mounted:
            return  # not shown yet: drawn as it is when it is
        view = BlockView(self.conversation.blocks[index], index)
        self.views[index] = view
        await self.mount(view)

    async def show_from(self, index: int) -> None:
        """Mount the blocks from `index` on (the operator went up to them)."""
        if index >= self.first_mounted:
            return
        earlier = self.query_one("#earlier", Static)
        views = [
            BlockView(self.conversation.blocks[i], i) for i in range(index, self.first_mounted)
        ]
        for view in views:
            self.views[view.index] = view
        await self.mount_all(views, after=earlier)
        self.first_mounted = index
        earlier.update(self._earlier_words())
        earlier.display = index > 0

    async def action_earliest(self) -> None:
        await self.show_from(0)
        self.release_anchor()
        self.call_after_refresh(self.scroll_home, animate=False)

    def action_latest(self) -> None:
        self.anchor()

    async def action_line_up(self) -> None:
        self.release_anchor()
        await self._more_at_the_top()
        self.scroll_up(animate=False)

    async def action_earlier_page(self) -> None:
        self.release_anchor()
        await self._more_at_the_top()
        self.scroll_page_up(animate=False)

    async def _more_at_the_top(self) -> None:
        """At the top with earlier blocks unshown: mount `WINDOW` more above,
        the view kept where it was (they appear above what was read)."""
        if self.scroll_y > 0 or self.first_mounted == 0:
            return
        before = self.virtual_size.height
        await self.show_from(max(0, self.first_mounted - WINDOW))
        self.call_after_refresh(self._keep_place, before)

    def _keep_place(self, before: int) -> None:
        self.scroll_to(y=self.virtual_size.height - before, animate=False, immediate=True)

    def action_scroll_down(self) -> None:
        self.scroll_down(animate=False)

    def action_page_down(self) -> None:
        self.scroll_page_down(animate=False)

    async def reveal(self, index: int) -> None:
        """Scroll block `index` into view (mounting it first if need be)."""
        await self.show_from(index)
        view = self.views.get(index)
        if view is not None:
            self.release_anchor()
            self.call_after_refresh(self.scroll_to_widget, view, animate=False, top=True)

    def mark(self, matches: list[int], current: int | None) -> None:
        """Highlight the search's matches, the current one more."""
        found = set(matches)
        for index, view in self.views.items():
            view.set_class(index in found, "-match")
            view.set_class(index == current, "-current")
