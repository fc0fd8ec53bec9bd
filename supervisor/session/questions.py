"""The pending question (`ask_user`) and the steering queue of one session.

The question is armed before `user_input_requested` is emitted, so a board
never reads "running" for a session that is waiting. It stays armed until it
is answered or withdrawn: a wait past `ask_user_timeout_secs` only counts a
reminder (`user_input_expired` with `still_waiting`), never clears it.
"""

from __future__ import annotations

import asyncio

from ..errors import CorralError

MAX_GUIDANCE_BYTES = 16 * 1024
MAX_GUIDANCE_MESSAGES = 64

NO_PENDING_REQUEST = "no pending user-input request"
ANSWER_FIRST = "Answer the task's pending question first, or cancel it before changing direction."
GUIDANCE_SIZE = "Guidance must contain between 1 and 16384 bytes of text."
GUIDANCE_LIMIT = (
    "This task has reached its guidance limit. Finish or stop it, then continue in a "
    "follow-up task."
)
NOT_STEERABLE = "this task is not accepting steering right now"
CLEARED = "user-input request was cleared before an answer arrived"


class QuestionCleared(Exception):
    """The question was withdrawn (cancel) before an answer arrived."""


class PendingQuestion:
    """At most one question waiting for the operator, and the future its asker awaits."""

    def __init__(self) -> None:
        self.prompt: str | None = None
        self.options: list[str] = []
        self._answer: asyncio.Future[str] | None = None
        self.reminders = 0  # how often this question was said again, unanswered

    def remind(self) -> None:
        """One more reminder of the pending question (the board's row changes,
        so a notifier says it again)."""
        if self.is_pending:
            self.reminders += 1

    @property
    def is_pending(self) -> bool:
        return self._answer is not None and not self._answer.done()

    def arm(self, prompt: str, options: list[str] | None = None) -> asyncio.Future[str]:
        if self.is_pending:
            raise CorralError("a question is already waiting for an answer")
        self.prompt = prompt
        self.options = list(options or [])
        self.reminders = 0
        self._answer = asyncio.get_running_loop().create_future()
        return self._answer

    def fulfill(self, text: str) -> None:
        if not self.is_pending:
            raise CorralError(NO_PENDING_REQUEST)
        assert self._answer is not None
        self._answer.set_result(text)
        self.prompt = None
        self.options = []

    def clear(self) -> None:
        """Withdraw the question; a waiter sees `QuestionCleared`."""
        if self._answer is not None and not self._answer.done():
            self._answer.set_exception(QuestionCleared(CLEARED))
            # marked as seen: a waiter already gone (its run cancelled as the
            # owner closed) must not leave asyncio's "never retrieved" on stderr
            self._answer.exception()
        self._answer = None
        self.prompt = None
        self.options = []


def check_guidance(text: str, already: int) -> str:
    """Validate one guidance message; returns it trimmed or raises."""
    trimmed = text.strip()
    if not trimmed or len(trimmed.encode("utf-8")) > MAX_GUIDANCE_BYTES:
        raise CorralError(GUIDANCE_SIZE)
    if already >= MAX_GUIDANCE_MESSAGES:
        raise CorralError(GUIDANCE_LIMIT)
    return trimmed


class SteeringQueue:
    """Operator guidance waiting for the engine's next round. Open only while an
    engine that can take guidance is running."""

    def __init__(self) -> None:
        self.is_open = False
        self._queued: list[str] = []

    def open(self) -> None:
        self.is_open = True

    def close(self) -> None:
        self.is_open = False

    def push(self, text: str) -> None:
        if not self.is_open:
            raise CorralError(NOT_STEERABLE)
        self._queued.append(text)

    def take(self) -> list[str]:
        items, self._queued = self._queued, []
        return items
