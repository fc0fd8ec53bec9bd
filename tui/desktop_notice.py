"""The terminal's own desktop notification: OSC 9 (iTerm2, WezTerm, kitty,
foot, Windows Terminal) and OSC 777 (VTE, urxvt), both written, as a terminal
shows the one it knows and ignores the other. Inside tmux each is wrapped for
passthrough (tmux hands it to the outer terminal when `allow-passthrough` is
on, and drops it quietly when not).

The words come from the supervisor's notice, already stripped of control
characters; stripping again here keeps this writer safe on its own."""

from __future__ import annotations

import html
import os

from .visible import visible

ESC, BEL = "\x1b", "\x07"
NOTICE_LIMIT = 500  # characters of a notice's title or body


def _clean(text: str) -> str:
    return visible(text, limit=NOTICE_LIMIT).replace(";", ",")


def desktop_words(text: str) -> str:
    """`text` for `notify-send`: visible, and its `<` `&` shown as written
    (notification daemons read a body as markup: `<a href>`, `<img src>`)."""
    return html.escape(visible(text, multiline=True, limit=NOTICE_LIMIT), quote=False)


def osc_notification(title: str, body: str, *, in_tmux: bool | None = None) -> str:
    """The bytes to write for one notification."""
    title, body = _clean(title), _clean(body)
    sequences = [f"{ESC}]9;{title}: {body}{BEL}", f"{ESC}]777;notify;{title};{body}{BEL}"]
    if in_tmux is None:
        in_tmux = bool(os.environ.get("TMUX"))
    if in_tmux:
        sequences = [f"{ESC}Ptmux;{s.replace(ESC, ESC + ESC)}{ESC}\\" for s in sequences]
    return "".join(sequences)
