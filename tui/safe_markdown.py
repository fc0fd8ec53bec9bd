"""An agent's markdown, rendered as one renderable and never obeyed.

Textual's `Markdown` widget costs a widget per paragraph, list item and
code fence (a conversation's screenful was ~60 widgets and most of the
time to open it); this renders the same markdown through Rich into the
lines of one `Static`. What it shows is safe by construction: the text's
control characters are made visible first (`visible`), raw HTML is shown
as the text it is (not hidden, not interpreted), a link is drawn as its
words followed by its address and carries no link (nothing to click, the
address in plain sight), and headings sit at the left like the rest of a
chat rather than centred.

`highlight` styles every occurrence of a search's words in the rendered
lines (case-insensitive), so a search marks the words it found, not the
whole block."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import ClassVar

from markdown_it import MarkdownIt
from rich.console import Console, ConsoleOptions, JustifyMethod, RenderableType, RenderResult
from rich.markdown import Heading, Markdown
from rich.segment import Segment
from rich.style import Style
from rich.text import Text

from .visible import visible

HIGHLIGHT = Style(bgcolor="yellow", color="black", bold=True)


class _LeftHeading(Heading):
    """A heading at the left, like the rest of a chat (Rich centres some)."""

    LEVEL_ALIGN: ClassVar[dict[str, JustifyMethod]] = {}


# one parser for every message (building one costs more than parsing a message;
# `parse` keeps no state between calls)
_PARSER = MarkdownIt("commonmark", {"html": False}).enable("strikethrough").enable("table")


class SafeMarkdown(Markdown):
    """`text` (an agent's markdown) rendered without obeying any of it."""

    elements = {**Markdown.elements, "heading_open": _LeftHeading}

    def __init__(self, text: str) -> None:
        super().__init__("", hyperlinks=False)
        self.markup = visible(text, multiline=True)
        self.parsed = _PARSER.parse(self.markup)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for part in super().__rich_console__(console, options):
            # no link survives, whatever a renderer inside Rich decides
            if isinstance(part, Segment) and part.style is not None and part.style.link:
                part = Segment(part.text, part.style.update_link(None))
            yield part


class Highlighted:
    """`renderable` with each case-insensitive occurrence of `needle` in
    its rendered lines styled `style` (an occurrence cut by a line wrap is
    not marked: the lines are what the eye reads)."""

    def __init__(self, renderable: RenderableType, needle: str, style: Style = HIGHLIGHT) -> None:
        self.renderable = renderable
        self.pattern = re.compile(re.escape(needle), re.IGNORECASE) if needle else None
        self.style = style

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        lines = console.render_lines(self.renderable, options, pad=False)
        for line in lines:
            yield from self._marked(console, line)
            yield Segment.line()

    def _marked(self, console: Console, line: Iterable[Segment]) -> Iterable[Segment]:
        segments = list(line)
        if self.pattern is None:
            return segments
        text = Text.assemble(*((s.text, s.style or "") for s in segments if not s.control))
        for match in self.pattern.finditer(text.plain):
            text.stylize(self.style, *match.span())
        return list(text.render(console, end=""))
