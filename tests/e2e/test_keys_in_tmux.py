"""Keys your way, as a person sets them: `[keys]` in the configuration file
moves board keys; the footer and `?` show the new keys, the new key acts and
the old one no longer does; a table that cannot work stops the console at
start with one sentence."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_notify_in_tmux import Console

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(180),
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]


@pytest.fixture
def console(tmp_path: Path) -> Iterator[Console]:
    c = Console(tmp_path)
    try:
        yield c
    finally:
        c.stop()


def test_remapped_keys_show_in_the_footer_and_help_and_act(console: Console) -> None:
    # wide: a remapped key joins the footer's end
    console.start('[keys]\nreject = "z"\ntoggle_preview = "ctrl+t"\n', width=220)
    console.wait("the demo board", lambda: "3 sessions" in console.screen())
    console.wait("z in the footer", lambda: " z Reject" in console.screen())
    assert " r Reject" not in console.screen()
    console.tmux("send-keys", "?")
    console.wait("the help", lambda: "Gate 1" in console.screen())

    def reject_row() -> str:
        console.tmux("send-keys", "Down")  # scrolls the help down to the row
        lines = console.screen().splitlines()
        return next((ln for ln in lines if "reject the diff or finding" in ln), "")

    console.wait("the help's reject row", lambda: bool(reject_row()))
    assert reject_row().split("│")[1].strip() == "z", reject_row()
    console.tmux("send-keys", "Escape")
    console.wait("the help to close", lambda: "Gate 1" not in console.screen())
    # the preview shows on a wide terminal; p no longer hides it, ctrl+t does
    console.wait("the preview", lambda: "agent terminal" in console.screen())
    console.tmux("send-keys", "p")
    console.tmux("send-keys", "C-t")
    console.wait("ctrl+t to hide the preview", lambda: "agent terminal" not in console.screen())


def test_two_actions_on_one_key_stop_the_console_with_a_sentence(console: Console) -> None:
    console.start('[keys]\napprove = "r"\n')
    console.wait("the console to refuse", lambda: "corral-exited-with-" in console.screen())
    screen = console.screen()
    assert "corral-exited-with-2" in screen, screen
    sentence = "puts 'approve' and 'reject' both on 'r' on the board; give each its own key"
    assert sentence.replace(" ", "") in "".join(screen.split()), screen
