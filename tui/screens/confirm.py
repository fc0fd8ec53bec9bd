"""The one question asked before anything that cannot be undone (confirm a
contract, deliver or approve, reject, cancel, remove a check): enter or `y`
goes, escape or `n` keeps. With `comment`, it also takes an optional comment
(then `y` / `n` type into it; enter and escape still answer)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static


class ConfirmScreen(ModalScreen[str | None]):
    """Dismisses with the comment ("" without a comment field) to go, None to keep."""

    BINDINGS = [
        Binding("enter", "go", "Go", priority=True),
        Binding("y", "go", "Yes", show=False),
        Binding("escape,n", "keep", "Keep", show=False),
    ]

    def __init__(
        self, question: str, *, go: str = "Yes", comment: str | None = None, value: str = ""
    ) -> None:
        super().__init__()
        self.question = question
        self.go_label = go
        self.comment = comment
        self.value = value  # what the comment field starts with (a name being edited)

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(self.question, classes="dialog-text", markup=False)
            if self.comment is not None:
                yield Input(self.value, placeholder=self.comment, id="confirm-comment")
            keys = ("enter", "escape") if self.comment is not None else ("y / enter", "n / escape")
            with Horizontal(classes="dialog-buttons"):
                yield Button(f"{self.go_label} ({keys[0]})", id="yes", variant="error")
                yield Button(f"Keep it ({keys[1]})", id="no", variant="primary")

    def on_mount(self) -> None:
        if self.comment is not None:
            self.query_one("#confirm-comment", Input).focus()
        else:
            self.query_one("#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "yes":
            self.action_go()
        else:
            self.action_keep()

    def action_go(self) -> None:
        text = self.query_one("#confirm-comment", Input).value if self.comment is not None else ""
        self.dismiss(text.strip())

    def action_keep(self) -> None:
        self.dismiss(None)
