"""Ownership of a state dir: one process at a time holds `owner.lock`, an
flock kept for the process lifetime, with the holder's pid written inside."""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from pathlib import Path

from ..errors import StateDirError
from ..paths import LOCK_NAME, LockHolder, ensure_private_dir, read_lock_holder

__all__ = ["LOCK_NAME", "LockHolder", "OwnerLock", "read_lock_holder"]


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
