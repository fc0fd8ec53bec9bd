"""A stand-in owner for the conversation screen's pilot tests: it serves one
ACP session's typed events (the very `ConversationData`/`BlockedData` the
supervisor journals) through a real `Subscription`, and records what the
screen asks of it. The real adapters' behaviour is tested end to end
(tests/tui/test_conversation_live.py, tests/e2e/); this lets a test decide
exactly which events, hostile text and questions the view gets."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from textual.app import ComposeResult
from textual.widgets import Static

from corral.supervisor.events import BlockedData, ConversationData, parse_event
from corral.supervisor.interface import Subscription
from corral.supervisor.models import SubscribeResult
from corral.supervisor.states import CoderState
from corral.tui.console_app import ConsoleApp
from corral.tui.screens.conversation import ConversationScreen

SID = "convo0000000000000000001"


def event(seq: int, data: ConversationData | BlockedData) -> Any:
    kind = "blocked" if isinstance(data, BlockedData) else "conversation"
    return parse_event(
        {"session_id": SID, "seq": seq, "ts": 0.0, "kind": kind, "data": data.model_dump()}
    )


def said(part: str, text: str = "", **kw: Any) -> ConversationData:
    return ConversationData(part=part, text=text, **kw)  # type: ignore[arg-type]


class ConvoOwner:
    def __init__(self, parts: list[ConversationData | BlockedData]) -> None:
        self.events = [event(i, p) for i, p in enumerate(parts)]
        self.sub: Subscription[Any] | None = None
        self.question: str | None = None
        self.options: list[str] = []
        self.sent: list[tuple[str, bool]] = []

    def push(self, data: ConversationData | BlockedData) -> None:
        e = event(len(self.events), data)
        self.events.append(e)
        if self.sub is not None:
            self.sub.offer(e)

    def subscribe(self, session_id: str, from_seq: int = 0) -> tuple[Any, Any]:
        sub: Subscription[Any] = Subscription(None, 100_000)
        for e in self.events[from_seq:]:
            sub.offer(e)
        self.sub = sub
        result = SubscribeResult(
            state=CoderState.RUNNING,
            events_replayed=len(self.events),
            events_skipped=0,
            live=True,
            replay_available=True,
        )
        return result, sub

    def get(self, session_id: str) -> Any:
        session = SimpleNamespace(
            id=SID, name="convo", engine="claude-acp", state=CoderState.RUNNING
        )
        return SimpleNamespace(
            session=session,
            agent_status="running",
            agent_reason="prompt in flight",
            agent_source="acp",
            question_prompt=self.question,
        )

    def question_options(self, session_id: str) -> list[str]:
        return list(self.options)

    async def respond(self, session_id: str, text: str, *, steer: bool = False) -> dict[str, bool]:
        self.sent.append((text, steer))
        return {"ok": True}

    async def history(self, session_id: str) -> list[Any]:
        return list(self.events)


class ConvoApp(ConsoleApp):
    """Just the conversation screen over a `ConvoOwner`."""

    def __init__(self, owner: ConvoOwner) -> None:
        super().__init__()
        self.owner = owner
        self.unexpected: list[BaseException] = []

    @property
    def supervisor(self) -> Any:
        return self.owner

    def report_unexpected(self, where: str, exc: BaseException) -> None:
        self.unexpected.append(exc)
        raise exc

    def compose(self) -> ComposeResult:
        yield Static("under the conversation")

    def on_mount(self) -> None:
        self.push_screen(ConversationScreen(SID))
