"""The session screen's key bindings, apart from the screen: the console
checks the operator's keymap against them at launch, before the board's
first frame, without loading the session screen and its widgets (a rich
log, tables) that the board does not show.

What passes a gate (confirm, approve, apply to the checkout, reject) is on
a control key, never a letter: at a gate every printable key is typed into
the input, and the question these keys open keeps on enter (`confirm.py`).
The gate 1 table's edits are on keys no one types in prose either."""

from __future__ import annotations

from textual.binding import Binding, BindingType

from ..keymap import with_ids

SESSION_BINDINGS: list[BindingType] = with_ids([
    Binding("escape", "back", "Board"),
    Binding("ctrl+y", "confirm", "Confirm"),
    Binding("ctrl+a", "approve", "Approve"),
    Binding("ctrl+o", "approve_checkout", "To checkout"),
    Binding("v", "reverify", "Re-verify", show=False),
    Binding("ctrl+r", "reject", "Reject"),
    Binding("ctrl+e", "focus_reply", "Type"),
    Binding("x", "cancel_session", "Cancel"),
    Binding("A", "attach", "Attach"),
    Binding("R", "retry", "Retry"),
    Binding("h", "archive", "Archive", show=False),
    Binding("N", "rename", "Name", show=False),
    Binding("w", "open_worktree", "Worktree shell", show=False),
    Binding("E", "open_worktree(True)", "Worktree in $EDITOR", show=False),
    Binding("l", "cycle_log_filter", "Log filter"),
    Binding("D", "review_diff", "Review diff"),
    Binding("t", "focus_terminal", "Terminal"),
    Binding("T", "transcript", "Transcript", show=False),
    Binding("f2", "edit_check", "Edit check"),
    Binding("ctrl+n", "add_check", "Add check"),
    Binding("delete", "remove_check", "Remove check"),
    Binding("ctrl+s", "edit_setup", "Edit setup"),
    Binding("m", "agent_settings", "Mode/model", show=False),
    Binding("question_mark", "app.help", "Help"),
    *(Binding(str(i), f"answer({i})", show=False) for i in range(1, 10)),
])  # fmt: skip
