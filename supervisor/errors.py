"""The one exception type the supervisor raises to callers.

Its message is the sentence an operator reads (seed gate sentences included),
so views show `str(exc)` verbatim.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path


class CorralError(Exception):
    """A refusal or failure with an operator-facing sentence."""


@contextlib.contextmanager
def swallowed(log: logging.Logger, what: str, level: int = logging.INFO) -> Iterator[None]:
    """For cleanup that must not stop what it cleans up after (closing a
    pipe, stopping a pane already gone, a ledger line after a failure): an
    exception is dropped, but logged with what was being done and what it
    was. Never a bare `suppress(Exception)`: a failure nobody can read about
    is a bug nobody finds (`tests/unit/test_swallowed.py` holds to it)."""
    try:
        yield
    except Exception as exc:
        log.log(level, "%s failed, and corral carried on: %s: %s", what, type(exc).__name__, exc)


class FlakyPassHeld(CorralError):
    """An approve that did not acknowledge a flaky pass: a check passed only
    on its immediate re-run, so the change waits for a person's explicit
    acknowledgement (`accept_flaky`). Its own kind, so a headless caller
    (`corral run`, exit 10) can tell it from any other refusal."""


class JudgeChangeHeld(CorralError):
    """An approve that did not acknowledge that the work changed how it is
    judged (`accept_judge_changes`): held for a person, like `FlakyPassHeld`;
    its own kind so a headless caller (`corral run`, exit 9) can tell it."""


class StateDirError(CorralError):
    """The state dir is unusable (busy, corrupt, too new, not absolute)."""


class ConfigError(CorralError):
    """A configuration file or value that does not parse."""


class DiskFullError(StateDirError):
    """The disk holding the state dir is full (or the quota is used up)."""


DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
_DISK_FULL_TEXT = ("no space left on device", "disk quota exceeded", "database or disk is full")


def is_disk_full(exc: BaseException | None) -> bool:
    """Whether `exc`, or an exception it was raised from, is a full disk: an
    `OSError` with ENOSPC or EDQUOT, SQLite's SQLITE_FULL, or a tool (git)
    that said so."""
    seen = 0
    while exc is not None and seen < 20:
        if isinstance(exc, DiskFullError):
            return True
        if isinstance(exc, OSError) and exc.errno in DISK_FULL_ERRNOS:
            return True
        if isinstance(exc, sqlite3.Error) and (
            getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL
        ):
            return True
        text = f"{exc} {getattr(exc, 'stderr', '') or ''}".lower()
        if any(t in text for t in _DISK_FULL_TEXT):
            return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


def disk_full(state_dir: Path) -> DiskFullError:
    """The one sentence for a full disk: the state dir and its free space."""
    try:
        free = f"{shutil.disk_usage(state_dir).free // 1024} KB free"
    except OSError:
        free = "free space unknown"
    return DiskFullError(
        f"the disk holding the state dir {state_dir} is full ({free}): free some space there "
        "(or set CORRAL_HOME to another directory) and run corral again; what was stored so "
        "far is kept"
    )


# What a run needs free to start at all: the store's rows and journal, a
# worktree and a verification checkout of a small repository. A disk with less
# is refused before anything is written (a larger repository that fills it
# later is caught as it fills).
MIN_FREE_TO_START = 4 * 1024 * 1024


def _free(path: Path) -> int | None:
    """Free bytes on the disk holding `path` (or its nearest existing parent)."""
    for candidate in (path, *path.parents):
        if candidate.exists():
            try:
                return shutil.disk_usage(candidate).free
            except OSError:
                return None
    return None


def nearly_full(
    state_dir: Path,
    repo: Path | None = None,
    *,
    floor: int = MIN_FREE_TO_START,
    ending: str = "nothing was started",
) -> DiskFullError | None:
    """The one sentence for a disk too full to start a run on (the state
    dir's, or the repository's where its git metadata grows), or None.
    `ending` says what became of the run."""
    places = [("the state dir", state_dir)] + ([("the repository", repo)] if repo else [])
    for what, path in places:
        free = _free(path)
        if free is not None and free < floor:
            how = "full" if free < 64 * 1024 else "nearly full"
            return DiskFullError(
                f"the disk holding {what} {path} is {how} ({free // 1024} KB free; a run needs "
                f"at least {floor // (1024 * 1024)} MB): free some space there"
                + (" (or set CORRAL_HOME to another directory)" if what == "the state dir" else "")
                + f" and run corral again; {ending}"
            )
    return None
