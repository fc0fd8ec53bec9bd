"""Stopping background tasks without swallowing our own cancellation.

`with suppress(BaseException): await task` after `task.cancel()` also eats the
CancelledError meant for the *caller* (its own cancel, a Ctrl-C) and every
error the task ended with. `cancel_and_wait` cancels, waits for the tasks to
end, says in the log what one ended with (cleanup that could not finish is
never silent), and lets the caller's own cancellation go on."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any

log = logging.getLogger("corral.supervisor")


async def cancel_and_wait(
    tasks: Iterable[asyncio.Future[Any]], *, timeout: float | None = None, what: str = "a task"
) -> None:
    """Cancel `tasks` and wait (up to `timeout`) until they have ended. Their
    errors are logged, not raised; the caller being cancelled is raised."""
    waited = list(tasks)
    pending = [t for t in waited if not t.done()]
    for task in pending:
        task.cancel()
    if pending:
        _done, still = await asyncio.wait(pending, timeout=timeout)
        if still:
            log.warning(
                "%d of %s did not stop within %.1f s of being cancelled", len(still), what, timeout
            )
    for task in waited:
        if task.done() and not task.cancelled():
            error = task.exception()
            if error is not None:
                log.warning("%s ended with %s: %s", what, type(error).__name__, error)
