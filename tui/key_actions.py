"""Every key of the board and the session screen, one record each: its key,
its guard (the supervisor's `actions.ACTIONS` rule it answers to, or the
screen's own rule with its why-not sentence), its handler, its footer and
palette words, its help row and its remappable name (`[keys]`). The screens'
BINDINGS, the footer's `check_action`, the command palette, the help's tables
(`?`, and their remapping) and the "why not" notices all read these records,
in the shape of lazygit's per-view `GetKeybindings` and Harlequin's
`actions.py`. The session screen's records are checked against the
operator's keymap at launch without loading that screen.

A record naming a guard the supervisor's table does not hold, two records of
one screen with one name, or a help row naming no record is an error when
this module is imported (`UnknownAction`): a misspelt name can no more read
as "allowed". Each screen checks at its import that it has every handler its
records name (`check_handlers`)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from textual.binding import Binding, BindingType

from corral.supervisor.actions import ACTIONS, UnknownAction

from .keymap import shown


@dataclass(frozen=True)
class KeyAction:
    """One key of one screen."""

    name: str  # the remappable name (`[keys] approve = "A"`) and the binding's id
    key: str  # the default key, as Textual names it
    handler: str  # the Textual action run: `approve`, `open_worktree(True)`, `app.help`
    label: str = ""  # the footer's and the palette's words
    guard: str | None = None  # the supervisor's rule (`actions.ACTIONS`); None: the screen's own
    refused: str = ""  # the screen's own rule's sentence when the key cannot act
    show: bool = True  # in the footer (when it can act)
    priority: bool = False
    remappable: bool = True
    help: str = ""  # its row in the help (`?`); "" when another record's row tells it
    help_keys: str = ""  # that row's key cell when it tells several keys (`P` / `O`)

    @property
    def method(self) -> str:
        """The name of the screen's (or the app's) method that runs it."""
        return "action_" + self.handler.removeprefix("app.").split("(", 1)[0]

    def binding(self) -> Binding:
        return Binding(
            self.key,
            self.handler,
            self.label,
            show=self.show,
            priority=self.priority,
            id=self.name if self.remappable else None,
        )


def checked(keys: Iterable[KeyAction]) -> tuple[KeyAction, ...]:
    """`keys`, when every guard is the supervisor's and every name is one key's."""
    out = tuple(keys)
    names: set[str] = set()
    for k in out:
        if k.guard is not None and k.guard not in ACTIONS:
            raise UnknownAction(
                f"key {k.key!r} ({k.name}) names no session action {k.guard!r}; "
                f"the actions are {', '.join(ACTIONS)}"
            )
        if k.remappable and k.name in names:
            raise UnknownAction(f"two keys of one screen are both named {k.name!r}")
        names.add(k.name)
    return out


def bindings(keys: Iterable[KeyAction]) -> list[BindingType]:
    return [k.binding() for k in keys]


def check_handlers(owner: type, keys: Iterable[KeyAction], *, of_app: bool = False) -> None:
    """Raise `UnknownAction` when `owner` has no method for a record's
    handler: a screen checks its own records at its import, the app its
    `app.` ones (`of_app`) at its own."""
    for k in keys:
        if k.handler.startswith("app.") != of_app:
            continue
        if not callable(getattr(owner, k.method, None)):
            raise UnknownAction(f"{owner.__name__} has no {k.method} for key {k.key!r}")


BOARD_KEYS: tuple[KeyAction, ...] = checked([
    KeyAction("help", "question_mark", "app.help", "Help",
              help='this help'),
    KeyAction("quit", "q", "app.quit", "Quit",
              help='quit (sessions stay stored)'),
    KeyAction("open", "enter", "open", "Open", remappable=False,
              help='open the selected session'),
    KeyAction("new", "n", "new", "New",
              help='start a new session'),
    KeyAction("discuss", "d", "discuss", "Discuss",
              help=(
                  "discuss the repo with a read-only assistant (needs a model); "
                  "`ctrl+o` starts a prepared task"
              )),
    KeyAction("confirm", "c", "confirm", "Confirm", guard="confirm",
              help="confirm the selected session's contract (asks; only `ctrl+y` goes ahead)"),
    KeyAction("approve", "a", "approve", "Approve", guard="approve",
              help=(
                  "approve the verified diff (delivers branch `corral/<id>`), or "
                  "accept a finding (asks; only `ctrl+y` goes ahead)"
              )),
    KeyAction("approve_checkout", "o", "approve_checkout", "To checkout", guard="approve_checkout",
              show=False,
              help=(
                  "apply the verified diff to your checkout's working files (HEAD and"
                  " index untouched)"
              )),
    KeyAction("review_diff", "D", "review_diff", "Review diff", guard="review_diff",
              help=(
                  "review the diff: tick files and hunks (`space`), then `ctrl+a` / "
                  "`ctrl+o` delivers the ticked part"
              )),
    KeyAction("reverify", "v", "reverify", "Re-verify", guard="reverify", show=False,
              help='re-verify: re-run the contract on the worktree as it is now'),
    KeyAction("reject", "r", "reject", "Reject", guard="reject",
              help=(
                  "reject the diff or finding (asks, with an optional comment; only "
                  "`ctrl+y` goes ahead)"
              )),
    KeyAction("cancel_session", "x", "cancel_session", "Cancel", guard="cancel",
              help='cancel the session (asks first; the worktree is kept)'),
    KeyAction("retry", "R", "retry", "Retry", guard="retry",
              help=(
                  "retry a failed, rejected or cancelled session: a new session, same"
                  " intent and contract, fresh worktree; its agent is told what went "
                  "wrong (asks first). On a dormant session, `R` revives it: its "
                  "agent resumes its own conversation in the same worktree"
              )),
    KeyAction("archive", "h", "archive", "Archive", guard="archive",
              help=(
                  "archive a finished session (off the board, kept in the store); "
                  "under the `archived` filter, `h` brings it back"
              )),
    KeyAction("delete_session", "X", "delete_session", "Delete", guard="delete", show=False,
              help=(
                  "delete a finished session for good (asks first): its worktree, "
                  "events and record go; a delivered branch `corral/<id>` stays"
              )),
    KeyAction("push_branch", "P", "push_branch", "Push branch", guard="push", show=False,
              help=(
                  "a delivered branch: push it to `origin` / push it and open a pull "
                  "request with `gh` (intent as title, contract and checks as body); "
                  "both ask first"
              ),
              help_keys='`P` / `O`'),
    KeyAction("pull_request", "O", "pull_request", "Open pull request", guard="pull_request",
              show=False),
    KeyAction("rename", "N", "rename", "Name", guard="rename", show=False,
              help='name the session: a short name shown beside its intent (empty clears it)'),
    KeyAction("open_worktree", "w", "open_worktree", "Worktree shell", guard="open_worktree",
              show=False,
              help=(
                  "open the session's worktree in a new window of your tmux: a shell "
                  "/ `$EDITOR` (outside tmux: the `cd` command to run)"
              ),
              help_keys='`w` / `E`'),
    KeyAction("open_worktree_editor", "E", "open_worktree(True)", "Worktree in $EDITOR",
              guard="open_worktree", show=False),
    KeyAction("toggle_preview", "p", "toggle_preview", "Preview", show=False,
              help="show or hide the live preview of the selected session's agent terminal"),
    KeyAction("next_needs_you", "tab", "next_needs_you", "Next needs-you", priority=True,
              remappable=False,
              help='jump to the next session that needs you'),
    KeyAction("cycle_filter", "f", "cycle_filter", "Filter",
              help=(
                  "filter: all → needs you → in progress → finished → archived (when "
                  "any) → each repo (when there are several)"
              )),
    KeyAction("toggle_groups", "g", "toggle_groups", "Group by repo", show=False,
              help=(
                  "group the rows by repository: a heading per repo with its counts, "
                  "needs-you rows first in each (again: one list; off at each start)"
              )),
    KeyAction("search", "slash", "search", "Search",
              help=(
                  "search by name, intent, repo, id, agent or state as you type "
                  "(loosely: `hlo` finds hello); `enter` also searches every "
                  "session's events and its agent's transcript (`escape` clears)"
              )),
    KeyAction("tasks", "T", "tasks", "Tasks", show=False,
              help=(
                  "scheduled tasks: add (`n`), pause or resume (`space`), run now "
                  "(`g`), delete (`x`)"
              )),
    KeyAction("adopt", "A", "adopt", "Adopt a tmux pane", show=False,
              help=(
                  "adopt an agent pane you started in your own tmux: corral watches "
                  "and steers it (questions, messages, live terminal), never kills "
                  "it; `x` on its row releases it"
              )),
])  # fmt: skip

# What passes a gate (confirm, approve, apply to the checkout, reject) is on a
# control key, never a letter: at a gate every printable key is typed into the
# input, and the question these keys open keeps on enter (`confirm.py`). The
# gate 1 table's edits are on keys no one types in prose either.
_AT_GATE_ONE = "only at gate 1, while the contract waits for you."

SESSION_KEYS: tuple[KeyAction, ...] = checked([
    KeyAction("back", "escape", "back", "Board", remappable=False,
              help='back to the board'),
    KeyAction("confirm", "ctrl+y", "confirm", "Confirm", guard="confirm",
              help=(
                  "confirm the contract, approve to a branch, apply to the checkout, "
                  "reject: never letters, and they act from the input too (each asks "
                  "first)"
              ),
              help_keys='`ctrl+y` / `ctrl+a` / `ctrl+o` / `ctrl+r`'),
    KeyAction("approve", "ctrl+a", "approve", "Approve", guard="approve"),
    KeyAction("approve_checkout", "ctrl+o", "approve_checkout", "To checkout",
              guard="approve_checkout"),
    KeyAction("reverify", "v", "reverify", "Re-verify", guard="reverify", show=False,
              help='re-verify, cancel', help_keys='`v` / `x`'),
    KeyAction("reject", "ctrl+r", "reject", "Reject", guard="reject"),
    KeyAction("focus_reply", "ctrl+e", "focus_reply", "Type",
              help='back to the input (the footer shows it while the input is away)'),
    KeyAction("cancel_session", "x", "cancel_session", "Cancel", guard="cancel"),
    KeyAction("attach", "A", "attach", "Attach",
              refused="This agent has no terminal to attach to (it runs without a tmux pane)."),
    KeyAction("retry", "R", "retry", "Retry", guard="retry",
              help=(
                  "retry (the retry opens here), archive or bring back, name the "
                  "session"
              ),
              help_keys='`R` / `h` / `N`'),
    KeyAction("archive", "h", "archive", "Archive", guard="archive", show=False),
    KeyAction("rename", "N", "rename", "Name", show=False),
    KeyAction("open_worktree", "w", "open_worktree", "Worktree shell", show=False,
              refused="This session has no worktree on this machine now (removed, or not made).",
              help=(
                  "open the worktree in a new window of your tmux: a shell / "
                  "`$EDITOR`"
              ),
              help_keys='`w` / `E`'),
    KeyAction("open_worktree_editor", "E", "open_worktree(True)", "Worktree in $EDITOR",
              show=False,
              refused="This session has no worktree on this machine now (removed, or not made)."),
    KeyAction("cycle_log_filter", "l", "cycle_log_filter", "Log filter",
              help='filter the event log: everything → agent → checks → problems'),
    KeyAction("review_diff", "D", "review_diff", "Review diff", guard="review_diff",
              help='review the verified diff (below)'),
    KeyAction("focus_terminal", "t", "focus_terminal", "Terminal",
              refused="This session has no live agent terminal now.",
              help=(
                  "type into the agent's live terminal (`ctrl+g` leaves) / attach "
                  "your terminal to its tmux window"
              ),
              help_keys='`t` / `A`'),
    KeyAction("transcript", "T", "transcript", "Transcript", show=False,
              help=(
                  "read the agent's own transcript again (shown under the log for "
                  "agents that keep one, e.g. Claude Code)"
              )),
    KeyAction("edit_check", "f2", "edit_check", "Edit check",
              refused="The checks can be edited " + _AT_GATE_ONE,
              help=(
                  "gate 1, on the checks table: edit the selected check, add one, "
                  "remove it, edit the setup"
              ),
              help_keys='`enter` or `f2` / `ctrl+n` / `delete` / `ctrl+s`'),
    KeyAction("add_check", "ctrl+n", "add_check", "Add check",
              refused="Checks can be added " + _AT_GATE_ONE),
    KeyAction("remove_check", "delete", "remove_check", "Remove check",
              refused="Checks can be removed " + _AT_GATE_ONE),
    KeyAction("edit_setup", "ctrl+s", "edit_setup", "Edit setup",
              refused="The setup can be edited " + _AT_GATE_ONE),
    KeyAction("agent_settings", "m", "agent_settings", "Mode/model", show=False,
              help=(
                  "an ACP agent's modes and models: choose one to switch to (others "
                  "say why not)"
              )),
    KeyAction("help", "question_mark", "app.help", "Help"),
    *(KeyAction(f"answer_{i}", str(i), f"answer({i})", show=False, remappable=False,
                help="answer a question with that option" if i == 1 else "",
                help_keys="`1`–`9`" if i == 1 else "")
      for i in range(1, 10)),
])  # fmt: skip


HelpRow = str | tuple[str, str]  # a record's name, or (key cell, text) of a row of its own


def help_table(rows: Iterable[HelpRow], keys: Iterable[KeyAction]) -> str:
    """A screen's help table in markdown: each row a record's keys and help
    (its default key; `keymap.help_text` shows a remapped one), or a row of
    the screen's own. A name no record of the screen has is `UnknownAction`."""
    named = {k.name: k for k in keys}
    lines = ["| key | action |", "|---|---|"]
    for row in rows:
        if isinstance(row, tuple):
            cell, text = row
        elif row in named and named[row].help:
            key = named[row]
            cell, text = key.help_keys or f"`{shown(key.key)}`", key.help
        else:
            raise UnknownAction(f"the help names no key {row!r} with a help text of its own")
        lines.append(f"| {cell} | {text} |")
    return "\n".join(lines)


def named(keys: Iterable[KeyAction], *names: str) -> frozenset[str]:
    """`names`, each a record's (a screen's set of its own keys, e.g. the
    gate keys); a name no record has is `UnknownAction`, at the screen's import."""
    known = {k.name for k in keys}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise UnknownAction(f"no key is named {', '.join(map(repr, unknown))}")
    return frozenset(names)


def by_handler(keys: Iterable[KeyAction]) -> dict[str, KeyAction]:
    """The records by handler and by the action's name (`open_worktree` for
    `open_worktree(True)`: Textual asks `check_action` by the name): the first
    record of a name answers for it."""
    out: dict[str, KeyAction] = {}
    for k in keys:
        out.setdefault(k.handler, k)
        out.setdefault(k.handler.split("(", 1)[0], k)
    return out


# The help's tables (`?`), row by row: a record's name (its keys and `help`),
# or a row of the screen's that is no key of its own (typing into the input).
BOARD_HELP: tuple[HelpRow, ...] = (
    "open",
    "next_needs_you",
    "cycle_filter",
    "toggle_groups",
    "search",
    "new",
    "discuss",
    "confirm",
    "approve",
    "approve_checkout",
    "reverify",
    "review_diff",
    "reject",
    "cancel_session",
    "retry",
    "archive",
    "delete_session",
    "push_branch",
    "rename",
    "open_worktree",
    "toggle_preview",
    "tasks",
    "adopt",
    "help",
    "quit",
)

SESSION_HELP: tuple[HelpRow, ...] = (
    "back",
    "cycle_log_filter",
    "transcript",
    "focus_terminal",
    "confirm",
    "reverify",
    "retry",
    "open_worktree",
    "answer_1",
    (
        "`enter` in the input",
        "send an answer (or an option's number), a contract revision (gate 1), or guidance",
    ),
    ("`escape` in the input", "leave it: while the input has focus every key is typed, none acts"),
    "focus_reply",
    "edit_check",
    "review_diff",
    "agent_settings",
    ("`ctrl+b`", "in the agent terminal: show its scrollback (again to go back live)"),
)
BOARD_HELP_TABLE = help_table(BOARD_HELP, BOARD_KEYS)  # made at import: a stale name fails here
SESSION_HELP_TABLE = help_table(SESSION_HELP, SESSION_KEYS)
