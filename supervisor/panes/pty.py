"""The pty pane backend: agents in pseudo-terminals of this very process, their
screens kept by a pyte terminal emulator. For machines without tmux.

- Each pane is a child process in a new pty (ptyprocess; the child calls
  setsid, so it leads its own session and process group) with exactly the
  spec's environment (plus TERM=xterm-256color when the spec has none) and
  working directory. One reader thread per pane feeds pyte and records the
  time of the last output; exit status is collected when the program ends.
- sweep(), capture() and scrollback() read in-memory state: no subprocess.
  Lines that scroll off the top are kept as rendered ANSI text in a bounded
  history (`history` lines per pane), not as pyte cells, to keep memory low.
- Panes die with this process: there is no re-adoption after a restart (a
  new PtyBackend starts empty) and close() stops every pane. attach_argv()
  is None: no outside terminal can attach to these ptys.
- Emulation is pyte's (a VT100/xterm subset): it answers cursor-position and
  device-attribute queries, tracks bracketed-paste (mode 2004) and
  application-cursor (mode 1) modes, but has no alternate screen: a program
  that switches to it draws over the main screen.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import os
import select
import signal
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import pyte
from ptyprocess import PtyProcess, PtyProcessError
from pyte.screens import Margins
from wcwidth import wcwidth

from ..errors import swallowed
from .base import PaneError, PaneGone, PaneHandle, PaneInfo, PaneSpec, Screen
from .sweep import (
    MAX_PANE_SIZE,
    preflight,
    process_name,
    signal_session,
    stop_session,
    wait_landed,
)

log = logging.getLogger("corral.panes.pty")

HISTORY_LINES = 2000
KILL_GRACE = 0.5
CLOSE_TIMEOUT = 1.0
WRITE_TIMEOUT = 5.0
WRITE_CHUNK = 512
DEFAULT_TERM = "xterm-256color"
BRACKETED_PASTE = 2004 << 5  # pyte keeps private modes shifted left by 5
APP_CURSOR = 1 << 5
PASTE_START, PASTE_END = "\x1b[200~", "\x1b[201~"

# -- rendering pyte cells as ANSI ---------------------------------------------------------

_COLOURS = {
    "black": 0,
    "red": 1,
    "green": 2,
    "brown": 3,  # pyte's name for yellow
    "yellow": 3,
    "blue": 4,
    "magenta": 5,
    "cyan": 6,
    "white": 7,
}


def _colour(value: str, foreground: bool) -> str | None:
    if not value or value == "default":
        return None
    bright = value.startswith("bright")
    name = value[6:] if bright else value
    if name in _COLOURS:
        base = (90 if bright else 30) if foreground else (100 if bright else 40)
        return str(base + _COLOURS[name])
    if len(value) == 6:
        try:
            r, g, b = (int(value[i : i + 2], 16) for i in (0, 2, 4))
        except ValueError:
            return None
        return f"{38 if foreground else 48};2;{r};{g};{b}"
    return None


def _sgr(char: pyte.screens.Char) -> str:
    params = [
        code
        for on, code in (
            (char.bold, "1"),
            (char.italics, "3"),
            (char.underscore, "4"),
            (char.blink, "5"),
            (char.reverse, "7"),
            (char.strikethrough, "9"),
        )
        if on
    ]
    fg, bg = _colour(char.fg, True), _colour(char.bg, False)
    params += [c for c in (fg, bg) if c]
    return ";".join(params)


def render_line(line: dict[int, pyte.screens.Char], columns: int) -> tuple[str, str]:
    """(plain, ansi) text of one pyte line. Trailing blanks are trimmed unless
    styled (a coloured background shows); the ANSI text stands alone: it
    starts in the default style and ends with a reset if it styled anything."""
    cells: list[tuple[str, str]] = []
    last_visible = -1
    wide = False
    for x in range(columns):
        char = line[x]
        if wide:  # pyte's stub cell after a wide character
            wide = False
            if not char.data:
                continue
        data = char.data or " "
        wide = ord(data[0]) >= 0x1100 and wcwidth(data[0]) == 2
        sgr = _sgr(char)
        cells.append((data, sgr))
        if data != " " or (sgr and (char.bg != "default" or char.reverse)):
            last_visible = len(cells) - 1
    cells = cells[: last_visible + 1]
    plain = "".join(d for d, _ in cells)
    parts: list[str] = []
    current = ""
    for data, sgr in cells:
        if sgr != current:
            parts.append("\x1b[0m" if not sgr else ("\x1b[0m" if current else "") + f"\x1b[{sgr}m")
            current = sgr
        parts.append(data)
    if current:
        parts.append("\x1b[0m")
    return plain, "".join(parts)


class _Screen(pyte.Screen):
    """A pyte screen that keeps what scrolls off the top as rendered lines."""

    def __init__(self, columns: int, lines: int, history: int) -> None:
        self.history: deque[str] = deque(maxlen=history)  # ANSI lines, oldest first
        self.reply: Callable[[bytes], None] | None = None
        super().__init__(columns, lines)

    def index(self) -> None:
        top, bottom = self.margins or Margins(0, self.lines - 1)
        if self.cursor.y == bottom and top == 0 and self.history.maxlen:
            self.history.append(render_line(self.buffer[top], self.columns)[1])
        super().index()

    def write_process_input(self, data: str) -> None:  # answers to terminal queries
        if self.reply is not None:
            self.reply(data.encode())


# -- panes ---------------------------------------------------------------------------------


@dataclass
class _Pane:
    id: str
    owner: str
    proc: PtyProcess
    screen: _Screen
    stream: pyte.ByteStream
    command: str
    activity: float
    lock: threading.Lock = field(default_factory=threading.Lock)  # screen and stream
    proc_lock: threading.Lock = field(default_factory=threading.Lock)  # waitpid
    input_lock: threading.Lock = field(default_factory=threading.Lock)  # one sender at a time
    alive: bool = True
    exit_status: int | None = None
    closed: bool = False
    rendered: list[tuple[str, str]] = field(default_factory=list)
    thread: threading.Thread | None = None

    @property
    def pid(self) -> int:
        return int(self.proc.pid)

    @property
    def fd(self) -> int:
        return int(self.proc.fd)


_NAMED_KEYS: dict[str, str | tuple[str, str]] = {
    "enter": "\r",
    "escape": "\x1b",
    "tab": "\t",
    "btab": "\x1b[Z",
    "bspace": "\x7f",
    "space": " ",
    "up": ("\x1b[A", "\x1bOA"),
    "down": ("\x1b[B", "\x1bOB"),
    "right": ("\x1b[C", "\x1bOC"),
    "left": ("\x1b[D", "\x1bOD"),
    "home": ("\x1b[H", "\x1bOH"),
    "end": ("\x1b[F", "\x1bOF"),
    "ppage": "\x1b[5~",
    "pageup": "\x1b[5~",
    "pgup": "\x1b[5~",
    "npage": "\x1b[6~",
    "pagedown": "\x1b[6~",
    "pgdn": "\x1b[6~",
    "dc": "\x1b[3~",
    "delete": "\x1b[3~",
    "ic": "\x1b[2~",
    "insert": "\x1b[2~",
    "f1": "\x1bOP",
    "f2": "\x1bOQ",
    "f3": "\x1bOR",
    "f4": "\x1bOS",
    "f5": "\x1b[15~",
    "f6": "\x1b[17~",
    "f7": "\x1b[18~",
    "f8": "\x1b[19~",
    "f9": "\x1b[20~",
    "f10": "\x1b[21~",
    "f11": "\x1b[23~",
    "f12": "\x1b[24~",
}


def key_bytes(key: str, app_cursor: bool = False) -> str:
    """What a terminal sends for the tmux key name `key`; a string that is no
    key name is sent as it is (as tmux's send-keys does)."""
    named = _NAMED_KEYS.get(key.lower())
    if named is not None:
        return named[1 if app_cursor else 0] if isinstance(named, tuple) else named
    if len(key) > 2 and key[1] == "-" and key[0] in "CcMm":
        rest = key_bytes(key[2:], app_cursor)
        if key[0] in "Mm":
            return "\x1b" + rest
        if len(rest) == 1:
            c = rest
            if c == " " or c == "@":
                return "\x00"
            if c == "?":
                return "\x7f"
            if c.isalpha() or c in "[\\]^_":
                return chr(ord(c.upper()) & 0x1F)
        return rest
    return key


class PtyBackend:
    """Agent panes as ptys of this process (no tmux needed)."""

    name = "pty"

    def __init__(self, *, history: int = HISTORY_LINES) -> None:
        self.history = history
        self._panes: dict[str, _Pane] = {}
        self._guard = threading.Lock()
        self._ids = itertools.count(1)

    # -- spawn -----------------------------------------------------------------------------

    def spawn(self, spec: PaneSpec) -> PaneHandle:
        cwd, program = preflight(spec)
        env = dict(spec.env)
        env.setdefault("TERM", DEFAULT_TERM)
        argv = [str(program), *spec.argv[1:]]
        try:
            proc = PtyProcess.spawn(
                argv, cwd=str(cwd), env=env, dimensions=(spec.height, spec.width)
            )
        except (OSError, PtyProcessError) as exc:
            raise PaneError(f"cannot start a pane for session {spec.session_id!r}: {exc}") from exc
        proc.delayafterclose = 0.0
        proc.delayafterterminate = 0.0
        try:
            screen = _Screen(spec.width, spec.height, self.history)
            pane = _Pane(
                id=f"pty-{next(self._ids)}",
                owner=spec.owner,
                proc=proc,
                screen=screen,
                stream=pyte.ByteStream(screen),
                command=os.path.basename(spec.argv[0]),
                activity=time.time(),
            )
            screen.reply = lambda data: self._reply(pane, data)
            pane.thread = threading.Thread(
                target=self._read_loop, args=(pane,), name=f"corral-{pane.id}", daemon=True
            )
            with self._guard:
                self._panes[pane.id] = pane
            pane.thread.start()
        except BaseException:
            stop_session(int(proc.pid), 0.2, reap=lambda: _quiet_isalive(proc))
            with swallowed(log, "closing a pty that failed to start"):
                proc.close(force=True)
            raise
        return PaneHandle("pty", pane.id, spec.owner, pane.pid)

    def _read_loop(self, pane: _Pane) -> None:
        fd = pane.fd
        while True:
            try:
                data = os.read(fd, 65536)
            except OSError:  # EIO: every process holding the terminal is gone
                break
            if not data:
                break
            with pane.lock:
                try:
                    pane.stream.feed(data)
                except Exception:  # a confused emulator must not kill the reader
                    log.exception("pty %s: the terminal emulator failed on output", pane.id)
                pane.activity = time.time()
        pause = 0.01
        while not pane.closed and not self._reap(pane):
            time.sleep(pause)  # the program closed its terminal; wait for it to end
            pause = min(pause * 2, 0.5)

    def _reap(self, pane: _Pane) -> bool:
        """Collect the exit status if the program ended; True once it has."""
        with pane.proc_lock:
            if not pane.alive:
                return True
            try:
                running = pane.proc.isalive()
            except PtyProcessError:  # someone else reaped it
                running = False
            if running:
                return False
            proc = pane.proc
            if proc.signalstatus is not None:
                pane.exit_status = 128 + int(proc.signalstatus)
            elif proc.exitstatus is not None:
                pane.exit_status = int(proc.exitstatus)
            pane.alive = False
            return True

    # -- helpers ---------------------------------------------------------------------------

    def _pane(self, handle: PaneHandle) -> _Pane:
        with self._guard:
            pane = self._panes.get(handle.pane_id)
        if pane is None or pane.owner != handle.owner or handle.backend != "pty":
            raise PaneGone(f"pane {handle.pane_id} is gone or no longer belongs to {handle.owner}")
        return pane

    def _live(self, handle: PaneHandle) -> _Pane:
        pane = self._pane(handle)
        self._reap(pane)
        if not pane.alive:
            raise PaneGone(f"the program in pane {handle.pane_id} has exited")
        return pane

    def _write(self, pane: _Pane, data: bytes, timeout: float = WRITE_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        view = memoryview(data)
        while view:
            left = deadline - time.monotonic()
            if left <= 0:
                raise PaneError(f"pane {pane.id} does not read its input")
            try:
                _, writable, _ = select.select([], [pane.fd], [], left)
                if not writable:
                    continue
                n = os.write(pane.fd, view[:WRITE_CHUNK])
            except OSError as exc:
                raise PaneGone(f"pane {pane.id} is gone ({exc})") from exc
            view = view[n:]

    def _reply(self, pane: _Pane, data: bytes) -> None:
        """Answer a terminal query (cursor position, device attributes)."""
        with contextlib.suppress(PaneError):
            self._write(pane, data, timeout=0.5)

    def _render(self, pane: _Pane) -> Screen:
        with pane.lock:
            screen = pane.screen
            rows, cols = screen.lines, screen.columns
            if len(pane.rendered) != rows:
                pane.rendered = [("", "")] * rows
                screen.dirty.update(range(rows))
            for y in screen.dirty:
                if 0 <= y < rows:
                    pane.rendered[y] = render_line(screen.buffer[y], cols)
            screen.dirty.clear()
            return Screen(
                lines=[p for p, _ in pane.rendered],
                ansi=[a for _, a in pane.rendered],
                cursor_x=min(screen.cursor.x, cols - 1),
                cursor_y=min(screen.cursor.y, rows - 1),
                width=cols,
                height=rows,
            )

    # -- looking ---------------------------------------------------------------------------

    def sweep(self) -> dict[str, PaneInfo]:
        with self._guard:
            panes = list(self._panes.values())
        infos: dict[str, PaneInfo] = {}
        for pane in panes:
            self._reap(pane)
            if pane.alive:
                with contextlib.suppress(OSError):
                    name = process_name(os.tcgetpgrp(pane.fd))
                    if name:
                        pane.command = name
            infos[pane.owner] = PaneInfo(
                handle=PaneHandle("pty", pane.id, pane.owner, pane.pid),
                alive=pane.alive,
                current_command=pane.command,
                exit_status=pane.exit_status,
                activity=pane.activity,
                width=pane.screen.columns,
                height=pane.screen.lines,
            )
        return infos

    def capture(self, handles: list[PaneHandle]) -> dict[str, Screen]:
        out: dict[str, Screen] = {}
        for handle in handles:
            try:
                pane = self._pane(handle)
            except PaneGone:
                continue
            out[handle.owner] = self._render(pane)
        return out

    def scrollback(self, handle: PaneHandle, lines: int = 2000) -> list[str]:
        pane = self._pane(handle)
        screen = self._render(pane)
        with pane.lock:
            history = list(pane.screen.history)
        keep = max(0, lines)
        out = (history[-keep:] if keep else []) + screen.ansi
        while out and not out[-1].strip():
            out.pop()
        return out

    # -- acting ----------------------------------------------------------------------------

    def send_text(
        self, handle: PaneHandle, text: str, *, enter: bool = True, confirm_timeout: float = 5.0
    ) -> None:
        """Bracketed paste (when the program turned it on), wait until the
        text shows on screen, then Enter; never Enter after an unseen paste."""
        pane = self._pane(handle)
        with pane.input_lock:
            self._live(handle)
            before = self._render(pane)
            clean = text.replace(PASTE_START, "").replace(PASTE_END, "")
            if clean.strip():
                body = clean.replace("\r\n", "\r").replace("\n", "\r")
                with pane.lock:
                    bracketed = BRACKETED_PASTE in pane.screen.mode
                data = PASTE_START + body + PASTE_END if bracketed else body
                self._write(pane, data.encode("utf-8"))

                def grab() -> Screen:
                    return self._render(self._live(handle))

                if wait_landed(clean, before, grab, confirm_timeout) is None:
                    raise PaneError(
                        f"the pasted text did not show up in pane {pane.id} within "
                        f"{confirm_timeout:g} s, so Enter was not pressed"
                    )
            if enter:
                self._write(self._live(handle), b"\r")

    def send_keys(self, handle: PaneHandle, keys: list[str]) -> None:
        pane = self._pane(handle)
        with pane.input_lock:
            self._live(handle)
            with pane.lock:
                app_cursor = APP_CURSOR in pane.screen.mode
            data = "".join(key_bytes(k, app_cursor) for k in keys)
            if data:
                self._write(pane, data.encode("utf-8"))

    def resize(self, handle: PaneHandle, width: int, height: int) -> None:
        for n in (width, height):
            if not isinstance(n, int) or not 1 <= n <= MAX_PANE_SIZE:
                raise PaneError(f"pane size {width}x{height} is out of range")
        pane = self._live(handle)
        with pane.lock:
            pane.screen.resize(height, width)
            pane.screen.dirty.update(range(height))
        with contextlib.suppress(OSError):
            pane.proc.setwinsize(height, width)

    def kill(self, handle: PaneHandle, timeout: float = 5.0) -> None:
        """SIGTERM the pane's session, SIGKILL at the deadline, then close the
        pty. A pane that is gone is fine; another owner's raises PaneGone."""
        with self._guard:
            pane = self._panes.get(handle.pane_id)
        if pane is None:
            return
        if pane.owner != handle.owner:
            raise PaneGone(f"pane {handle.pane_id} belongs to {pane.owner}; not killing it")
        stop_session(pane.pid, timeout, reap=lambda: self._reap(pane), kill_grace=KILL_GRACE)
        self._close(pane)

    def _close(self, pane: _Pane) -> None:
        self._reap(pane)
        pane.closed = True
        if pane.thread is not None:
            pane.thread.join(0.3)
        with pane.proc_lock, swallowed(log, "closing a pty pane"):
            pane.proc.close(force=True)
        with self._guard:
            self._panes.pop(pane.id, None)

    def attach_argv(self, handle: PaneHandle) -> list[str] | None:
        return None

    def close(self) -> None:
        """Stop every pane: they cannot outlive this process anyway."""
        with self._guard:
            panes = list(self._panes.values())
        deadline = time.monotonic() + CLOSE_TIMEOUT
        for pane in panes:  # all of them get SIGTERM first, then share the deadline
            signal_session(pane.pid, signal.SIGTERM)
        for pane in panes:
            left = max(0.0, deadline - time.monotonic())
            stop_session(
                pane.pid, left, reap=functools.partial(self._reap, pane), kill_grace=KILL_GRACE
            )
            self._close(pane)


def _quiet_isalive(proc: PtyProcess) -> None:
    with swallowed(log, "reaping a pty's process"):
        proc.isalive()
