"""The one question asked before anything that cannot be undone (confirm a
contract, deliver or approve, reject, cancel, delete, remove a check).

Typing can never answer it: its default button is "keep" (enter, escape,
`n` keep), going ahead takes `ctrl+y`, a key no one types in prose (or a
click on the button, which tab never focuses). A typist whose enter, `y` or
space lands here by accident changes nothing. With `comment`, it also takes
an optional comment (then every printable key types into it; enter there
says which key goes). `strict=False` is for questions that only edit a name
(rename): there enter or `y` goes, as a form would."""

from __future__ import annotations

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static

from .safe_text import safe_text

#: what goes ahead in a question that cannot be answered by typing
GO_KEY = "ctrl+y"
#: the second way to go (retry with its edits), for the same reason not a letter
OTHER_KEY = "ctrl+e"


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
        elif event.key == GO_KEY and isinstance(self.screen, ConfirmScreen):
            # here too: the comment typed (or pasted) before the key is all in
            event.stop()
            event.prevent_default()
            self.screen.action_go()


class GoButton(Button, can_focus=False):
    """The button that goes ahead: clicked, never reached by tab (enter on a
    focused button presses it, and enter is typed in prose)."""


class ConfirmScreen(ModalScreen[str | None]):
    """Dismisses with the comment ("" without a comment field) to go, None to keep."""

    BINDINGS = [
        Binding(GO_KEY, "go", "Go"),
        Binding(OTHER_KEY, "other", "Other way", show=False, priority=True),
        Binding("enter", "enter", "Keep", priority=True),
        Binding("y", "letter_go", "Yes", show=False),
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
        strict: bool = True,
    ) -> None:
        super().__init__()
        self.question = question
        self.go_label = go
        self.comment = comment
        self.value = value  # what the comment field starts with (a name being edited)
        self.other = other  # a second way to go, for questions without a comment
        self.strict = strict
        self.answer: str | None = None  # what it was dismissed with (None: kept)

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            # the question often names an agent's branch, files or words: shown, never obeyed
            yield Static(safe_text(self.question, multiline=True), classes="dialog-text")
            if self.comment is not None:
                yield CommentInput(self.value, placeholder=self.comment, id="confirm-comment")
            with Horizontal(classes="dialog-buttons"):
                if self.strict:
                    yield GoButton(f"{self.go_label} ({GO_KEY})", id="yes", variant="error")
                    if self.other is not None and self.comment is None:
                        yield GoButton(f"{self.other} ({OTHER_KEY})", id="other", variant="warning")
                    keep = "enter / escape" if self.comment is None else "escape"
                    yield Button(f"Keep it ({keep})", id="no", variant="primary")
                else:
                    with_comment = self.comment is not None
                    keys = ("enter", "escape") if with_comment else ("y / enter", "n / escape")
                    yield Button(f"{self.go_label} ({keys[0]})", id="yes", variant="error")
                    if self.other is not None and self.comment is None:
                        yield Button(f"{self.other} ({OTHER_KEY})", id="other", variant="warning")
                    yield Button(f"Keep it ({keys[1]})", id="no", variant="primary")

    def on_mount(self) -> None:
        if self.comment is not None:
            self.query_one("#confirm-comment", Input).focus()
        else:
            self.query_one("#no", Button).focus()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Enter in the comment field is the field's own (`CommentInput`);
        letters answer only a question that is not strict."""
        in_comment = isinstance(self.focused, CommentInput)
        if action == "other":
            return self.other is not None and self.comment is None
        if action == "letter_go":
            return not self.strict and not in_comment
        if action == "enter":
            return not in_comment
        return True

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if self.strict:  # enter in the comment: typed, never an answer
            self.app.bell()
            self.notify(
                f"{GO_KEY} does it ({self.go_label}); escape keeps things as they are.",
                timeout=4,
            )
            return
        self._dismiss(event.value.strip())

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "yes":
            self._go()
        elif event.button.id == "other":
            self._dismiss(self.OTHER)
        else:
            self.action_keep()

    def _go(self) -> None:
        text = self.query_one("#confirm-comment", Input).value if self.comment is not None else ""
        self._dismiss(text.strip())

    def _dismiss(self, answer: str | None) -> None:
        self.answer = answer
        self.dismiss(answer)

    def action_go(self) -> None:
        self._go()

    def action_letter_go(self) -> None:
        self._go()

    def action_enter(self) -> None:
        """Enter on a strict question keeps; on a form (rename) it goes."""
        if self.strict:
            self.action_keep()
        else:
            self._go()

    def action_other(self) -> None:
        self._dismiss(self.OTHER)

    def action_keep(self) -> None:
        self._dismiss(None)
