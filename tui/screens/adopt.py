"""Adopt a pane: the agent panes on your own tmux servers that corral did
not start; enter adopts the selected one (observe and steer: no contract,
no worktree; `x` on its row releases it, the pane running on)."""

from __future__ import annotations

from textual import getters, on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from corral.supervisor.errors import CorralError
from corral.supervisor.states import label

from ..console_app import ConsoleApp
from ..safe_text import safe_text


class AdoptScreen(ModalScreen[None]):
    app = getters.app(ConsoleApp)

    BINDINGS = [Binding("escape", "dismiss_screen", "Back")]

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static("Adopt an agent pane you started in tmux", classes="dialog-text")
            yield Static("looking on your tmux servers…", id="adopt-note", markup=False)
            yield OptionList(id="adopt-panes")

    async def on_mount(self) -> None:
        note = self.query_one("#adopt-note", Static)
        try:
            panes = await self.app.supervisor.adoptable()
        except CorralError as exc:
            note.update(safe_text(exc))
            return
        listing = self.query_one("#adopt-panes", OptionList)
        for p in panes:
            shown = safe_text(f"{p.where}  {p.agent}  {p.cwd}  ({p.pane_id})")
            listing.add_option(Option(shown, id=p.target))
        note.update(
            "enter adopts the selected pane (corral watches and steers it; it never kills it)"
            if panes
            else "no agent panes to adopt on your tmux servers (escape goes back)"
        )
        listing.focus()

    @on(OptionList.OptionSelected)
    def adopt(self, event: OptionList.OptionSelected) -> None:
        target = event.option.id or ""
        self.app.actions.run(
            "Adopt", self.app.supervisor.adopt(target), lambda sid: f"adopted as {label(sid)}"
        )
        self.dismiss(None)

    def action_dismiss_screen(self) -> None:
        self.dismiss(None)
