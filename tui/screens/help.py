"""`?`: every key, and the two gates in two sentences each. The board's and
the session screen's tables are their key records' (`key_actions.py`)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Markdown

from ..key_actions import BOARD_HELP_TABLE, SESSION_HELP_TABLE

HELP = f"""\
# corral

**Gate 1 — the contract.** Before any agent works, its task becomes shell checks that
define "done". Each check runs once on the untouched tree: red means it will prove the
work; green means it already passes and proves nothing yet.

**Gate 2 — the diff.** When the agent stops, corral re-runs every check itself; a model
saying "done" never counts. Only a green, verified diff reaches you, and nothing lands on
a branch until you approve it.

## Board

{BOARD_HELP_TABLE}

## Session

{SESSION_HELP_TABLE}

At gate 1 and on a question the input has focus when the screen opens. At gate 1 every
letter, digit, space or punctuation you type goes into the input, wherever the focus is:
typing never fires a key there. The footer shows only the keys that act now (while the
input has focus: only the gate's own control keys).

## Diff review

| key | action |
|---|---|
| `space` | tick / untick the selected file, or (in the hunk list) hunk |
| `ctrl+a` | approve the ticked part to branch `corral/<id>` (a partial selection is re-verified first) |
| `ctrl+o` | apply the ticked part to your checkout's working files |
| `d` | keep or discard the part you left out (kept in the worktree by default) |
| `f` | hide or show the file list, to read the diff full width (`tab` to the diff, then arrows scroll it both ways) |
| `ctrl+r` | reject, with an optional comment |
| `escape` | back |

## Discussion

| key | action |
|---|---|
| `enter` in the input | ask (read-only: it can read the repo, never change it) |
| `ctrl+x` | stop the reply |
| `p` | promote the discussion to a prepared task |
| `ctrl+o` (or `s`) | start the prepared task as a session |
| `ctrl+n` | a new discussion |
| `escape` | back to the board |

## Everywhere

`ctrl+p` opens the command palette (every action of the screen in front, and the
theme switcher: dark and light are remembered). What cannot be undone (confirm a contract,
approve or apply, reject, cancel, delete, remove a check) asks once, and typing never answers:
`ctrl+y` goes ahead (`ctrl+e`: the other way offered, e.g. retry with its edits); `enter`,
`escape` and `n` keep things as they are (the default button). Naming a session is a form:
there `enter` / `y` saves.

Press `escape` or `q` to close this help.
"""


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        from ..key_actions import BOARD_KEYS, SESSION_KEYS, bindings
        from ..keymap import help_text

        keys = getattr(self.app, "keys", {})
        screens = {"board": bindings(BOARD_KEYS), "session": bindings(SESSION_KEYS)}
        with VerticalScroll(classes="dialog help"):
            yield Markdown(help_text(HELP, keys, screens))
