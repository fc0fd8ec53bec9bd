"""The console's one way to show untrusted text: an agent's, a model's, a
check's, an intent, a file or branch name.

Such text is never handed to a markup parser (escaping it first was how a check
printing `[0m` next to `[link=…]` closed the console: Textual's parser read
what Rich's `escape` had left alone), never to a terminal as it is (`visible`
shows control characters, bidi and zero-width characters as marks), and is
cut to a bounded length. Every widget gets a Rich `Text` or a Textual `Content`
whose only styles are the ones corral chose.

`safe_text(value)` is one value as Rich `Text` (a log line, a table cell, an
option); `safe_markup(template, *values)` is corral's own Textual markup with
`{}` slots that untrusted values fill, as Textual `Content` (a `Static`): each
slot takes the styles around it, the value's own brackets stay text.
`made_visible(text)` is a `Text` corral built with untrusted words appended.
"""

from __future__ import annotations

import logging

from rich.style import StyleType
from rich.text import Span, Text
from textual.content import Content

from .visible import LIMIT, visible

log = logging.getLogger("corral.tui.safe_text")

__all__ = ["made_visible", "safe_content", "safe_markup", "safe_text", "visible"]

SLOT = "{}"
_PLACEHOLDER_BASE = 0xF0000  # supplementary private use: never in a template


def safe_text(
    value: object, style: StyleType = "", *, multiline: bool = False, limit: int = LIMIT
) -> Text:
    """`value` as plain text in `style` (corral's): never markup, never raises."""
    try:
        return Text(visible(value, multiline=multiline, limit=limit), style=style)
    except Exception as exc:  # a bad style is corral's bug, never a dead console
        log.warning("style %r could not be used: %s", style, exc)
        return Text(visible(value, multiline=multiline, limit=limit))


def safe_content(value: object, style: str = "", *, multiline: bool = False) -> Content:
    """`value` as Textual `Content` in `style` (corral's): for a `Static`."""
    shown = visible(value, multiline=multiline)
    try:
        return Content.styled(shown, style) if style else Content(shown)
    except Exception as exc:  # a bad style is corral's bug, never a dead console
        log.warning("style %r could not be used: %s", style, exc)
        return Content(shown)


def safe_markup(template: str, *values: object, multiline: bool = False) -> Content:
    """corral's own Textual markup `template`, each `{}` filled with one
    untrusted value made visible, in the styles the template puts around it."""
    pieces = template.split(SLOT)
    try:
        if len(pieces) - 1 != len(values):
            raise ValueError(f"{len(pieces) - 1} slots for {len(values)} values")
        marked = "".join(
            piece + (chr(_PLACEHOLDER_BASE + i) if i < len(values) else "")
            for i, piece in enumerate(pieces)
        )
        rendered = Content.from_markup(marked)
        return _fill(rendered, values, multiline)
    except Exception as exc:  # corral's template is wrong: show it all as text, never die
        log.warning("markup template %r could not be filled: %s", template, exc)
        return Content(visible(" ".join([template, *(visible(v) for v in values)])))


def _fill(rendered: Content, values: tuple[object, ...], multiline: bool) -> Content:
    plain = rendered.plain
    parts: list[Content] = []
    start = 0
    for i, value in enumerate(values):
        at = plain.find(chr(_PLACEHOLDER_BASE + i), start)
        if at < 0:  # the template's markup swallowed the slot
            continue
        parts.append(rendered[start:at])
        filled = Content(visible(value, multiline=multiline))
        for span in reversed([s for s in rendered.spans if s.start <= at < s.end]):
            filled = filled.stylize_before(span.style)  # innermost last, as markup nests
        parts.append(filled)
        start = at + 1
    parts.append(rendered[start:])
    return Content("").join(parts)


def made_visible(text: Text, *, multiline: bool = True) -> Text:
    """A `Text` corral built with untrusted words appended (an event line, a
    cell): the same text with its styles, every character made visible."""
    try:
        plain = text.plain
        if plain.replace("\n", "").isprintable() and (multiline or "\n" not in plain):
            return text
        cuts = sorted({s.start for s in text.spans} | {s.end for s in text.spans})
        out = Text(style=text.style, end=text.end, no_wrap=text.no_wrap, overflow=text.overflow)
        for piece in text.divide(cuts):
            shown = visible(piece.plain, multiline=multiline)
            out.append_text(Text(shown, spans=[Span(0, len(shown), s.style) for s in piece.spans]))
        return out
    except Exception as exc:  # a Text corral made: never a dead console for it
        log.warning("a Text could not be made visible piece by piece: %s", exc)
        return safe_text(text.plain if isinstance(text, Text) else text, multiline=multiline)
