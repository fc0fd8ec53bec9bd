"""`n`: the new-session form (intent, repo, engine, base)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from textual import getters
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Select

from corral.supervisor.errors import CorralError
from corral.supervisor.interface import load_contract
from corral.supervisor.models import OutcomeContract

from ..app import CorralApp

if TYPE_CHECKING:
    from corral.supervisor.interface import Discussion


class NewSessionScreen(ModalScreen[None]):
    """Prefilled from a discussion's prepared task when opened from there:
    the session is drafted with its constraints and linked to it."""

    app = getters.app(CorralApp)

    BINDINGS = [Binding("escape", "close", "Cancel")]

    def __init__(
        self,
        intent: str = "",
        constraints: list[str] | None = None,
        discussion: Discussion | None = None,
    ) -> None:
        super().__init__()
        self.intent = intent
        self.constraints = list(constraints or [])
        self.discussion = discussion

    def compose(self) -> ComposeResult:
        app = self.app
        with Vertical(classes="dialog"):
            yield Label("What should the agent achieve?")
            yield Input(
                value=self.intent, placeholder="e.g. Fix the off-by-one in paginate()", id="intent"
            )
            if self.constraints:
                yield Label(
                    "Agreed in the discussion (drafting will use these):\n"
                    + "\n".join(f"  • {c}" for c in self.constraints)
                )
            yield Label("Repository")
            yield Input(value=str(app.default_repo or ""), id="repo")
            yield Label("Engine (only what can run here is listed)")
            choices: list[tuple[str, str]] = self.app.supervisor.engine_choices()
            yield Select(
                [(desc, value) for value, desc in choices],
                value="auto",
                allow_blank=False,
                id="engine",
            )
            blank = (
                "what this discussion's last run delivered, else your checkout"
                if self.discussion is not None
                else "your checkout as it is now"
            )
            yield Label(f"Base revision (blank = {blank})")
            yield Input(placeholder="", id="base")
            yield Label("Contract file (blank = drafted for you; see README for the JSON)")
            yield Input(placeholder="path/to/contract.json", id="contract")
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
        # blank: the supervisor picks the base (a discussion's follow-up
        # continues from what its last run delivered)
        base = self.query_one("#base", Input).value.strip() or None
        app = self.app
        sup = app.supervisor
        discussion = self.discussion
        contract: OutcomeContract | None = None
        contract_path = self.query_one("#contract", Input).value.strip()
        if contract_path:
            try:
                contract = load_contract(Path(contract_path).expanduser())
            except CorralError as exc:
                self.notify(str(exc), title="Contract file", severity="error", timeout=10)
                return

        async def start() -> None:
            result = await sup.start(
                intent,
                repo,
                engine=engine,
                base=base,
                wait=False,
                constraints=self.constraints or None,
                discussion_id=discussion.id if discussion is not None else None,
                contract=contract,
            )
            if discussion is not None:
                discussion.link_session(result.session_id)
            from .board import BoardScreen  # the board imports this screen

            for screen in app.screen_stack:
                if isinstance(screen, BoardScreen):
                    screen.select_when_shown(result.session_id)

        self.app.run_supervisor_call("Start", start())
        self.dismiss(None)

    def action_close(self) -> None:
        self.dismiss(None)
