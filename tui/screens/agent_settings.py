"""The small chooser an ACP agent's session opens on `m`: the modes the agent
announced, then its models (where it announced any), the current ones
marked. Enter picks one (the session screen sets it through the owner);
escape leaves it as it is."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from corral.supervisor.models import AgentOffers

from ..safe_text import safe_text

Choice = tuple[str, str]  # ("mode" | "model", the id to set)


def choices(offers: AgentOffers) -> list[tuple[Choice, str]]:
    """Each choice with the line that shows it (`*` marks the current one)."""
    shown: list[tuple[Choice, str]] = []
    for kind, items, current in (
        ("mode", offers.modes, offers.mode),
        ("model", offers.models, offers.model),
    ):
        for item in items:
            mark = "*" if item.id == current else " "
            shown.append(((kind, item.id), f"{mark} {kind:<5} {item.shown()}"))
    return shown


class AgentSettingsScreen(ModalScreen[Choice | None]):
    """Dismisses with (kind, id) to set, None to leave as is."""

    BINDINGS = [Binding("escape", "leave", "Leave", show=False)]

    def __init__(self, agent: str, offers: AgentOffers) -> None:
        super().__init__()
        self.agent = agent
        self.offers = offers
        self._choices = choices(offers)

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="agent-settings"):
            yield Static(
                safe_text(f"{self.agent}: choose a mode or model (enter sets it, escape leaves)"),
                classes="dialog-text",
            )
            yield OptionList(  # an agent names its modes and models: shown, never obeyed
                *(
                    Option(safe_text(text), id=f"{kind}:{value}")
                    for (kind, value), text in self._choices
                ),
                id="agent-choices",
            )

    def on_mount(self) -> None:
        listing = self.query_one(OptionList)
        current = {("mode", self.offers.mode), ("model", self.offers.model)}
        first = next((i for i, (c, _t) in enumerate(self._choices) if c in current), 0)
        listing.highlighted = first
        listing.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss(self._choices[event.option_index][0])

    def action_leave(self) -> None:
        self.dismiss(None)
