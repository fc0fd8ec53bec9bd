"""Actions in one table: each key of the board and the session screen is one
record (key, guard, handler, words, remappable name) in tui/key_actions.py,
and each guard is a rule of the supervisor's `actions.ACTIONS`. A name the
table does not hold is an error — at import for a key, at the call for
`why_not` — never "allowed"."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from corral.supervisor.actions import ACTIONS, SessionFacts, UnknownAction, why_not
from corral.supervisor.states import CoderState
from corral.tui.key_actions import (
    BOARD_KEYS,
    SESSION_KEYS,
    KeyAction,
    bindings,
    by_handler,
    check_handlers,
)

FACTS = SessionFacts(session_id="s-1", state=CoderState.RUNNING)


def test_an_action_the_table_does_not_hold_is_an_error_not_allowed() -> None:
    """It was None ("allowed") for any misspelt name: `aprove` let a key act."""
    assert why_not("approve", FACTS) is not None  # nothing waits: refused
    with pytest.raises(UnknownAction, match="no session action 'aprove'"):
        why_not("aprove", FACTS)


def test_a_key_naming_a_rule_the_table_lacks_fails_when_its_module_is_imported(
    tmp_path: Path,
) -> None:
    module = tmp_path / "misspelt_keys.py"
    module.write_text(
        "from corral.tui.key_actions import KeyAction, checked\n"
        "KEYS = checked([KeyAction('approve', 'a', 'approve', 'Approve', guard='aprove')])\n"
    )
    spec = importlib.util.spec_from_file_location("misspelt_keys", module)
    assert spec is not None and spec.loader is not None
    with pytest.raises(UnknownAction, match="names no session action 'aprove'"):
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
    sys.modules.pop("misspelt_keys", None)


def test_a_key_whose_handler_the_screen_lacks_is_an_error() -> None:
    from corral.tui.app import CorralApp
    from corral.tui.screens.board import BoardScreen

    check_handlers(BoardScreen, BOARD_KEYS)  # what the board's import does
    check_handlers(CorralApp, BOARD_KEYS, of_app=True)
    with pytest.raises(UnknownAction, match="BoardScreen has no action_aprove"):
        check_handlers(BoardScreen, [KeyAction("aprove", "a", "aprove")])


def test_every_key_answers_to_the_supervisors_rule_or_says_its_own() -> None:
    for keys in (BOARD_KEYS, SESSION_KEYS):
        for key in keys:
            assert key.guard is None or key.guard in ACTIONS, key
    # every rule answers every state with nothing or one sentence (none raises)
    for name in ACTIONS:
        for state in CoderState:
            why = why_not(name, SessionFacts(session_id="s-1", state=state))
            assert why is None or (why and "\n" not in why), (name, state, why)


def test_the_screens_keys_are_their_records() -> None:
    from corral.tui.screens.board import BoardScreen
    from corral.tui.screens.session import SessionScreen

    for screen, keys in ((BoardScreen, BOARD_KEYS), (SessionScreen, SESSION_KEYS)):
        assert [(b.key, b.action, b.id) for b in screen.BINDINGS] == [  # type: ignore[union-attr]
            (k.key, k.handler, k.name if k.remappable else None) for k in keys
        ]
        assert bindings(keys) == screen.BINDINGS
    # Textual asks by the action's name: `open_worktree(True)` answers as `open_worktree`
    assert by_handler(BOARD_KEYS)["open_worktree"].guard == "open_worktree"
    assert by_handler(SESSION_KEYS)["cancel_session"].guard == "cancel"


def test_the_help_tables_are_the_records_and_a_stale_row_is_an_error() -> None:
    from corral.tui.key_actions import help_table
    from corral.tui.keymap import shown
    from corral.tui.screens.help import HELP

    for keys in (BOARD_KEYS, SESSION_KEYS):
        for key in keys:
            if key.help:
                cell = key.help_keys or f"`{shown(key.key)}`"
                assert f"| {cell} | {key.help} |" in HELP.splitlines(), key
    with pytest.raises(UnknownAction, match="the help names no key 'aprove'"):
        help_table(["aprove"], BOARD_KEYS)


def test_a_screens_own_set_of_keys_names_only_records() -> None:
    from corral.tui.key_actions import named
    from corral.tui.screens.session import GATE_KEYS

    assert {"confirm", "approve", "approve_checkout", "reject"} == GATE_KEYS
    with pytest.raises(UnknownAction, match="no key is named 'aprove'"):
        named(SESSION_KEYS, "confirm", "aprove")
