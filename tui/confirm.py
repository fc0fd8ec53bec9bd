"""The one question asked before anything that cannot be undone (confirm a
contract, deliver or approve, reject, cancel, remove a check): enter or `y`
goes, escape or `n` keeps. With `comment`, it also takes an optional comment
(then `y` / `n` type into it; enter and escape still answer)."""

from __future__ import annotations

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static

from .safe_text import safe_text


class CommentInput(Input):
    """Takes Enter in the order it was typed. The screen's binding read the
    field while keys typed just before Enter (a fast typist, a paste ending
    in a newline) still waited in the field's queue, and the comment was
    lost; Input's own Enter binding runs after later keys were inserted."""

    async def on_key(self, event: events.Key) -> None:
        if event.key == "enter":
            event.stop()
            event.prevent_default()
            await self.action_submit()


class ConfirmScreen(ModalScreen[str | None]):
    """Dismisses with the comment ("" without a comment field) to go, None to keep."""

    BINDINGS = [
        Binding("enter", "go", "Go", priority=True),
        Binding("y", "go", "Yes", show=False),
        Binding("e", "other", "Other way", show=False),
        Binding("escape,n", "keep", "Keep", show=False),
    ]

    # what the screen dismisses with when the operator picks `other`
    OTHER = "\x00other"

    def __init__(
        self,
        question: str,
        *,
        go: str = "Yes",
        comment: str | None = None,
        value: str = "",
        other: str | None = None,
    ) -> None:
        super().__init__()
        self.question = question
        self.go_label = go
        self.comment = comment
        self.value = value  # what the comment field starts with (a name being edited)
        self.other = other  # a second way to go (key e), for questions without a comment

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            # the question often names an agent's branch, files or words: shown, never obeyed
            yield Static(safe_text(self.question, multiline=True), classes="dialog-text")
            if self.comment is not None:
                yield CommentInput(self.value, placeholder=self.comment, id="confirm-comment")
            keys = ("enter", "escape") if self.comment is not None else ("y / enter", "n / escape")
            with Horizontal(classes="dialog-buttons"):
                yield Button(f"{self.go_label} ({keys[0]})", id="yes", variant="error")
                if self.other is not None and self.comment is None:
                    yield Button(f"{self.other} (e)", id="other", variant="warning")
                yield Button(f"Keep it ({keys[1]})", id="no", variant="primary")

    def on_mount(self) -> None:
        if self.comment is not None:
            self.query_one("#confirm-comment", Input).focus()
        else:
            self.query_one("#no", Button).focus()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Enter in the comment field is the field's own (`CommentInput`)."""
        if action == "other":
            return self.other is not None and self.comment is None
        return not (action == "go" and isinstance(self.focused, CommentInput))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.dismiss(event.value.strip())

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "yes":
            self.action_go()
        elif event.button.id == "other":
            self.action_other()
        else:
            self.action_keep()

    def action_go(self) -> None:
        text = self.query_one("#confirm-comment", Input).value if self.comment is not None else ""
        self.dismiss(text.strip())

    def action_other(self) -> None:
        self.dismiss(self.OTHER)

    def action_keep(self) -> None:
        self.dismiss(None)
