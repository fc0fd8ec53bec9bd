"""`n`: the new-session form (intent, repo, engine, model, base).

The engine list is what can run here, plus the engines named by a command
line (`custom:`, `oneshot:`), which reveal a command input. A refusal (an
unrunnable engine, a repo that is not one, …) is shown in the form, which
stays open with everything typed: whether an engine can run is the
supervisor's answer, never the form's."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from rich.text import Text
from textual import getters
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Select, Static

from corral.supervisor.errors import CorralError
from corral.supervisor.interface import load_contract
from corral.supervisor.models import OutcomeContract

from ..console_app import ConsoleApp
from ..safe_text import safe_content, safe_text, visible

if TYPE_CHECKING:
    from corral.supervisor.remote import DiscussionHandle


class FormScroll(VerticalScroll, can_focus=False):
    """The form's fields, scrolled on a short terminal; the first field takes
    focus when the form opens (a focusable scroll would take it instead)."""


@runtime_checkable
class SelectsStarted(Protocol):
    """A screen that selects a session this form started (the board). Said
    here, not imported: the board opens this form, so this form never
    imports the board."""

    def select_when_shown(self, session_id: str) -> None: ...


class NewSessionScreen(ModalScreen[None]):
    """Prefilled from a discussion's prepared task when opened from there:
    the session is drafted with its constraints and linked to it."""

    app = getters.app(ConsoleApp)

    BINDINGS = [Binding("escape", "close", "Cancel")]

    def __init__(
        self,
        intent: str = "",
        constraints: list[str] | None = None,
        discussion: DiscussionHandle | None = None,
    ) -> None:
        super().__init__()
        self.intent = intent
        self.constraints = list(constraints or [])
        self.discussion = discussion
        self.commands: dict[str, str] = {}  # command engine prefix -> example line

    def compose(self) -> ComposeResult:
        app = self.app
        # scrolls on a short terminal, and a field that takes focus is scrolled into view
        with FormScroll(classes="dialog form"):
            yield Label("What should the agent achieve?")
            yield Input(  # a prepared task's intent is the model's: its controls shown as marks
                value=visible(self.intent, multiline=True),
                placeholder="e.g. Fix the off-by-one in paginate()",
                id="intent",
            )
            if self.constraints:
                yield Label(  # the model wrote these: shown, never obeyed
                    safe_content(
                        "Agreed in the discussion (drafting will use these):\n"
                        + "\n".join(f"  • {c}" for c in self.constraints),
                        multiline=True,
                    )
                )
            yield Label("Repository")
            yield Input(value=str(app.default_repo or ""), id="repo")
            yield Label("Engine (only what can run here is listed)")
            choices: list[tuple[str, str]] = self.app.supervisor.engine_choices()
            self.commands = {
                prefix: example for prefix, _, example in app.supervisor.command_engines()
            }
            commands = [(label, prefix) for prefix, label, _ in app.supervisor.command_engines()]
            yield Select(
                [*((desc, value) for value, desc in choices), *commands],
                value="auto",
                allow_blank=False,
                id="engine",
            )
            command = Input(id="command")
            command.display = False
            yield command
            models = [name for name, _ in app.supervisor.model_choices()]
            order = f"the default order: {', '.join(models)}" if models else "the agent's own"
            yield Label(
                safe_content(f"Model (blank = {order}; a pin is never swapped for another)")
            )
            pinned = self.discussion.model if self.discussion is not None else None
            yield Input(
                value=pinned or "",
                placeholder="auto, a configured model, or a name the agent knows",
                id="model",
            )
            blank = (
                "what this discussion's last run delivered, else your checkout"
                if self.discussion is not None
                else "your checkout as it is now"
            )
            hosts = self.app.supervisor.host_choices()
            if hosts:  # [[hosts]] configured: where the agent runs
                yield Label("Host (the agent, its worktree and the checks run there)")
                yield Select(
                    [("this machine", ""), *((h, h) for h in hosts)],
                    value="",
                    allow_blank=False,
                    id="host",
                )
            yield Label(f"Base revision (blank = {blank})")
            yield Input(placeholder="", id="base")
            yield Label("Contract file (blank = drafted for you; see README for the JSON)")
            yield Input(placeholder="path/to/contract.json", id="contract")
            refusal = Static("", id="refusal")
            refusal.display = False
            yield refusal
            yield Button("Start (enter)", id="start", variant="primary")

    def on_select_changed(self, event: Select.Changed) -> None:
        """A command engine shows the command line input (with its example)."""
        if event.select.id != "engine":
            return
        command = self.query_one("#command", Input)
        example = self.commands.get(str(event.value))
        command.display = example is not None
        if example is not None:
            command.placeholder = example
            command.focus()

    def _engine(self) -> str:
        engine = str(self.query_one("#engine", Select).value or "auto")
        if engine in self.commands:
            return engine + self.query_one("#command", Input).value.strip()
        return engine

    def refuse(self, reason: str) -> None:
        """Show why the session cannot start; the form keeps what was typed."""
        refusal = self.query_one("#refusal", Static)
        refusal.update(Text.assemble(("Cannot start: ", "bold"), safe_text(reason)))
        refusal.display = True
        self.query_one("#start", Button).disabled = False
        command = self.query_one("#command", Input)
        if command.display:  # most refusals are about the command line: fix it there
            command.focus()
        self.app.bell()

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
        engine = self._engine()
        if self.query_one("#start", Button).disabled:
            return  # a start is on its way
        hosts = self.query("#host")
        host = str(hosts.first(Select).value or "") or None if hosts else None
        # an agent for another host is looked for there, not here
        refused = None if host else self.app.supervisor.engine_refusal(engine)
        if refused is not None:
            self.refuse(refused)
            return
        # blank: the supervisor picks the base (a discussion's follow-up
        # continues from what its last run delivered)
        base = self.query_one("#base", Input).value.strip() or None
        model = self.query_one("#model", Input).value.strip() or None
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
            try:
                result = await sup.start(
                    intent,
                    repo,
                    engine=engine,
                    base=base,
                    wait=False,
                    constraints=self.constraints or None,
                    discussion_id=discussion.id if discussion is not None else None,
                    contract=contract,
                    model=model,
                    host=host,
                )
            except CorralError as exc:
                if self not in app.screen_stack:
                    raise  # the form was closed meanwhile: the app's toast says it
                self.refuse(str(exc))
                return
            except BaseException:
                if self in app.screen_stack:  # a bug: the app reports it; the form stays usable
                    self.query_one("#start", Button).disabled = False
                raise
            if app.screen is self:
                self.dismiss(None)
            if discussion is not None:  # the owner's discussion: its prepared task is used up
                try:
                    await discussion.link_session(result.session_id)
                except CorralError as exc:
                    app.notify(
                        f"The session started; the discussion did not record it: {exc}",
                        severity="warning",
                    )
            for screen in app.screen_stack:
                if isinstance(screen, SelectsStarted):  # the board
                    screen.select_when_shown(result.session_id)

        self.query_one("#start", Button).disabled = True
        self.app.actions.run("Start", start())

    def action_close(self) -> None:
        self.dismiss(None)
