"""Ownership of a state dir: one process at a time holds `owner.lock`, an
flock kept for the process lifetime, with the holder's pid written inside."""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from dataclasses import dataclass
from pathlib import Path

from ..errors import StateDirError
from ..paths import ensure_private_dir

LOCK_NAME = "owner.lock"


@dataclass(frozen=True)
class LockHolder:
    pid: int | None
    since: str | None

    def describe(self) -> str:
        if self.pid is None:
            return "an unknown process"
        alive = _pid_alive(self.pid)
        return f"pid {self.pid}" + ("" if alive else " (not running; its lock is stale)")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_lock_holder(state_dir: Path) -> LockHolder | None:
    """Who holds the state dir, or None when nobody does. Never blocks."""
    path = state_dir / LOCK_NAME
    if not path.exists():
        return None
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            text = path.read_text(encoding="utf-8", errors="replace").split()
            pid = int(text[0]) if text and text[0].isdigit() else None
            since = text[1] if len(text) > 1 else None
            return LockHolder(pid, since)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


class OwnerLock:
    """Exclusive ownership of a state dir for this process's lifetime."""

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / LOCK_NAME
        self._fd: int | None = None

    def acquire(self) -> None:
        ensure_private_dir(self.path.parent)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            holder = read_lock_holder(self.path.parent) or LockHolder(None, None)
            raise StateDirError(
                f"another corral already owns {self.path.parent} ({holder.describe()}); "
                "switch to that console, close it first, or set CORRAL_HOME to use a "
                "separate state dir"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()} {time.strftime('%Y-%m-%dT%H:%M:%S')}\n".encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, 0)
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
