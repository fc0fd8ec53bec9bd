"""`?` lists every key on every screen: a key bound on a screen but missing
from the help is a key the operator cannot discover."""

from __future__ import annotations

import re

import pytest
from textual.binding import Binding

from corral.tui.confirm import ConfirmScreen
from corral.tui.screens.board import BoardScreen
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


@pytest.mark.slow
async def test_the_help_and_dialogs_fit_an_80_by_24_terminal(tmp_path: object) -> None:
    """The help modal (90 wide where there is room) never runs past the
    screen's edge: at 80 columns its right border is on screen and it scrolls."""
    from pathlib import Path

    from textual.containers import VerticalScroll

    from corral.tui.app import CorralApp
    from corral.tui.screens.help import HelpScreen

    from .conftest import board_ready, make_repo, scripted_supervisor, until

    assert isinstance(tmp_path, Path)
    repo = make_repo(tmp_path / "repo")
    sup = scripted_supervisor(tmp_path / "state", None)
    app = CorralApp(sup, default_repo=repo)
    async with app.run_test(size=(80, 24)) as pilot:
        await board_ready(app, pilot)
        await pilot.press("question_mark")
        screen = await until(pilot, "the help", lambda: isinstance(app.screen, HelpScreen))
        assert screen
        box = app.screen.query_one(VerticalScroll)
        await until(pilot, "laid out", lambda: box.region.width > 0)
        assert box.region.right <= 80 and box.region.bottom <= 24
        assert box.max_scroll_y > 0  # the rest is a scroll away, not cut
