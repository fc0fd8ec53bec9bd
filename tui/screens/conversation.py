"""An ACP session's conversation (`t` on its session screen): what the agent
said, thought and did, as `widgets/conversation` draws it, with a prompt
that is always there and a search.

The prompt: enter sends (a question pending: it answers it, an option's
number picks that option; else it is guidance the agent gets as its next
turn's prompt, through the same `respond` call as the session screen's
input); ctrl+j (or alt+enter) starts a new line, a paste keeps its lines.
A `/` at the start offers the commands the agent announced (tab completes
the first). Escape leaves the prompt for the conversation, where up/down,
page up/down, home and end scroll; a printable key there goes back into
the prompt. ctrl+f searches (enter jumps to the first match; n and N move
between matches while the conversation has focus; matching blocks are
highlighted). Escape from the conversation goes back to the session.

The permission question is shown above the prompt with what it concerns
(the diff or the command, as the supervisor described it), never raw JSON
when the agent told more."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from textual import events, getters, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.content import Content
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, Input, Static, TextArea

from corral.supervisor.errors import CorralError
from corral.supervisor.interface import Subscription, SubscriptionClosed, SubscriptionDropped
from corral.supervisor.models import EventKind
from corral.supervisor.states import label as session_label

from .. import rows as R
from ..console_app import ConsoleApp
from ..conversation_blocks import Command, Conversation
from ..guard import guarded
from ..safe_text import safe_markup
from ..widgets.conversation import ConversationView

if TYPE_CHECKING:
    from corral.supervisor.remote import OwnerSurface

COMPLETIONS_SHOWN = 6
QUESTION_KINDS = {
    EventKind.AGENT_STATUS,
    EventKind.USER_INPUT_REQUESTED,
    EventKind.USER_INPUT_EXPIRED,
    EventKind.STATE_CHANGED,
}


class PromptArea(TextArea):
    """The multi-line prompt: enter sends, ctrl+j or alt+enter adds a line,
    tab completes an offered command."""

    TAKES_KEYS = True
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("tab", "complete", "Complete", show=False),
        Binding("ctrl+j,alt+enter,shift+enter", "newline", "New line", show=False),
    ]

    class Submitted(Message):
        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    async def _on_key(self, event: events.Key) -> None:
        if event.key == "enter":
            event.stop()
            event.prevent_default()
            self.post_message(self.Submitted(self.text))
            return
        await super()._on_key(event)

    def action_newline(self) -> None:
        self.insert("\n")

    def action_complete(self) -> None:
        screen = self.screen
        if isinstance(screen, ConversationScreen) and screen.complete():
            return
        screen.focus_next()


class ConversationScreen(Screen[None]):
    app = getters.app(ConsoleApp)

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "leave", "Back"),
        Binding("ctrl+f", "search", "Search"),
        Binding("ctrl+e", "focus_prompt", "Prompt"),
        Binding("n", "next_match", "Next match", show=False),
        Binding("N", "previous_match", "Previous match", show=False),
        Binding("question_mark", "app.help", "Help", show=False),
    ]

    DEFAULT_CSS = """
    ConversationScreen #convo-header { height: auto; max-height: 2; background: $boost; padding: 0 1; }
    ConversationScreen #convo-search { display: none; }
    ConversationScreen #convo-search.-open { display: block; }
    ConversationScreen #convo-body { height: 1fr; }
    ConversationScreen #convo-question { height: auto; max-height: 12; padding: 0 1;
        border-top: solid $warning; display: none; overflow-y: auto; }
    ConversationScreen #convo-question.-asking { display: block; }
    ConversationScreen #convo-completions { height: auto; padding: 0 1; color: $text-muted; }
    ConversationScreen PromptArea { height: 3; }
    """

    def __init__(self, session_id: str) -> None:
        super().__init__()
        self.session_id = session_id
        self.conversation = Conversation()
        self.matches: list[int] = []
        self.needle = ""  # what the search looks for
        self.current: int | None = None
        self.opened = False  # the view is mounted (its blocks drawn)
        self._cursor = 0  # the next event's seq
        self._sub: Subscription[Any] | None = None  # subscribed in compose, followed by `follow`
        self._missed: set[int] = set()  # blocks a (re)subscription's buffered events changed

    @property
    def supervisor(self) -> OwnerSurface:
        return self.app.supervisor

    def compose(self) -> ComposeResult:
        yield Static("", id="convo-header")
        # the search's input is mounted by the first ctrl+f (opening stays a handful of widgets)
        with Vertical(id="convo-body"):
            # what the session has journaled is folded here, so the view is
            # composed with the screen (one layout, one paint), not mounted after it
            self._sub = self._subscribe()
            if self._sub is not None:
                self.opened = True
                yield ConversationView(self.conversation, id="convo-view")
            else:  # not running here: its journal as stored, read by `follow`
                yield Static(
                    safe_markup("[dim]Reading the conversation…[/dim]"), id="convo-loading"
                )
        yield Static("", id="convo-question")
        yield Static("", id="convo-completions")
        yield PromptArea(id="convo-prompt", soft_wrap=True, show_line_numbers=False)
        yield Footer()

    def on_mount(self) -> None:
        if self.opened:
            self.query_one(ConversationView).focus()
        self.refresh_header()
        self.follow()

    # -- the events ---------------------------------------------------------------------

    def _subscribe(self) -> Subscription[Any] | None:
        """Subscribe from the cursor and fold at once what is buffered (the
        blocks it added or changed are kept in `_missed`); None: the session
        is not running here."""
        _result, sub = self.supervisor.subscribe(self.session_id, self._cursor)
        if sub is not None:
            batch = sub.get_nowait()
            if batch:
                self._cursor = batch[-1].seq + 1
            self._missed = {i for i in map(self.conversation.add, batch) if i is not None}
        return sub

    @work(exclusive=True, group="conversation-events")
    @guarded("The conversation")
    async def follow(self) -> None:
        """Each event as it comes (what was buffered is folded already);
        resubscribed after falling behind, what it missed is drawn."""
        sub, self._sub = self._sub, None
        while True:
            if sub is None:
                sub = self._subscribe()
                if sub is None:  # not running here: its journal as stored
                    try:
                        stored = await self.supervisor.history(self.session_id)
                    except CorralError:
                        stored = []
                    for event in stored:
                        self.conversation.add(event)
                    await self._open()
                    return
                if self.opened:  # resubscribed after falling behind: draw what it missed
                    view = self.query_one(ConversationView)
                    for missed in sorted(self._missed):
                        await view.changed(missed)
                await self._open()
            try:
                async for event in sub:
                    self._cursor = event.seq + 1
                    index = self.conversation.add(event)
                    if index is not None:
                        await self.query_one(ConversationView).changed(index)
                    if event.kind in QUESTION_KINDS:
                        self.refresh_header()
                return
            except SubscriptionDropped:
                continue
            except SubscriptionClosed:
                return
            finally:
                sub.close()
                sub = None

    async def _open(self) -> None:
        if self.opened:
            return
        self.opened = True
        body = self.query_one("#convo-body", Vertical)
        await self.query_one("#convo-loading").remove()
        view = ConversationView(self.conversation, id="convo-view")
        await body.mount(view)
        view.focus()

    def refresh_header(self) -> None:
        try:
            detail = self.supervisor.get(self.session_id)
        except CorralError:
            return
        s = detail.session
        agent = R.agent_words(detail.agent_status, detail.agent_reason, detail.agent_source)
        self.query_one("#convo-header", Static).update(
            safe_markup(
                "[b]{}[/b] · {} · {}",
                s.name or session_label(s.id),
                s.engine,
                agent or s.state.value,
            )
        )
        question = self.query_one("#convo-question", Static)
        if detail.question_prompt:
            options: list[str] = self.supervisor.question_options(self.session_id)
            opts = "  ".join(f"[b]{i}[/b] " + "{}" for i in range(1, len(options) + 1))
            question.update(
                safe_markup(
                    "[bold yellow]The agent asks:[/bold yellow] {}"
                    + (f"\n{opts}" if opts else "")
                    + "\n[dim]type an answer or an option's number in the prompt (enter)[/dim]",
                    detail.question_prompt,
                    *options,
                    multiline=True,
                )
            )
            question.add_class("-asking")
        else:
            question.remove_class("-asking")
        prompt = self.query_one(PromptArea)
        prompt.placeholder = (
            "Answer the question (enter sends · ctrl+j new line)"
            if detail.question_prompt
            else "Message the agent (enter sends · ctrl+j new line · / commands)"
        )

    # -- the prompt -----------------------------------------------------------------------

    def on_prompt_area_submitted(self, message: PromptArea.Submitted) -> None:
        text = message.text
        if not text.strip():
            return
        self.query_one(PromptArea).clear()
        try:
            detail = self.supervisor.get(self.session_id)
        except CorralError as exc:
            self.notify(str(exc), severity="error", markup=False)
            return
        steer = detail.question_prompt is None
        options: list[str] = [] if steer else self.supervisor.question_options(self.session_id)
        if text.strip().isdigit() and 0 < int(text) <= len(options):
            text = options[int(text) - 1]
        self.app.actions.run(
            "Message" if steer else "Answer",
            self.supervisor.respond(self.session_id, text, steer=steer),
        )

    def offered(self, typed: str) -> list[Command]:
        """The agent's commands that start with what is typed (a `/word`)."""
        if not typed.startswith("/") or any(ch.isspace() for ch in typed):
            return []
        return [c for c in self.conversation.commands if c.name.startswith(typed)]

    def on_text_area_changed(self, event: TextArea.Changed) -> None:
        shown = self.offered(event.text_area.text)[:COMPLETIONS_SHOWN]
        lines = [safe_markup("[b]{}[/b] {}", c.name, c.description) for c in shown]
        if lines:
            lines.append(safe_markup("[dim]tab completes the first[/dim]"))
        self.query_one("#convo-completions", Static).update(Content("\n").join(lines))

    def complete(self) -> bool:
        prompt = self.query_one(PromptArea)
        shown = self.offered(prompt.text)
        if not shown:
            return False
        prompt.text = shown[0].name + " "
        prompt.move_cursor(prompt.document.end)
        return True

    # -- keys ------------------------------------------------------------------------------

    def _typing(self) -> bool:
        return isinstance(self.focused, PromptArea | Input)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("next_match", "previous_match"):
            return not self._typing() and bool(self.matches)
        if action == "focus_prompt":
            return not isinstance(self.focused, PromptArea)
        return True

    def on_key(self, event: events.Key) -> None:
        """A printable key in the conversation goes into the prompt: typing
        never needs a key first."""
        if self._typing() or not event.is_printable or not event.character:
            return
        if event.character in "nN" and self.matches:
            return
        event.stop()
        event.prevent_default()
        prompt = self.query_one(PromptArea)
        prompt.focus()
        prompt.insert(event.character)

    def action_leave(self) -> None:
        if self._typing():
            for search in self.query("#convo-search"):
                search.remove_class("-open")
            self._focus_view()
            return
        self.app.pop_screen()

    def _focus_view(self) -> None:
        views = self.query(ConversationView)
        if views:
            views.first().focus()
        else:
            self.set_focus(None)

    def action_focus_prompt(self) -> None:
        self.query_one(PromptArea).focus()

    async def action_search(self) -> None:
        found = self.query("#convo-search")
        if found:
            search = found.first(Input)
        else:
            search = Input(
                placeholder="Search the conversation (enter: first match; n/N)", id="convo-search"
            )
            await self.mount(search, after="#convo-header")
        search.add_class("-open")
        search.focus()

    async def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id != "convo-search":
            return
        self.needle = event.value
        self.matches = self.conversation.matches(event.value)
        self.current = None
        self._focus_view()
        if not self.matches:
            self._mark()
            self.notify(f"No block holds {event.value!r}.", severity="warning", markup=False)
            return
        await self._go(len(self.matches) - 1)  # the newest match first: nearest the tail

    async def _go(self, position: int) -> None:
        position %= len(self.matches)
        self.current = position
        index = self.matches[position]
        view = self.query_one(ConversationView)
        self._mark()  # first: the marks change the blocks' heights
        await view.reveal(index)
        self.query_one(
            "#convo-search", Input
        ).border_subtitle = f"{position + 1}/{len(self.matches)}"

    def _mark(self) -> None:
        views = self.query(ConversationView)
        if views:
            current = None if self.current is None else self.matches[self.current]
            views.first().mark(self.needle, self.matches, current)

    async def action_next_match(self) -> None:
        if self.matches:
            await self._go(0 if self.current is None else self.current + 1)

    async def action_previous_match(self) -> None:
        if self.matches:
            await self._go(-1 if self.current is None else self.current - 1)
