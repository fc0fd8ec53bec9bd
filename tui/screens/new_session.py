"""`n`: the new-session form (intent, repo, engine, base)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Select


class NewSessionScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape", "close", "Cancel")]

    def compose(self) -> ComposeResult:
        app = self.app
        with Vertical(classes="dialog"):
            yield Label("What should the agent achieve?")
            yield Input(placeholder="e.g. Fix the off-by-one in paginate()", id="intent")
            yield Label("Repository")
            yield Input(value=str(getattr(app, "default_repo", "") or ""), id="repo")
            yield Label("Engine (only what can run here is listed)")
            choices = self.app.supervisor.engine_choices()  # type: ignore[attr-defined]
            yield Select(
                [(desc, value) for value, desc in choices],
                value="auto",
                allow_blank=False,
                id="engine",
            )
            yield Label("Base revision (blank = your checkout as it is now)")
            yield Input(placeholder="", id="base")
            yield Button("Start (enter)", id="start", variant="primary")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self._start()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self._start()

    def _start(self) -> None:
        intent = self.query_one("#intent", Input).value.strip()
        if not intent:
            self.notify("Describe the task first.", severity="warning")
            return
        repo = self.query_one("#repo", Input).value.strip()
        engine = str(self.query_one("#engine", Select).value or "auto")
        base = self.query_one("#base", Input).value.strip() or None
        sup = self.app.supervisor  # type: ignore[attr-defined]
        self.app.run_supervisor_call(  # type: ignore[attr-defined]
            "Start", sup.start(intent, repo, engine=engine, base=base, wait=False)
        )
        self.dismiss(None)

    def action_close(self) -> None:
        self.dismiss(None)
