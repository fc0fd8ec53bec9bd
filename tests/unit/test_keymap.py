"""`[keys]`: what the console refuses at start (one sentence each) and how `?`
shows remapped keys."""

from __future__ import annotations

from pathlib import Path

import pytest

from corral.tui.keymap import KeysError, check, help_text, read_keys
from corral.tui.screens.board import BoardScreen
from corral.tui.screens.help import HELP
from corral.tui.screens.session import SessionScreen

SCREENS = {"board": BoardScreen.BINDINGS, "session": SessionScreen.BINDINGS}
WHERE = Path("/home/me/.config/corral/config.toml")


@pytest.mark.parametrize(
    ("keys", "sentence"),
    [
        ({"approve": "r"}, "puts 'approve' and 'reject' both on 'r' on the board"),
        ({"approve": "z", "reject": "z"}, "puts 'approve' and 'reject' both on 'z'"),
        ({"aprove": "z"}, "names no action 'aprove'; the actions are add_check, adopt,"),
        ({"search": "escape"}, "search = 'escape': that key is kept for the console itself"),
        ({"reject": "1"}, "reject = '1': that key is kept for the console itself"),
        ({"toggle_preview": "n"}, "puts 'new' and 'toggle_preview' both on 'n' on the board"),
        ({"focus_terminal": "escape"}, "focus_terminal = 'escape': that key is kept"),
    ],
)
def test_a_table_that_cannot_work_is_refused_in_one_sentence(
    keys: dict[str, str], sentence: str
) -> None:
    with pytest.raises(KeysError) as caught:
        check(keys, SCREENS, WHERE)
    message = str(caught.value)
    assert message.startswith(f"{WHERE}: [keys] ") and sentence in message
    assert "\n" not in message


def test_a_key_one_screen_leaves_free_is_free_there(tmp_path: Path) -> None:
    # `t` is the session's terminal key; the board has no `t`, and the
    # preview is only the board's
    assert check({"toggle_preview": "t"}, SCREENS, WHERE) == {"toggle_preview": "t"}


def test_keys_are_read_as_textual_names_and_swaps_are_fine(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[keys]\nsearch = "?"\nhelp = "F1"\napprove = "r"\nreject = "a"\n')
    keys = read_keys(config)
    assert keys == {"search": "question_mark", "help": "f1", "approve": "r", "reject": "a"}
    assert check(keys, SCREENS, config) == keys
    text = help_text(HELP, keys, SCREENS)
    assert "| `?` | search by name" in text
    assert "| `r` | approve the verified diff" in text and "| `a` | reject the diff" in text
    # the diff review's own keys are not the board's: unchanged
    assert "| `ctrl+a` | approve the ticked part" in text
    assert "| `ctrl+y` / `r` / `ctrl+o` / `a` | confirm the contract, approve" in text


def test_no_table_no_change(tmp_path: Path) -> None:
    assert read_keys(tmp_path / "none.toml") == {}
    assert help_text(HELP, {}, SCREENS) == HELP
    config = tmp_path / "config.toml"
    config.write_text("[keys]\napprove = 3\n")
    with pytest.raises(KeysError, match="maps an action to a key as text"):
        read_keys(config)
