"""Machinery both pane backends share: process facts read from /proc, stopping
a pane's whole process tree, and the check that a pasted text has landed.

Nothing here starts a subprocess: the sweep budget (100 panes in ≤ 10 ms)
leaves no room for one per pane, and killing must work when tmux is gone.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from .base import PaneError, PaneSpec, Screen

PROC = Path("/proc")

# -- before a spawn ---------------------------------------------------------------

MAX_PANE_SIZE = 10_000  # tmux's limit on either dimension


def _has_control(text: str) -> bool:
    return any(ord(c) < 32 or ord(c) == 127 for c in text)


def resolve_program(name: str, cwd: Path, env: dict[str, str]) -> Path | None:
    """Where `execvp` in `cwd` with `env` would find `name`, or None."""
    candidates: list[Path]
    if "/" in name:
        candidates = [cwd / name]
    else:
        search = env.get("PATH", os.defpath)
        candidates = [cwd / (d or ".") / name for d in search.split(os.pathsep)]
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return path
    return None


def preflight(spec: PaneSpec) -> tuple[Path, Path]:
    """Check everything a spawn needs before anything is created; returns the
    absolute working directory and the resolved program. Raises PaneError
    with a sentence saying what is wrong."""
    who = f"cannot start a pane for session {spec.session_id!r}"
    if not spec.session_id or _has_control(spec.owner):
        raise PaneError(f"{who}: the session id must be non-empty printable text")
    if not spec.argv or not all(isinstance(a, str) for a in spec.argv) or not spec.argv[0]:
        raise PaneError(f"{who}: the command is empty")
    if any("\0" in a for a in spec.argv):
        raise PaneError(f"{who}: the command contains a NUL character")
    for key, value in spec.env.items():
        if not key or "=" in key or "\0" in key or "\0" in str(value):
            raise PaneError(f"{who}: invalid environment variable {key!r}")
    for what, n in (("width", spec.width), ("height", spec.height)):
        if not isinstance(n, int) or not 1 <= n <= MAX_PANE_SIZE:
            raise PaneError(f"{who}: {what} {n!r} is not between 1 and {MAX_PANE_SIZE}")
    cwd = Path(spec.cwd).absolute()
    if not cwd.is_dir():
        raise PaneError(f"{who}: the working directory {cwd} does not exist")
    if not os.access(cwd, os.X_OK):
        raise PaneError(f"{who}: the working directory {cwd} is not accessible")
    program = resolve_program(spec.argv[0], cwd, spec.env)
    if program is None:
        where = "in " + cwd.as_posix() if "/" in spec.argv[0] else "on the pane's PATH"
        raise PaneError(f"{who}: program {spec.argv[0]!r} was not found {where}")
    return cwd, program


# -- process facts ---------------------------------------------------------------


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, process group, session) of `pid`, or None if it is gone."""
    try:
        raw = (PROC / str(pid) / "stat").read_bytes()
    except OSError:
        return None
    # "pid (comm) state ppid pgrp session ..." — comm may hold spaces and parens
    fields = raw[raw.rfind(b")") + 2 :].split()
    try:
        return fields[0].decode(), int(fields[2]), int(fields[3])
    except (IndexError, ValueError):
        return None


def _all_pids() -> Iterable[int]:
    try:
        names = os.listdir(PROC)
    except OSError:
        return ()
    return (int(n) for n in names if n.isdigit())


def session_members(leader: int) -> dict[int, int]:
    """Live (not zombie) processes of the terminal session `leader` started,
    as {pid: process group}. A pane's first process leads its own session
    (tmux and ptyprocess both call setsid), and its children stay in that
    session even when a shell puts them into other process groups."""
    if not PROC.is_dir():  # not Linux: the leader's group is all we can see
        return {leader: leader} if pid_alive(leader) else {}
    members: dict[int, int] = {}
    for pid in _all_pids():
        st = _stat(pid)
        if st is not None and st[2] == leader and st[0] not in ("Z", "X"):
            members[pid] = st[1]
    return members


def pid_alive(pid: int) -> bool:
    """True if `pid` runs (a zombie counts as gone)."""
    st = _stat(pid)
    if st is not None:
        return st[0] not in ("Z", "X")
    if PROC.is_dir():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def process_name(pid: int) -> str:
    """The kernel's short name of `pid` ("" if unknown)."""
    try:
        return (PROC / str(pid) / "comm").read_text(errors="replace").strip()
    except OSError:
        return ""


def _signal_all(members: dict[int, int], leader: int, sig: int) -> None:
    groups = set(members.values()) | {leader}
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)
    for pid in members:  # a member that left for a group of its own
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def signal_session(leader: int, sig: int) -> None:
    """Send `sig` to every process group of the session led by `leader`."""
    members = session_members(leader)
    if members:
        _signal_all(members, leader, sig)


def stop_session(
    leader: int,
    timeout: float,
    *,
    reap: Callable[[], object] | None = None,
    kill_grace: float = 0.5,
    poll: float = 0.02,
) -> bool:
    """SIGTERM every process of the session led by `leader`, wait up to
    `timeout` for them to exit, then SIGKILL what is left and wait at most
    `kill_grace` more. `reap` (if given) is called while waiting so a parent
    can collect its own child. Returns True when nothing of the session is
    left. Never blocks longer than timeout + kill_grace (plus one poll)."""
    deadline = time.monotonic() + max(0.0, timeout)
    members = session_members(leader)
    if not members:
        if reap is not None:
            reap()
        return True
    _signal_all(members, leader, signal.SIGTERM)
    _signal_all(members, leader, signal.SIGCONT)  # a stopped process cannot act on TERM
    while True:
        if reap is not None:
            reap()
        members = session_members(leader)
        if not members:
            return True
        if time.monotonic() >= deadline:
            break
        time.sleep(min(poll, max(0.0, deadline - time.monotonic())))
    grace_end = time.monotonic() + kill_grace
    while members:
        _signal_all(members, leader, signal.SIGKILL)
        if reap is not None:
            reap()
        if time.monotonic() >= grace_end:
            break
        time.sleep(poll)
        members = session_members(leader)
    if reap is not None:
        reap()
    return not members


# -- did the paste land? ------------------------------------------------------------

# What agent CLIs show instead of a long paste (Claude Code: "[Pasted text #1
# +42 lines]", Codex: "[Pasted Content 1234 chars]").
PASTE_PLACEHOLDER = re.compile(r"\[Pasted (?:text|content)\b", re.IGNORECASE)
NEEDLE_CHARS = 24


def _squash(text: str) -> str:
    return "".join(text.split())


def paste_needle(text: str, limit: int = NEEDLE_CHARS) -> str:
    """The distinctive part of `text` to look for on screen: the tail of its
    last non-empty line, whitespace removed (so wrapping and re-indenting by
    the application do not matter)."""
    lines = [line for line in text.splitlines() if line.strip()]
    return _squash(lines[-1])[-limit:] if lines else ""


def _needle_span(text: str, needle: str) -> int:
    """How many columns the needle's source takes on screen, whitespace
    included: the shortest tail of the last non-empty line holding it."""
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    if not lines or not needle:
        return len(needle)
    last, seen = lines[-1], 0
    for start in range(len(last) - 1, -1, -1):
        seen += not last[start].isspace()
        if seen >= len(needle):
            return len(last) - start
    return len(last)


class PasteCheck:
    """Decides from successive screens whether a paste has shown up.

    Landed means the screen changed since the paste and either the needle
    occurs more often than before, or it ends on the cursor's line (where an
    input line shows what was typed, even when the screen scrolled the older
    copy away), or the application shows a "[Pasted text …]" placeholder it
    did not show before."""

    def __init__(self, text: str, before: Screen) -> None:
        self.needle = paste_needle(text)
        self._span = _needle_span(text, self.needle)
        self.before = list(before.lines)
        self._count0 = self._count(before)
        self._placeholders0 = self._placeholders(before)

    def _count(self, screen: Screen) -> int:
        if not self.needle:
            return 0
        return _squash("\n".join(screen.lines)).count(self.needle)

    @staticmethod
    def _placeholders(screen: Screen) -> int:
        return sum(len(PASTE_PLACEHOLDER.findall(line)) for line in screen.lines)

    def _near_cursor(self, screen: Screen) -> bool:
        if not self.needle or not screen.lines:
            return False
        width = max(1, screen.width or max(len(line) for line in screen.lines))
        # the cursor's line and every row the needle can wrap over: a tail of
        # `span` columns that starts late on a row reaches one row further
        rows = 2 + self._span // width
        y = min(max(screen.cursor_y, 0), len(screen.lines) - 1)
        above = _squash("".join(screen.lines[max(0, y - rows + 1) : y]))
        text = above + _squash(screen.lines[y])
        # an occurrence that reaches into the cursor's row, not one wholly above it
        return text.find(self.needle, max(0, len(above) - len(self.needle) + 1)) >= 0

    def at_cursor(self, screen: Screen) -> bool:
        """The text ends on the cursor's line: typed into the input, not yet sent."""
        return self._near_cursor(screen)

    def landed(self, screen: Screen) -> bool:
        if list(screen.lines) == self.before:
            return False
        if self.needle and (self._count(screen) > self._count0 or self._near_cursor(screen)):
            return True
        return self._placeholders(screen) > self._placeholders0


def wait_landed(
    text: str,
    before: Screen,
    grab: Callable[[], Screen | None],
    timeout: float,
    poll: float = 0.03,
) -> Screen | None:
    """Poll `grab()` until the paste of `text` shows or `timeout` passes.
    Returns the confirming screen, or None. `grab` may raise (e.g. PaneGone)."""
    check = PasteCheck(text, before)
    deadline = time.monotonic() + timeout
    while True:
        screen = grab()
        if screen is not None and check.landed(screen):
            return screen
        if time.monotonic() >= deadline:
            return None
        time.sleep(poll)
