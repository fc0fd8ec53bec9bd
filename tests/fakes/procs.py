"""Processes found by an argument (a sandbox's pids are its own namespace's)."""

from __future__ import annotations

import os


def running_with_arg(arg: str) -> list[int]:
    """Live (not zombie) processes with `arg` among their arguments."""
    found: list[int] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                args = fh.read().split(b"\0")
            with open(f"/proc/{entry}/stat", encoding="utf-8") as fh:
                state = fh.read().split(")")[-1].split()[0]
        except OSError:
            continue
        if arg.encode() in args and state not in ("Z", "X"):
            found.append(int(entry))
    return found
