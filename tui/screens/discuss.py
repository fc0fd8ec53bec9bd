"""`d`: a read-only discussion grounded in the repo.

The transcript streams (assistant text as markdown once the reply is
complete), tool calls show as chips, refusals in red. When the assistant (or
`p`, promote) prepares a task, a card offers `s` Start: the new-session form
opens prefilled, and the session is drafted with the discussion's agreed
constraints and linked to it. Nothing here starts work by itself. The model
field pins the discussion's model (`auto` clears it); whether a model may be
pinned now is the supervisor's answer, shown as it gives it.

The discussion is the owner's (`app.discussions`): a console attached to
another process's owner starts, resumes and speaks in the owner's one copy,
and its transcript is the owner's event stream, so every console on a
discussion sees every turn. Each call to the owner runs in a worker: the
screen never waits on it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text
from textual import getters, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import Footer, Input, RichLog, Static

from corral.supervisor.errors import CorralError
from corral.supervisor.interface import (
    DiscussAssistantDeltaEvent,
    DiscussAssistantMessageEvent,
    DiscussErrorEvent,
    DiscussEvent,
    DiscussRefusalEvent,
    DiscussTaskPreparedEvent,
    DiscussToolCallEvent,
    DiscussUserMessageEvent,
)

from ..console_app import ConsoleApp
from ..guard import guarded
from ..safe_text import safe_markup, safe_text

if TYPE_CHECKING:
    from corral.supervisor.remote import DiscussionHandle, DiscussionsSurface


class DiscussScreen(Screen[None]):
    app = getters.app(ConsoleApp)

    BINDINGS = [
        Binding("escape", "back", "Board"),
        Binding("s", "start_task", "Start prepared task", show=False),
        Binding("ctrl+o", "start_task", "Start prepared task", priority=True),
        Binding("p", "promote", "Promote to a task"),
        Binding("ctrl+n", "new_discussion", "New discussion", priority=True),
        Binding("ctrl+x", "cancel_turn", "Stop the reply"),
        Binding("question_mark", "app.help", "Help"),
    ]

    def __init__(
        self, repo: Path, discussion_id: str | None = None, *, fresh: bool = False
    ) -> None:
        super().__init__()
        self.repo = repo
        self.discussion_id = discussion_id
        self.fresh = fresh
        self.discussion: DiscussionHandle | None = None
        self._live = ""

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("", id="discuss-header")
            yield Input(
                placeholder="Model: auto (the default order); type a model's name, enter pins it",
                id="discuss-model",
            )
            yield RichLog(id="discuss-log", wrap=True, markup=False)
            yield Static("", id="discuss-live")
            yield Static("", id="discuss-task")
            yield Input(
                placeholder="Ask about the repo (read-only); enter sends", id="discuss-input"
            )
        yield Footer()

    @property
    def discussions(self) -> DiscussionsSurface:
        return self.app.discussions

    def on_mount(self) -> None:
        self.open_discussion()

    @work(exclusive=True, group="discuss-open")
    @guarded("Opening the discussion")
    async def open_discussion(self) -> None:
        try:
            if self.discussion_id is None and not self.fresh:
                self.discussion_id = await self._latest_saved()
            if self.discussion_id:
                self.discussion = await self.discussions.resume(self.discussion_id)
            else:
                self.discussion = await self.discussions.start(self.repo)
        except CorralError as exc:
            self.query_one("#discuss-header", Static).update(safe_markup("[red]{}[/red]", exc))
            return
        self.query_one("#discuss-header", Static).update(
            safe_markup(
                "[b]Discussion[/b] on {} — read-only: the assistant reads the repo "
                "and cannot change it.",
                self.repo.name,
            )
        )
        self.query_one("#discuss-model", Input).value = self.discussion.model or ""
        self.query_one("#discuss-input", Input).focus()
        self.follow()

    @work(exclusive=True, group="discuss-follow")
    @guarded("The discussion")
    async def follow(self) -> None:
        if self.discussion is None:
            return
        log = self.query_one("#discuss-log", RichLog)
        live = self.query_one("#discuss-live", Static)
        streamed = False

        def flush() -> None:
            if self._live.strip():
                log.write(safe_text(self._live, multiline=True))
            self._live = ""
            live.update("")

        try:
            async for event in self.discussion.events(0):
                match event:
                    case DiscussAssistantDeltaEvent(data=delta):
                        streamed = True
                        self._live += delta.text
                        live.update(safe_text(self._live, multiline=True))
                        continue
                    case DiscussAssistantMessageEvent(data=message):
                        if not streamed and message.text.strip():
                            log.write(safe_text(message.text, multiline=True))
                        flush()
                        streamed = False
                        continue
                flush()  # anything else ends the streamed text so far
                self._write(log, event)
        except CorralError as exc:  # the owner went away, or stopped answering
            flush()
            log.write(safe_text(f"  {exc}", "bold red"))

    def _write(self, log: RichLog, event: DiscussEvent) -> None:
        """One event (not the assistant's text) into the transcript."""
        match event:
            case DiscussUserMessageEvent(data=asked):
                log.write(Text("You: ", style="bold cyan") + safe_text(asked.text, multiline=True))
            case DiscussToolCallEvent(data=call):
                args = ", ".join(f"{k}={v}" for k, v in call.args.items())
                log.write(safe_text(f"  ⚙ {call.name} {args}"[:200], "dim"))
            case DiscussRefusalEvent(data=refusal):
                log.write(safe_text(f"  ⛔ {refusal.tool} refused: {refusal.reason}", "red"))
            case DiscussTaskPreparedEvent(data=task):
                self._show_task(task.intent, task.constraints)
            case DiscussErrorEvent(data=error):
                log.write(safe_text(f"  {error.message}", "bold red"))

    async def _latest_saved(self) -> str | None:
        """Resume the newest saved discussion of this repository, if any."""
        try:
            root = str(self.repo.resolve())
            rows = [
                r
                for r in await self.discussions.list()
                if not r.get("error") and str(r.get("repo", "")) == root
            ]
        except (OSError, CorralError):
            return None
        rows.sort(key=lambda r: r.get("updated_at") or r.get("created_at") or 0, reverse=True)
        return str(rows[0]["discussion_id"]) if rows else None

    def action_new_discussion(self) -> None:
        self.app.switch_screen(DiscussScreen(self.repo, fresh=True))

    def _show_task(self, intent: str, constraints: list[str]) -> None:
        agreed = "\n".join(f"  • {c}" for c in constraints)
        self.query_one("#discuss-task", Static).update(
            safe_markup(
                "[b]Prepared task[/b] — press [b]ctrl+o[/b] to start it (you can edit it first)\n"
                "{}\n{}",
                intent,
                agreed,
                multiline=True,
            )
        )

    @work(exclusive=True, group="discuss-model")
    @guarded("Pinning the discussion's model")
    async def choose_model(self, name: str) -> None:
        """The owner pins it (or refuses); the field then shows what it holds."""
        field = self.query_one("#discuss-model", Input)
        if self.discussion is None:
            return
        try:
            chosen = await self.discussion.choose_model(name)
        except CorralError as exc:
            field.value = self.discussion.model or ""
            self.notify(str(exc), title="Model", severity="error", timeout=10)
            return
        field.value = chosen or ""
        self.notify(f"Pinned model {chosen}" if chosen else "No pinned model: the default order")
        self.query_one("#discuss-input", Input).focus()

    @work(group="discuss-send")
    @guarded("Sending to the discussion")
    async def say(self, text: str) -> None:
        """One message to the owner's discussion; its turn comes back on the
        stream this screen follows (as every console's does)."""
        if self.discussion is None:
            return
        try:
            await self.discussion.send(text)
        except CorralError as exc:
            self.notify(str(exc), severity="error", timeout=8)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "discuss-model":
            if self.discussion is not None:
                self.choose_model(event.input.value)
            return
        text = event.value
        if not text.strip() or self.discussion is None:
            return
        event.input.value = ""
        self.say(text)

    @work(group="discuss-cancel")
    @guarded("Stopping the reply")
    async def action_cancel_turn(self) -> None:
        if self.discussion is None:
            return
        try:
            await self.discussion.cancel()
        except CorralError as exc:
            self.notify(str(exc), severity="error", timeout=8)

    @work(exclusive=True, group="discuss-promote")
    @guarded("Promoting the discussion")
    async def action_promote(self) -> None:
        if self.discussion is None:
            return
        try:
            task = await self.discussion.promote()
        except CorralError as exc:
            self.notify(str(exc), severity="error", timeout=8)
            return
        self._show_task(task.intent, task.constraints)

    def action_start_task(self) -> None:
        task = getattr(self.discussion, "prepared_task", None)
        if task is None:
            self.notify(
                "No prepared task yet: agree on one, or press p to promote.", severity="warning"
            )
            return
        from .new_session import NewSessionScreen

        self.app.push_screen(
            NewSessionScreen(
                intent=task.intent, constraints=list(task.constraints), discussion=self.discussion
            )
        )

    def action_back(self) -> None:
        self.app.pop_screen()
