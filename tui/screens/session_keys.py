"""The session screen's key bindings, apart from the screen: the console
checks the operator's keymap against them at launch, before the board's
first frame, without loading the session screen and its widgets (a rich
log, tables) that the board does not show."""

from __future__ import annotations

from textual.binding import Binding, BindingType

from ..keymap import with_ids

SESSION_BINDINGS: list[BindingType] = with_ids([
    Binding("escape", "back", "Board"),
    Binding("c", "confirm", "Confirm"),
    Binding("a", "approve", "Approve"),
    Binding("o", "approve_checkout", "To checkout"),
    Binding("v", "reverify", "Re-verify", show=False),
    Binding("r", "reject", "Reject"),
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
    Binding("e", "edit_check", "Edit check"),
    Binding("plus", "add_check", "Add check"),
    Binding("delete", "remove_check", "Remove check"),
    Binding("s", "edit_setup", "Edit setup"),
    Binding("m", "agent_settings", "Mode/model", show=False),
    Binding("question_mark", "app.help", "Help"),
    *(Binding(str(i), f"answer({i})", show=False) for i in range(1, 10)),
])  # fmt: skip
