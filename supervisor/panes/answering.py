"""Answering a menu on an agent's screen, and seeing the answer land.

Keys sent to a program that is not yet reading them are lost, and a lost
arrow key turns "Yes" into the default "No". So an answer is delivered in
steps, each checked on a fresh capture of the pane:

1. the menu must be on screen and the screen stable (two captures apart
   agree), or nothing is sent;
2. arrow keys move the cursor; the capture must show the cursor on the
   chosen option before Enter is pressed (moved again while it is not, up to
   a timeout) — a numbered menu with no cursor takes the option's digit;
3. after Enter the menu must leave the screen, and what follows must not
   contradict the choice (an agent that now says it is not signed in did not
   take "use this key").

Only then is the answer reported as selected; otherwise the caller is told
it did not land, and why, and asks again.

An answer in words (a question that takes text, or a "No, and tell …"
option) goes the same way: sent only to a stable question, pasted (the
paste must show before Enter), then reported only once the question has
left the screen with nothing contradicting it. A program that never reads
the text keeps asking, and that answer is not reported as given.
"""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass

from ..status import (
    GENERIC,
    AgentStatus,
    Markers,
    Question,
    classify,
    clean_lines,
    find_menu,
    find_question,
    signed_out,
)
from .base import HostDown, PaneBackend, PaneError, PaneHandle, Screen

STABLE_GAP = 0.25  # seconds between the two captures that must agree
LAND_TIMEOUT = 6.0


@dataclass(frozen=True)
class Landing:
    """What became of an answer: `landed`, and a sentence for the log."""

    landed: bool
    detail: str


def menu_on(lines: list[str], question: Question, markers: Markers | None = None) -> bool:
    """The same question, with the same options, is on screen."""
    found = find_question(lines) or find_menu(lines)
    if found is None and markers is not None and markers.menu is not None:
        found = markers.menu.find(lines)
    return (
        found is not None and found.prompt == question.prompt and found.options == question.options
    )


def asked_on(lines: list[str], question: Question, markers: Markers | None = None) -> bool:
    """The question is still being asked: its menu with the same options, or,
    for a question without options, a screen that still reads as asking it."""
    if question.options:
        return menu_on(lines, question, markers)
    reading = classify(lines, markers or GENERIC)
    return (
        reading.status is AgentStatus.WAITING
        and reading.question is not None
        and reading.question.prompt == question.prompt
    )


MARKS = ("❯", "›", "●", ">")  # menu cursors: Claude Code, Codex, Gemini CLI, others


def cursor_row(lines: list[str], question: Question, option: str) -> tuple[int | None, int | None]:
    """(row of the cursor, row of `option`) in the menu under the question's
    line (lines above it, such as a transcript's `● …`, are not the menu)."""
    start = 0
    for i, line in enumerate(lines):
        if question.prompt and question.prompt in line:
            start = i + 1
    cursor = target = None
    for i in range(start, len(lines)):
        body = lines[i].strip()
        marked = body[:1] in MARKS
        text = body[1:].strip() if marked else body
        text = re.sub(r"^\d{1,2}[.)]\s+", "", text)
        if text == option:
            target = i
        if marked:
            cursor = i
    return cursor, target


class MenuAnswer:
    """One answer to one on-screen menu, delivered and checked step by step."""

    def __init__(
        self,
        backend: PaneBackend,
        handle: PaneHandle,
        markers: Markers,
        *,
        timeout: float = LAND_TIMEOUT,
    ) -> None:
        self.backend = backend
        self.handle = handle
        self.markers = markers
        self.timeout = timeout

    async def _lines(self) -> list[str]:
        screens: dict[str, Screen] = await asyncio.to_thread(self.backend.capture, [self.handle])
        screen = screens.get(self.handle.owner)
        return clean_lines(screen.lines) if screen else []

    async def _send(self, keys: list[str]) -> None:
        await asyncio.to_thread(self.backend.send_keys, self.handle, keys)

    async def _stable(self, question: Question) -> list[str] | None:
        """The screen once two captures agree with the menu on it, or None
        when the menu is not (or no longer) there."""
        deadline = time.monotonic() + self.timeout
        before = await self._lines()
        while time.monotonic() < deadline:
            await asyncio.sleep(STABLE_GAP)
            now = await self._lines()
            if not asked_on(now, question, self.markers):
                return None
            if now == before:
                return now
            before = now
        return None

    async def select(self, question: Question, index: int) -> Landing:
        """Select option `index` (1-based) of `question` and confirm it landed."""
        option = question.options[index - 1]
        chosen = f"option {index}: {option}"
        lines = await self._stable(question)
        if lines is None:
            return Landing(False, f"not sent ({chosen}): the question is no longer on the screen")
        cursor, target = cursor_row(lines, question, option)
        if target is None:
            return Landing(False, f"not sent ({chosen}): the option is not on the screen")
        if cursor is None:
            await self._send([str(index)])  # a numbered menu without a cursor
        else:
            deadline = time.monotonic() + self.timeout
            while cursor != target and time.monotonic() < deadline:
                step = "Down" if target > cursor else "Up"
                await self._send([step] * abs(target - cursor))
                await asyncio.sleep(STABLE_GAP)
                lines = await self._lines()
                if not menu_on(lines, question, self.markers):
                    return Landing(False, f"not selected ({chosen}): the menu closed while moving")
                cursor, target = cursor_row(lines, question, option)
                if target is None or cursor is None:
                    return Landing(False, f"not selected ({chosen}): the menu changed while moving")
            if cursor != target:
                return Landing(False, f"not selected ({chosen}): the cursor did not reach it")
            await self._send(["Enter"])
        return await self._landed(question, chosen)

    async def confirm(self, question: Question, chosen: str) -> Landing:
        """For keys already sent by the caller (a menu drawn as one row whose
        selection is only a colour): whether the answer landed."""
        return await self._landed(question, chosen)

    async def words(self, question: Question, text: str, tell: int | None = None) -> Landing:
        """Answer `question` in words: option `tell` first (a "No, and tell
        …" option opens a text box), then `text` pasted and Enter. Reported
        only once the question has left the screen."""
        if await self._stable(question) is None:
            return Landing(False, "not sent (words): the question is no longer on the screen")
        if tell is not None:
            await self._send([str(tell)])
            await asyncio.sleep(0.3)
        try:
            await asyncio.to_thread(self.backend.send_text, self.handle, text)
        except HostDown:
            raise  # the caller waits for the host, then looks again
        except PaneError as exc:
            return Landing(False, f"the words were not sent: {exc}")
        done = "answered in words" + (f" (after option {tell})" if tell else "")
        return await self._landed(question, done, "the words were", contradicted=True)

    async def _landed(
        self,
        question: Question,
        chosen: str,
        sent: str | None = None,
        *,
        contradicted: bool | None = None,
    ) -> Landing:
        """The question left the screen and nothing after it contradicts the
        answer: an agent that now says it is not signed in did not take "Yes,
        use this key" (nor any words); it may well say so after "No"."""
        if sent is None:  # an option: "option 1: Yes"
            sent, chosen = f"{chosen} was", f"selected {chosen}"
        if contradicted is None:
            contradicted = not chosen.lower().split(": ", 1)[-1].startswith("no")
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            await asyncio.sleep(STABLE_GAP)
            lines = await self._lines()
            if asked_on(lines, question, self.markers):
                continue
            said = signed_out(lines, self.markers)
            if said is not None and contradicted:
                return Landing(False, f"{sent} sent, but the agent then said: {said}")
            return Landing(True, chosen)
        return Landing(False, f"{sent} sent, but the question is still on the screen")
