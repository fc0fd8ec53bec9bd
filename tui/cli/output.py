"""Everything the command line writes to a terminal goes through here.

An intent, an agent's message, a model's words, a branch or file name can hold
escape sequences: OSC 52 writes the operator's clipboard, OSC 2 retitles the
window, CSI rewrites the screen. `say` is `print` for corral's words with such
text in them: every character a terminal would act on, and every bidi or
zero-width character, is shown as a visible mark (`visible`), so the command
line never writes a control sequence it did not make. JSON goes through
`say_json`: `json.dumps` escapes C0 controls but leaves C1 controls, bidi and
zero-width characters raw (with `ensure_ascii=False`), so those are written as
`\\uXXXX` escapes too; a JSON reader sees the same strings.
"""

from __future__ import annotations

import json
import sys
from typing import IO

from ..visible import visible

LIMIT = 1_000_000  # characters of one printed value: a runaway 100 MB line is cut


def say(
    *values: object,
    sep: str = " ",
    end: str = "\n",
    file: IO[str] | None = None,
    flush: bool = False,
) -> None:
    """`print`, with every character made visible (newlines and tabs kept)."""
    text = sep.join(visible(v, multiline=True, limit=LIMIT) for v in values)
    print(text, end=end, file=sys.stdout if file is None else file, flush=flush)


def _json_escape(ch: str) -> str:
    code = ord(ch)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def json_text(text: str) -> str:
    """Serialised JSON with every non-printable character inside its strings
    written as a `\\u` escape (outside strings JSON has only ASCII)."""
    if text.replace("\n", "").isprintable():
        return text
    return "".join(ch if ch.isprintable() or ch in "\n " else _json_escape(ch) for ch in text)


def say_json(
    value: object, *, indent: int | None = 2, ensure_ascii: bool = True, flush: bool = False
) -> None:
    """`value` as JSON on stdout (without `ensure_ascii`: UTF-8 kept, the invisible escaped)."""
    dumped = json.dumps(value, indent=indent, ensure_ascii=ensure_ascii)
    print(json_text(dumped), flush=flush)


def json_bytes(data: bytes) -> bytes:
    """JSON serialised as UTF-8 bytes as the command line writes it: every
    non-printable character inside its strings as a `\\u` escape."""
    return json_text(data.decode("utf-8", "replace")).encode("utf-8")


def write_json_bytes(data: bytes, *, escaped: bool = False) -> None:
    """JSON already serialised as UTF-8 bytes (the stored rows) on stdout;
    `escaped`: `data` is what `json_bytes` made (the listing kept from an
    earlier call, see stored_rows.py), written as it is."""
    out = data if escaped else json_bytes(data)
    sys.stdout.flush()
    sys.stdout.buffer.write(out)
    sys.stdout.buffer.write(b"\n")
