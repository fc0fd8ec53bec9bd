"""Untrusted text made visible: every byte an agent, a model, a check or a
repository produced is shown as what it is, never obeyed.

A terminal obeys control characters (an escape sequence retitles the window,
writes the clipboard, rewrites the screen), a bidi override reorders what the
eye reads, a zero-width character hides text in plain sight, and an invalid
byte or a lone surrogate can make an encoder raise. `visible` turns all of them
into printable marks, cuts a huge value to a bounded length, and never raises.
The console (`safe_text`) and the command line (`cli/output`) both go through
it, so the two promise the same thing.

The marks: C0 controls and DEL as Unicode control pictures (ESC is `␛`), C1
controls as `\\x9b`, format characters (bidi controls, zero-width characters,
tag characters), line/paragraph separators and unassigned code points as
`⟨U+202E⟩`, lone surrogates and invalid UTF-8 as `�`, other spaces as a space.
A newline stays a newline only where the caller allows several lines (else
`␤`); a tab stays a tab there (else a space); CR LF is a newline, a lone CR `␍`.
"""

from __future__ import annotations

import logging
import unicodedata

log = logging.getLogger("corral.tui.visible")

LIMIT = 20_000  # characters kept of one value; a 1 MB line is cut with a note
REPLACEMENT = "\ufffd"
DEL_PICTURE = "\u2421"  # ␡
NEWLINE_PICTURE = "\u2424"  # ␤
CR_PICTURE = "\u240d"  # ␍


def _mark(ch: str, multiline: bool) -> str:
    code = ord(ch)
    if ch == "\n":
        return ch if multiline else NEWLINE_PICTURE
    if ch == "\t":
        return ch if multiline else " "
    if code < 0x20:
        return chr(0x2400 + code)  # ␀ … ␟ (␛ for ESC)
    if code == 0x7F:
        return DEL_PICTURE
    if code < 0xA0:
        return f"\\x{code:02x}"  # C1 controls have no pictures
    category = unicodedata.category(ch)
    if category == "Cs":
        return REPLACEMENT
    if category == "Zs":
        return " "
    if category == "Co":
        return ch  # private use: icon fonts; a terminal draws it, never obeys it
    return f"\u27e8U+{code:04X}\u27e9"  # ⟨U+202E⟩: Cf, Zl, Zp, Cn


def _as_str(value: object) -> str:
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value[: LIMIT * 4]).decode("utf-8", "replace")
    return value if isinstance(value, str) else str(value)


def visible(value: object, *, multiline: bool = False, limit: int = LIMIT) -> str:
    """`value` as printable text (see the module's docstring); never raises."""
    try:
        text = _as_str(value)
        cut = len(text) - limit if len(text) > limit else 0
        if cut:
            text = text[:limit]
        if multiline:
            text = text.replace("\r\n", "\n")
        if not text.isprintable():
            text = "".join(ch if ch.isprintable() else _mark(ch, multiline) for ch in text)
        if cut:
            text += f"… ({cut:,} more characters not shown)"
        return text
    except Exception as exc:  # a value that cannot even be read is shown as such
        # its type only: the value's own text is what could not be read
        log.info("a value could not be read to be shown (%s)", type(exc).__name__)
        return "⟨unprintable value⟩"
