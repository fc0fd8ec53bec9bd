"""Steering an adopted pane: what the external engine does for its own
agents, minus the task — a question on screen parks the session on the
question gate and the operator's answer is selected in the pane (seen to
land); queued messages are pasted at the idle prompt (never mid-turn, never
over a question); the pane closing ends the session."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from ..errors import CorralError
from ..events import (
    GUIDANCE_DELIVERED,
    GUIDANCE_NOT_DELIVERED,
    MESSAGE_ACCEPTED,
    MESSAGE_AMBIGUOUS,
    MESSAGE_REJECTED,
    OperatorGuidanceData,
    PaneAnswerData,
    PlanTextData,
    UserInputRequestedData,
)
from ..panes.base import PaneError, PaneGone
from ..panes.manager import PaneManager
from ..session.live import LiveSession
from ..session.messages import Message, message_prompt
from ..session.questions import QuestionCleared
from ..session.registry import SessionRegistry
from ..status import AgentStatus, Question

log = logging.getLogger("corral.adoption")

AGENT_CHECK = 3.0  # seconds between looks at what runs in the pane


class Steering:
    """One adopted pane's loop, run as its session's task."""

    def __init__(
        self,
        registry: SessionRegistry,
        panes: PaneManager,
        live: LiveSession,
        on_closed: Callable[[LiveSession], None],
        agent_left: Callable[[LiveSession], Awaitable[bool]],
    ) -> None:
        self.registry = registry
        self.panes = panes
        self.live = live
        self.on_closed = on_closed  # the pane went away by itself
        # checked every AGENT_CHECK seconds: the agent exited, its pane (a
        # shell now) runs on; True ends the session (the marker removed)
        self.agent_left = agent_left
        self._asked: tuple[str, tuple[str, ...]] | None = None  # the question last put to you
        self._version = -1  # the pane's change counter last seen
        self._checked = time.monotonic()  # when the pane's command was last looked at

    @property
    def sid(self) -> str:
        return self.live.id

    async def run(self) -> None:
        """Until the pane closes (the session ends) or the task is cancelled
        (release, cancel, close). A step that fails (tmux did not answer) is
        logged and tried again: the pane is watched for as long as it is ours."""
        while True:
            try:
                if await self._step():
                    return
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("watching the adopted pane of %s", self.sid)
                await asyncio.sleep(1.0)

    async def _step(self) -> bool:
        """One look at the pane and what it needs; True when the session ended."""
        record = self.panes.record(self.sid)
        if record is None or not record.alive:
            self.on_closed(self.live)
            return True
        if time.monotonic() - self._checked > AGENT_CHECK:
            self._checked = time.monotonic()
            if await self.agent_left(self.live):
                return True
        reading = record.status
        question = reading.question if reading.status is AgentStatus.WAITING else None
        if question is not None:
            key = (question.prompt, question.options)
            if key != self._asked:
                self._asked = key
                if not await self._ask(question):
                    self._asked = None  # not seen to land: ask again while it is up
                return False
        else:
            self._asked = None
            if reading.status is AgentStatus.IDLE:
                await self._deliver(record.incarnation)
        self._version = await self.panes.wait_change(self.sid, self._version, 1.0)
        return False

    async def _deliver(self, incarnation: int | None) -> None:
        """Your words (typed on its session screen) as they are, and messages
        from other sessions, pasted at the idle prompt and seen to land."""
        notes = self.live.steering.take()
        messages = self.registry.mailboxes.take(self.sid)
        if not notes and not messages:
            return
        parts = [*notes, *([message_prompt(messages)] if messages else [])]
        try:
            await self.panes.send_text(self.sid, "\n\n".join(parts), incarnation=incarnation)
        except PaneGone as exc:
            self._ended(notes, messages, MESSAGE_REJECTED, f"the pane was gone: {exc}")
            return
        except PaneError as exc:
            self._ended(notes, messages, MESSAGE_AMBIGUOUS, f"the paste was not confirmed: {exc}")
            return
        for note in notes:
            self.registry.emit(
                self.live, OperatorGuidanceData(text=note, status=GUIDANCE_DELIVERED)
            )
        self.registry.note_messages(messages, MESSAGE_ACCEPTED, None)
        self.panes.prompted(self.sid, self.panes.clock())

    def _ended(self, notes: list[str], messages: list[Message], status: str, reason: str) -> None:
        for note in notes:
            self.registry.emit(
                self.live,
                OperatorGuidanceData(text=note, status=GUIDANCE_NOT_DELIVERED, reason=reason),
            )
        self.registry.note_messages(messages, status, reason)

    async def _ask(self, question: Question) -> bool:
        """Wait for the operator's answer, or the question leaving the screen
        (answered in the pane itself); False when an answer did not land."""
        live = self.live
        answer_future = live.question.arm(question.prompt, list(question.options))
        self.registry.emit(
            live, UserInputRequestedData(prompt=question.prompt, options=list(question.options))
        )
        version = -1
        try:
            while not answer_future.done():
                record = self.panes.record(self.sid)
                if record is None or not record.alive:
                    return True
                current = record.status
                if current.status is not AgentStatus.WAITING or current.question != question:
                    self.registry.emit(
                        live, PlanTextData(text="The question was answered in the pane.")
                    )
                    return True
                waiter = asyncio.ensure_future(self.panes.wait_change(self.sid, version, 1.0))
                pending: set[asyncio.Future[object]] = {answer_future, waiter}  # type: ignore[arg-type]
                await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                if waiter.done():
                    version = waiter.result()
                else:
                    waiter.cancel()
            try:
                answer = answer_future.result()
            except (QuestionCleared, CorralError):
                return True
            landing = await self.panes.choose(self.sid, question, answer)
            if not landing.landed:
                self.registry.emit(
                    live,
                    PlanTextData(text=f"The answer {answer!r} did not land: {landing.detail}."),
                )
                return False
            self.registry.emit(
                live, PaneAnswerData(question=question.prompt, answer=answer, action=landing.detail)
            )
            return True
        finally:
            if live.question.is_pending:
                live.question.clear()
            self.registry.notify(self.sid)
            if answer_future.done() and not answer_future.cancelled():
                answer_future.exception()  # seen: a cleared question raises nothing
