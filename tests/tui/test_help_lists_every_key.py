"""`?` lists every key on every screen: a key bound on a screen but missing
from the help is a key the operator cannot discover."""

from __future__ import annotations

import re

from textual.binding import Binding

from corral.tui.screens.board import BoardScreen
from corral.tui.screens.confirm import ConfirmScreen
from corral.tui.screens.diff import DiffScreen
from corral.tui.screens.discuss import DiscussScreen
from corral.tui.screens.help import HELP
from corral.tui.screens.session import ReplyInput, SessionScreen
from corral.tui.widgets.terminal import TerminalView

SPELLING = {"question_mark": "?", "slash": "/", "plus": "+"}


def _keys(bindings: list) -> set[str]:  # type: ignore[type-arg]
    keys: set[str] = set()
    for b in bindings:
        if isinstance(b, Binding):
            for key in b.key.split(","):
                keys.add(SPELLING.get(key, key))
    return keys


def test_every_bound_key_is_in_the_help() -> None:
    documented = set(re.findall(r"`([^`]+)`", HELP))
    documented |= {part for doc in list(documented) for part in re.split(r"\s*/\s*|\s+", doc)}
    digits = {str(i) for i in range(1, 10)}  # documented as `1`–`9`
    for screen in (
        BoardScreen,
        SessionScreen,
        DiffScreen,
        DiscussScreen,
        TerminalView,
        ReplyInput,
        ConfirmScreen,
    ):
        missing = _keys(screen.BINDINGS) - documented - digits
        assert not missing, f"{screen.__name__} binds {sorted(missing)} but the help omits them"
