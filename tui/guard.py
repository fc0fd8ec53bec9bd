"""No traceback reaches the screen: unexpected errors become notifications.

Expected failures are `CorralError`s, whose sentences the screens show as
they are. Anything else is a bug; it must not tear the console down (Textual
exits on an error in a worker), so it is logged with its traceback to the
console log in the state dir and shown as one notification saying where the
details are.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from logging.handlers import RotatingFileHandler
from pathlib import Path
from typing import Any, TypeVar, cast

from corral.supervisor.paths import ensure_private_dir

log = logging.getLogger("corral.console")

LOG_NAME = "console.log"
LOG_BYTES = 1_000_000
LOG_BACKUPS = 2

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])


def log_to_file(state_dir: Path) -> Path:
    """Send corral's log records (warnings and up; the console owns the
    terminal, so stderr would be lost) to `<state_dir>/console.log`."""
    path = ensure_private_dir(Path(state_dir)) / LOG_NAME
    root = logging.getLogger()
    if not any(getattr(h, "baseFilename", None) == str(path) for h in root.handlers):
        handler = RotatingFileHandler(
            path, maxBytes=LOG_BYTES, backupCount=LOG_BACKUPS, encoding="utf-8"
        )
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        handler.setLevel(logging.WARNING)
        root.addHandler(handler)
    return path


def unexpected_sentence(where: str, exc: BaseException, log_path: Path | None) -> str:
    details = f"; details in {log_path}" if log_path is not None else ""
    return f"{where} failed unexpectedly: {type(exc).__name__}: {exc}{details}"


def guarded(where: str) -> Callable[[F], F]:
    """For screen workers: an unexpected error is reported, not fatal."""

    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        async def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                return await fn(self, *args, **kwargs)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                report = getattr(self.app, "report_unexpected", None)
                if report is None:
                    raise
                report(where, exc)
                return None

        return cast(F, wrapper)

    return decorate
