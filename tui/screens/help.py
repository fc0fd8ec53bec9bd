"""`?`: every key, and the two gates in two sentences each."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Markdown

HELP = """\
# corral

**Gate 1 — the contract.** Before any agent works, its task becomes shell checks that
define "done". Each check runs once on the untouched tree: red means it will prove the
work; green means it already passes and proves nothing yet.

**Gate 2 — the diff.** When the agent stops, corral re-runs every check itself; a model
saying "done" never counts. Only a green, verified diff reaches you, and nothing lands on
a branch until you approve it.

## Board

| key | action |
|---|---|
| `enter` | open the selected session |
| `tab` | jump to the next session that needs you |
| `f` | filter: all → needs you → in progress → finished → archived (when any) → each repo (when there are several) |
| `g` | group the rows by repository: a heading per repo with its counts, needs-you rows first in each (again: one list; off at each start) |
| `/` | search by name, intent, repo, id, agent or state as you type (loosely: `hlo` finds hello); `enter` also searches every session's events and its agent's transcript (`escape` clears) |
| `n` | start a new session |
| `d` | discuss the repo with a read-only assistant (needs a model); `ctrl+o` starts a prepared task |
| `c` | confirm the selected session's contract (asks; only `ctrl+y` goes ahead) |
| `a` | approve the verified diff (delivers branch `corral/<id>`), or accept a finding (asks; only `ctrl+y` goes ahead) |
| `o` | apply the verified diff to your checkout's working files (HEAD and index untouched) |
| `v` | re-verify: re-run the contract on the worktree as it is now |
| `D` | review the diff: tick files and hunks (`space`), then `ctrl+a` / `ctrl+o` delivers the ticked part |
| `r` | reject the diff or finding (asks, with an optional comment; only `ctrl+y` goes ahead) |
| `x` | cancel the session (asks first; the worktree is kept) |
| `R` | retry a failed, rejected or cancelled session: a new session, same intent and contract, fresh worktree; its agent is told what went wrong (asks first). On a dormant session, `R` revives it: its agent resumes its own conversation in the same worktree |
| `h` | archive a finished session (off the board, kept in the store); under the `archived` filter, `h` brings it back |
| `X` | delete a finished session for good (asks first): its worktree, events and record go; a delivered branch `corral/<id>` stays |
| `P` / `O` | a delivered branch: push it to `origin` / push it and open a pull request with `gh` (intent as title, contract and checks as body); both ask first |
| `N` | name the session: a short name shown beside its intent (empty clears it) |
| `w` / `E` | open the session's worktree in a new window of your tmux: a shell / `$EDITOR` (outside tmux: the `cd` command to run) |
| `p` | show or hide the live preview of the selected session's agent terminal |
| `T` | scheduled tasks: add (`n`), pause or resume (`space`), run now (`g`), delete (`x`) |
| `A` | adopt an agent pane you started in your own tmux: corral watches and steers it (questions, messages, live terminal), never kills it; `x` on its row releases it |
| `?` | this help |
| `q` | quit (sessions stay stored) |

## Session

| key | action |
|---|---|
| `escape` | back to the board |
| `l` | filter the event log: everything → agent → checks → problems |
| `T` | read the agent's own transcript again (shown under the log for agents that keep one, e.g. Claude Code) |
| `t` / `A` | type into the agent's live terminal (`ctrl+g` leaves) / attach your terminal to its tmux window |
| `ctrl+y` / `ctrl+a` / `ctrl+o` / `ctrl+r` | confirm the contract, approve to a branch, apply to the checkout, reject: never letters, and they act from the input too (each asks first) |
| `v` / `x` | re-verify, cancel |
| `R` / `h` / `N` | retry (the retry opens here), archive or bring back, name the session |
| `w` / `E` | open the worktree in a new window of your tmux: a shell / `$EDITOR` |
| `1`–`9` | answer a question with that option |
| `enter` in the input | send an answer (or an option's number), a contract revision (gate 1), or guidance |
| `escape` in the input | leave it: while the input has focus every key is typed, none acts |
| `ctrl+e` | back to the input (the footer shows it while the input is away) |
| `enter` or `f2` / `ctrl+n` / `delete` / `ctrl+s` | gate 1, on the checks table: edit the selected check, add one, remove it, edit the setup |
| `D` | review the verified diff (below) |
| `m` | an ACP agent's modes and models: choose one to switch to (others say why not) |
| `ctrl+b` | in the agent terminal: show its scrollback (again to go back live) |

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
        from ..keymap import help_text
        from .board import BoardScreen
        from .session import SessionScreen

        keys = getattr(self.app, "keys", {})
        screens = {"board": BoardScreen.BINDINGS, "session": SessionScreen.BINDINGS}
        with VerticalScroll(classes="dialog help"):
            yield Markdown(help_text(HELP, keys, screens))
