"""A Static that says when it is first painted with something to show.

`call_after_refresh` can run before anything reached the terminal (a screen
with nothing dirty yet runs it at once); a widget's render, by contrast, runs
inside the frame the compositor is writing, so whatever it schedules runs once
that frame is on its way. The board waits for it before the supervisor is built
and opened (which holds the interpreter for a while)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from textual.app import RenderResult
from textual.widgets import Static


class PaintedStatic(Static):
    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self._when_painted: list[Callable[[], object]] = []

    def when_painted(self, then: Callable[[], object]) -> None:
        """`then()` runs once this widget's next non-empty frame is out."""
        self._when_painted.append(then)
        self.refresh()

    def render(self) -> RenderResult:
        shown = super().render()
        if self._when_painted and str(self.content):
            waiting, self._when_painted = self._when_painted, []
            loop = asyncio.get_running_loop()
            for then in waiting:
                loop.call_soon(then)
        return shown
