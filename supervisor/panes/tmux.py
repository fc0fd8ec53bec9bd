"""The tmux pane backend: one window per agent session on a private tmux server.

- The server is ours alone: `tmux -L corral` (socket in tmux's own 0700 dir),
  or `-S <socket_dir>/<name>` with socket_dir created 0700. It starts with
  `-f /dev/null` (no user config) and from a minimal client environment.
- A pane runs `env -i KEY=VAL… argv`: its environment is exactly the spec's
  (plus TERM when the spec has none), never the server's global environment.
- Every pane carries its owner in the pane user option `@corral_owner`. A new
  `TmuxBackend` on the same socket finds panes an earlier one created through
  `sweep()` (re-adoption after a restart).
- Side effects are guarded inside tmux itself: `if-shell -F` compares the
  marker with the expected owner and only then pastes, presses keys, resizes
  or closes the window, so the check and the act cannot be separated by
  another command. kill() checks the marker just before it signals the
  pane's processes (signals do not go through tmux).
- Batching: libtmux costs one subprocess per call, which is exactly the naive
  per-pane cost the budgets rule out, so this module drives tmux directly:
  the sweep is one `list-panes -a`, the capture of any number of panes is one
  `source-file -` fed on stdin (no argv length limit), and each other
  operation is one `;`-chained invocation.
- `remain-on-exit on`: a pane whose program exited keeps its last screen and
  exit status (`alive=False`) until it is killed.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import subprocess
import threading
import time
from pathlib import Path

from .base import PaneError, PaneGone, PaneHandle, PaneInfo, PaneSpec, Screen
from .sweep import MAX_PANE_SIZE, preflight, stop_session, wait_landed

OWNER_OPTION = "@corral_owner"
# Lines of history tmux keeps per pane: what corral reads back (the console's
# history view, `agent_scrollback`, reads 2,000; a one-shot's tail 500) and
# no more. At 20,000 a streaming pane's history grew to ~10 MB of the tmux
# server (20 panes of 25,000 lines: 208 MB against 30 MB at 2,000), and
# capturing the visible screen costs the same either way. An agent's whole
# conversation is in its own transcript, not in tmux.
HISTORY_LIMIT = 2_000
SEP = "\x1f"  # field separator in tmux formats: never in a pane id, number or owner
RECENT = 2.0  # tmux keeps activity in whole seconds; see sweep()
KILL_GRACE = 0.5
SMALL_BATCH = 8  # up to this many panes, a header per capture beats one list-panes -a
TMUX_TIMEOUT = 10.0

_PANE_ID = re.compile(r"%\d+")
_NAME = re.compile(r"[A-Za-z0-9_.-]+")
_SOCKET_PATH_MAX = 100  # sun_path is 108 bytes on Linux, 104 on the BSDs

_SWEEP_FIELDS = (
    "pane_id",
    "pane_pid",
    "pane_dead",
    "pane_dead_status",
    "pane_dead_signal",
    "window_activity",
    "pane_width",
    "pane_height",
    OWNER_OPTION,
    "pane_current_command",  # last: the only field that may hold anything
)
SWEEP_FORMAT = SEP.join(f"#{{{f}}}" for f in _SWEEP_FIELDS)
_HEADER_FIELDS = (
    "pane_id",
    "pane_pid",
    "pane_dead",
    "cursor_x",
    "cursor_y",
    "pane_width",
    "pane_height",
    OWNER_OPTION,  # last
)
_HEADER_FORMAT = SEP.join(f"#{{{f}}}" for f in _HEADER_FIELDS)

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
_SGR = re.compile(r"\x1b\[([0-9;:]*)m")

_TERMINFO_DIRS = ("/usr/share/terminfo", "/lib/terminfo", "/etc/terminfo", "/usr/lib/terminfo")


class TmuxFailed(PaneError):
    """tmux itself reported an error."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    @property
    def no_server(self) -> bool:
        m = self.message
        return "no server running" in m or "error connecting to" in m or "exited unexpectedly" in m

    @property
    def no_session(self) -> bool:
        """No session to look in: also when the server is up with none left
        (between its last window closing and its exit, tmux says "no current
        target" to `list-panes -a`)."""
        m = self.message
        return "can't find session" in m or "no such session" in m or "no current target" in m


# -- quoting -------------------------------------------------------------------------


def _arg(value: str) -> str:
    """An argv word for tmux: a trailing ';' would end the command, so escape it."""
    return value[:-1] + "\\;" if value.endswith(";") else value


def _chain(*commands: list[str]) -> list[str]:
    argv: list[str] = []
    for i, command in enumerate(commands):
        if i:
            argv.append(";")
        argv.extend(_arg(a) for a in command)
    return argv


def _fmt_literal(value: str) -> str:
    """`value` as literal text inside a tmux format (e.g. a `#{==:…}` operand)."""
    return value.replace("#", "##").replace(",", "#,").replace("}", "#}")


def _cmd_word(value: str) -> str:
    """`value` as one word of a tmux command string (for if-shell's commands)."""
    if any(ord(c) < 32 for c in value):
        raise PaneError(f"{value!r} contains control characters")
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$") + '"'


def _guard(owner: str) -> str:
    return f"#{{==:#{{{OWNER_OPTION}}},{_fmt_literal(owner)}}}"


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text) if "\x1b" in text else text


# -- ANSI lines that stand alone -----------------------------------------------------

_ATTR_OFF = {
    22: ("a1", "a2"),
    23: ("a3",),
    24: ("a4", "a21"),
    25: ("a5", "a6"),
    27: ("a7",),
    28: ("a8",),
    29: ("a9",),
    55: ("a53",),
}
_EXTENDED = {38: "fg", 48: "bg", 58: "ul"}


def _apply_sgr(state: dict[str, str], params: str) -> None:
    parts = params.split(";") if params else ["0"]
    i = 0
    while i < len(parts):
        p = parts[i] or "0"
        i += 1
        if ":" in p:  # sub-parameters: 4:3 (curly underline), 38:2::r:g:b …
            head = p.split(":", 1)[0]
            state[_EXTENDED.get(int(head or 0), "a" + head)] = p
            continue
        n = int(p)
        if n == 0:
            state.clear()
        elif n in _EXTENDED:
            take = 2 if parts[i : i + 1] == ["5"] else 4 if parts[i : i + 1] == ["2"] else 0
            state[_EXTENDED[n]] = ";".join([p, *parts[i : i + take]])
            i += take
        elif 30 <= n <= 37 or 90 <= n <= 97:
            state["fg"] = p
        elif 40 <= n <= 47 or 100 <= n <= 107:
            state["bg"] = p
        elif n == 39:
            state.pop("fg", None)
        elif n == 49:
            state.pop("bg", None)
        elif n == 59:
            state.pop("ul", None)
        elif n in _ATTR_OFF:
            for key in _ATTR_OFF[n]:
                state.pop(key, None)
        else:
            state[f"a{n}"] = p


def _sgr(state: dict[str, str]) -> str:
    return "\x1b[" + ";".join(state.values()) + "m" if state else ""


def standalone_ansi(lines: list[str]) -> list[str]:
    """tmux's `capture-pane -e` carries styles from one line into the next;
    make every line render correctly on its own: open it with the style in
    force and close it with a reset when a style is still on."""
    state: dict[str, str] = {}
    out: list[str] = []
    for line in lines:
        if not state and "\x1b" not in line:
            out.append(line)
            continue
        opening = _sgr(state)
        for m in _SGR.finditer(line):
            _apply_sgr(state, m.group(1))
        out.append(opening + line + ("\x1b[0m" if state else ""))
    return out


def _default_term() -> str:
    for name in ("tmux-256color", "screen-256color"):
        for base in _TERMINFO_DIRS:
            if os.path.exists(os.path.join(base, name[0], name)):
                return name
    return "screen"


def _client_env() -> dict[str, str]:
    """The environment of our tmux clients, and so of a server one of them
    starts: enough to work, nothing credential-shaped."""
    keep = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR")
    env = {k: os.environ[k] for k in (*keep, "TMUX_TMPDIR") if os.environ.get(k)}
    if not any(env.get(k) for k in ("LC_ALL", "LC_CTYPE", "LANG")):
        env["LANG"] = "C.UTF-8"
    return env


# -- the backend ---------------------------------------------------------------------


def _unreaped(pid: int | None) -> tuple[bool, int | None]:
    """(alive, exit status) of a pane program tmux reports no status for.

    A zombie has exited: Linux keeps its wait status in /proc/<pid>/stat
    (field 52), readable by anyone who can see the process. A pid that is
    gone was reaped by tmux a moment ago: the next sweep carries its status.
    Anything else still runs."""
    if pid is None or pid <= 1:
        return True, None
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True, None
    return unreaped_from_stat(stat)


def unreaped_from_stat(stat: str) -> tuple[bool, int | None]:
    """(alive, exit status) from a pane program's `/proc/<pid>/stat` line
    (read here, or on the pane's host): a zombie's wait status is field 52."""
    fields = stat.rsplit(")", 1)[-1].split()  # after "pid (comm)"
    if not fields or fields[0] != "Z":
        return True, None
    raw = fields[49] if len(fields) > 49 else ""  # field 52 of the whole line
    if not raw.isdigit():
        return False, None
    status = int(raw)
    if os.WIFSIGNALED(status):
        return False, 128 + os.WTERMSIG(status)
    return False, os.WEXITSTATUS(status)


class TmuxBackend:
    """Agent panes as windows of one session on a private tmux server."""

    name = "tmux"

    def __init__(
        self,
        socket_name: str = "corral",
        socket_dir: Path | None = None,
        tmux_session: str = "corral",
        *,
        history_limit: int = HISTORY_LIMIT,
        tmux_bin: str | None = None,
        socket_path: Path | None = None,
    ) -> None:
        if not _NAME.fullmatch(socket_name):
            raise PaneError(f"tmux socket name {socket_name!r} must be letters, digits, . _ -")
        if not _NAME.fullmatch(tmux_session) or "." in tmux_session:
            raise PaneError(f"tmux session name {tmux_session!r} must be letters, digits, _ -")
        binary = tmux_bin or shutil.which("tmux")
        if binary is None:
            raise PaneError(
                "tmux is not installed: install tmux 3.2 or later, or use the pty backend"
            )
        env_bin = shutil.which("env") or "/usr/bin/env"
        self.socket_name = socket_name
        self.session = tmux_session
        self.history_limit = history_limit
        self.tmux_bin = binary
        self._env_bin = env_bin
        self.socket_path: Path | None = None
        if socket_path is not None:  # a server someone else started (adoption)
            self.socket_path = Path(socket_path)
            where = ["-S", str(self.socket_path)]
        elif socket_dir is not None:
            socket_dir = Path(socket_dir).absolute()
            socket_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            os.chmod(socket_dir, 0o700)
            self.socket_path = socket_dir / socket_name
            if len(os.fsencode(self.socket_path)) > _SOCKET_PATH_MAX:
                raise PaneError(
                    f"tmux socket path {self.socket_path} is too long for a unix socket; "
                    "choose a shorter socket directory"
                )
            where = ["-S", str(self.socket_path)]
        else:
            where = ["-L", socket_name]
        self._where = where
        self._base = [binary, "-f", "/dev/null", "-u", *where]
        self._env = _client_env()
        self._term = _default_term()
        self._spawn_lock = threading.Lock()
        self._locks_guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}

    # -- running tmux ------------------------------------------------------------------

    def _run(self, argv: list[str], *, input: bytes | None = None) -> str:
        try:
            proc = subprocess.run(
                [*self._base, *argv],
                input=input,
                stdin=None if input is not None else subprocess.DEVNULL,
                capture_output=True,
                env=self._env,
                timeout=TMUX_TIMEOUT,
                check=False,
            )
        except FileNotFoundError as exc:
            raise PaneError(f"tmux could not be run ({exc})") from exc
        except subprocess.TimeoutExpired as exc:
            raise PaneError(f"tmux did not answer within {TMUX_TIMEOUT:.0f} s") from exc
        if proc.returncode != 0:
            message = proc.stderr.decode("utf-8", "replace").strip()
            raise TmuxFailed(message or f"tmux exited with status {proc.returncode}")
        return proc.stdout.decode("utf-8", "replace")

    def _run_quiet(self, argv: list[str]) -> None:
        with contextlib.suppress(PaneError):
            self._run(argv)

    def _guarded(
        self,
        handle: PaneHandle,
        command: str,
        *,
        before: list[str] | None = None,
        input: bytes | None = None,
    ) -> str:
        """Run the tmux command string `command` only if the pane still
        carries `handle.owner` (checked inside tmux, in the same invocation);
        raise PaneGone otherwise. `before` runs first, unconditionally."""
        nonce = secrets.token_hex(8)
        check = _guard(handle.owner)
        miss = f"display-message -p {nonce}"
        guarded = ["if-shell", "-F", "-t", handle.pane_id, check, command, miss]
        argv = _chain(before, guarded) if before else _chain(guarded)
        try:
            out = self._run(argv, input=input)
        except TmuxFailed as exc:
            if exc.no_server:
                raise PaneGone(f"pane {handle.pane_id} is gone: no tmux server is running") from exc
            if exc.no_session or "can't find" in exc.message:
                raise PaneGone(f"pane {handle.pane_id} is gone") from exc
            raise PaneError(f"tmux failed on pane {handle.pane_id}: {exc.message}") from exc
        if nonce in out:
            raise PaneGone(f"pane {handle.pane_id} is gone or no longer belongs to {handle.owner}")
        return out

    def _lock(self, pane_id: str) -> threading.Lock:
        with self._locks_guard:
            return self._locks.setdefault(pane_id, threading.Lock())

    @staticmethod
    def _check_handle(handle: PaneHandle) -> None:
        if handle.backend != "tmux" or not _PANE_ID.fullmatch(handle.pane_id):
            raise PaneError(f"{handle.pane_id!r} is not a tmux pane id")

    # -- spawn --------------------------------------------------------------------------

    def _server_options(self) -> list[list[str]]:
        return [
            ["set-option", "-g", "history-limit", str(self.history_limit)],
            ["set-option", "-wg", "remain-on-exit", "on"],
            ["set-option", "-s", "escape-time", "10"],
        ]

    def _preflight(self, spec: PaneSpec) -> tuple[Path, Path]:
        """The working directory and the program, checked where the pane will run."""
        return preflight(spec)

    def _stop_processes(self, pid: int, timeout: float) -> None:
        """SIGTERM the pane's terminal session, SIGKILL what is left at the deadline."""
        if pid > 1 and pid != os.getpid():
            stop_session(pid, timeout, kill_grace=KILL_GRACE)

    def _unreaped(self, pid: int | None) -> tuple[bool, int | None]:
        return _unreaped(pid)

    def spawn(self, spec: PaneSpec) -> PaneHandle:
        cwd, program = self._preflight(spec)
        env = dict(spec.env)
        env.setdefault("TERM", self._term)
        argv = list(spec.argv)
        if "=" in argv[0]:  # env would take it for an assignment
            argv[0] = str(program)
        command = [self._env_bin, "-i", "--", *(f"{k}={v}" for k, v in env.items()), *argv]
        fmt = f"#{{pane_id}}{SEP}#{{pane_pid}}"
        name = spec.name.replace("#", "##")
        where = str(cwd).replace("#", "##")
        width, height = str(spec.width), str(spec.height)
        new_window = ["new-window", "-d", "-P", "-F", fmt, "-t", f"{self.session}:"]
        new_window += ["-n", name, "-c", where, "--", *command]
        new_session = ["new-session", "-d", "-s", self.session, "-x", width, "-y", height]
        new_session += ["-P", "-F", fmt, "-n", name, "-c", where, "--", *command]
        who = f"cannot start a pane for session {spec.session_id!r}"
        with self._spawn_lock:
            size = ["set-option", "-t", self.session, "default-size", f"{width}x{height}"]
            try:
                out = self._run(_chain(*self._server_options(), size, new_window))
            except TmuxFailed as exc:
                if not (exc.no_server or exc.no_session):
                    raise PaneError(f"{who}: tmux refused the new window: {exc.message}") from exc
                try:
                    out = self._run(_chain(*self._server_options(), new_session))
                except TmuxFailed as exc2:
                    raise PaneError(f"{who}: tmux could not start: {exc2.message}") from exc2
            first = out.strip().splitlines()[0] if out.strip() else ""
            pane_id, _, pid_text = first.partition(SEP)
            if not _PANE_ID.fullmatch(pane_id) or not pid_text.isdigit():
                raise PaneError(f"{who}: tmux answered {out.strip()!r} instead of a pane id")
            pid = int(pid_text)
            try:
                self._run(
                    _chain(
                        ["set-option", "-p", "-t", pane_id, "--", OWNER_OPTION, spec.owner],
                        ["resize-window", "-t", pane_id, "-x", width, "-y", height],
                    )
                )
            except PaneError as exc:
                self._discard(pane_id, pid)
                raise PaneError(
                    f"{who}: the new pane could not be set up ({exc}); removed it"
                ) from exc
        return PaneHandle("tmux", pane_id, spec.owner, pid)

    def _discard(self, pane_id: str, pid: int) -> None:
        """Roll back a half-made pane (it carries no owner yet)."""
        if pid > 1 and pid != os.getpid():
            stop_session(pid, 0.5, kill_grace=0.3)
        self._run_quiet(["kill-window", "-t", pane_id])

    # -- looking --------------------------------------------------------------------------

    def sweep(self) -> dict[str, PaneInfo]:
        """Every pane carrying an owner marker, in one `list-panes -a`.

        A pane whose program exited is `alive=False` with its exit status
        (128 + signal number for a signal). tmux notices the closed terminal
        a moment before the exit status; until the status is known the pane
        counts as alive, so the first dead report always carries it.

        tmux records activity in whole seconds, so output late in a second
        looks like output early in it. A pane with output in the last
        RECENT seconds therefore reports the sweep time as its activity: a
        consumer that captures when activity changes keeps capturing until
        the output has surely stopped, and never misses the last of it."""
        now = time.time()
        try:
            out = self._run(["list-panes", "-a", "-F", SWEEP_FORMAT])
        except TmuxFailed as exc:
            if exc.no_server or exc.no_session:
                return {}
            raise
        return self._parse_sweep(out, now)

    def _parse_sweep(self, out: str, now: float, skew: float = 0.0) -> dict[str, PaneInfo]:
        """Rows of `list-panes -a -F SWEEP_FORMAT` as PaneInfo by owner; `skew`
        is added to tmux's clock (a remote host's clock against ours)."""
        infos: dict[str, PaneInfo] = {}
        for row in out.split("\n"):
            fields = row.split(SEP, len(_SWEEP_FIELDS) - 1)
            if len(fields) != len(_SWEEP_FIELDS):
                continue
            pane_id, pid, dead, status, sig, activity, width, height, owner, command = fields
            if not owner or not _PANE_ID.fullmatch(pane_id):
                continue
            exit_status = None
            if status.isdigit():
                exit_status = int(status)
            elif sig.isdigit():
                exit_status = 128 + int(sig)
            alive = dead != "1"
            if not alive and exit_status is None:
                # a closed terminal without an exit status: tmux has not reaped
                # the program yet, has lost its SIGCHLD (seen under load: two
                # panes exiting together leave one a zombie tmux never reaps),
                # or the program runs on without its terminal
                alive, exit_status = self._unreaped(int(pid) if pid.isdigit() else None)
            act = float(activity) + skew if activity.isdigit() else 0.0
            if alive and now < act + RECENT:
                act = now
            infos[owner] = PaneInfo(
                handle=PaneHandle("tmux", pane_id, owner, int(pid) if pid.isdigit() else None),
                alive=alive,
                current_command=command,
                exit_status=exit_status,
                activity=act,
                width=int(width) if width.isdigit() else 0,
                height=int(height) if height.isdigit() else 0,
            )
        return infos

    def _capture_raw(
        self, handles: list[PaneHandle], history: int | None = None
    ) -> dict[str, tuple[Screen, bool]]:
        """{owner: (screen, dead)} for the handles still carrying their owner,
        all in one tmux invocation (plus one retry when a pane vanished)."""
        for handle in handles:
            self._check_handle(handle)
        for attempt in range(2):
            if not handles:
                return {}
            try:
                return self._capture_script(handles, history, listed=len(handles) > SMALL_BATCH)
            except TmuxFailed as exc:
                if exc.no_server or exc.no_session:
                    return {}  # the server is gone or has no pane left: nothing to capture
                if attempt or "can't find" not in exc.message:
                    raise
            # a pane is gone, which stops a `;` chain: capture the others
            try:
                present = set(self._run(["list-panes", "-a", "-F", "#{pane_id}"]).split())
            except TmuxFailed:
                return {}
            handles = [h for h in handles if h.pane_id in present]
        return {}

    def _capture_script(
        self, handles: list[PaneHandle], history: int | None, *, listed: bool
    ) -> dict[str, tuple[Screen, bool]]:
        """One `source-file -` run. `listed`: one `list-panes -a` gives every
        header, the captures follow and are split by pane height (cheapest
        for many panes); otherwise a `display-message` header precedes each
        capture. Pane ids are checked (%<digits>), so they quote safely."""
        nonce = secrets.token_hex(8)
        head = f"'{nonce}{SEP}{_HEADER_FORMAT}'"
        extra = f" -S -{int(history)}" if history is not None else ""
        listed = listed and history is None
        script = [f"list-panes -a -F {head}"] if listed else []
        for h in handles:
            if not listed:
                script.append(f"display-message -p -t '{h.pane_id}' {head}")
            script.append(f"capture-pane -p -e{extra} -t '{h.pane_id}'")
        out = self._run(["source-file", "-"], input=("\n".join(script) + "\n").encode())
        if out.endswith("\n"):
            out = out[:-1]
        lines = out.split("\n")
        mark = nonce + SEP
        sections: list[tuple[list[str], list[str]]] = []
        if listed:
            headers: dict[str, list[str]] = {}
            i = 0
            while i < len(lines) and lines[i].startswith(mark):
                header = lines[i].split(SEP, len(_HEADER_FIELDS))
                headers[header[1]] = header
                i += 1
            for h in handles:
                header = headers.get(h.pane_id, [])
                rows = header[7] if len(header) > 7 else ""
                if not rows.isdigit():
                    break
                sections.append((header, lines[i : i + int(rows)]))
                i += int(rows)
            if len(sections) != len(handles) or i != len(lines):
                # the output does not add up (it always should): use delimiters
                return self._capture_script(handles, history, listed=False)
        else:
            for line in lines:
                if line.startswith(mark):
                    sections.append((line.split(SEP, len(_HEADER_FIELDS)), []))
                elif sections:
                    sections[-1][1].append(line)
        result: dict[str, tuple[Screen, bool]] = {}
        for handle, (header, body) in zip(handles, sections, strict=False):
            if len(header) != len(_HEADER_FIELDS) + 1:
                continue
            _, pane_id, _pid, dead, cx, cy, width, height, owner = header
            if pane_id != handle.pane_id or owner != handle.owner:
                continue
            screen = Screen(
                lines=[strip_ansi(line) for line in body],
                ansi=standalone_ansi(body),
                cursor_x=int(cx) if cx.isdigit() else 0,
                cursor_y=int(cy) if cy.isdigit() else 0,
                width=int(width) if width.isdigit() else 0,
                height=int(height) if height.isdigit() else 0,
            )
            result[owner] = (screen, dead == "1")
        return result

    def capture(self, handles: list[PaneHandle]) -> dict[str, Screen]:
        """Screens by owner, one tmux invocation for all; panes that are gone
        or carry another owner are left out."""
        return {owner: s for owner, (s, _dead) in self._capture_raw(handles).items()}

    def scrollback(self, handle: PaneHandle, lines: int = 2000) -> list[str]:
        got = self._capture_raw([handle], history=max(0, lines))
        if handle.owner not in got:
            raise PaneGone(f"pane {handle.pane_id} is gone or no longer belongs to {handle.owner}")
        out = list(got[handle.owner][0].ansi)
        while out and not strip_ansi(out[-1]).strip():
            out.pop()
        return out

    def _grab(self, handle: PaneHandle) -> Screen:
        got = self._capture_raw([handle])
        if handle.owner not in got:
            raise PaneGone(f"pane {handle.pane_id} is gone or no longer belongs to {handle.owner}")
        screen, dead = got[handle.owner]
        if dead:
            raise PaneGone(f"the program in pane {handle.pane_id} has exited")
        return screen

    # -- acting ----------------------------------------------------------------------------

    def send_text(
        self, handle: PaneHandle, text: str, *, enter: bool = True, confirm_timeout: float = 5.0
    ) -> None:
        """Paste `text` as one bracketed paste (if the application asked for
        bracketed paste), wait until it shows on screen, then press Enter.
        Never presses Enter for a paste that did not show."""
        self._check_handle(handle)
        pane = handle.pane_id
        # the paste must not be able to end its own brackets
        text = text.replace("\x1b[200~", "").replace("\x1b[201~", "")
        with self._lock(pane):
            before = self._grab(handle)
            if text.strip():
                buf = f"corral-{secrets.token_hex(6)}"
                load = ["load-buffer", "-b", buf, "-"]
                paste = f"paste-buffer -p -d -b {buf} -t {pane}"
                try:
                    self._guarded(handle, paste, before=load, input=text.encode("utf-8"))
                finally:
                    self._run_quiet(["delete-buffer", "-b", buf])  # normally gone already (-d)
                landed = wait_landed(text, before, lambda: self._grab(handle), confirm_timeout)
                if landed is None:
                    raise PaneError(
                        f"the pasted text did not show up in pane {pane} within "
                        f"{confirm_timeout:g} s, so Enter was not pressed"
                    )
            if enter:
                self._guarded(handle, f"send-keys -t {pane} Enter")

    def send_keys(self, handle: PaneHandle, keys: list[str]) -> None:
        """Press named keys (tmux names: "Enter", "Escape", "Down", "1", "C-c")."""
        self._check_handle(handle)
        if not keys:
            return
        words = " ".join(_cmd_word(k) for k in keys)
        with self._lock(handle.pane_id):
            self._guarded(handle, f"send-keys -t {handle.pane_id} -- {words}")

    def resize(self, handle: PaneHandle, width: int, height: int) -> None:
        self._check_handle(handle)
        for n in (width, height):
            if not isinstance(n, int) or not 1 <= n <= MAX_PANE_SIZE:
                raise PaneError(f"pane size {width}x{height} is out of range")
        self._guarded(handle, f"resize-window -t {handle.pane_id} -x {width} -y {height}")

    def kill(self, handle: PaneHandle, timeout: float = 5.0) -> None:
        """SIGTERM the pane's processes (its whole terminal session), SIGKILL
        what is left at the deadline, then close the window. A pane that is
        gone is fine; a pane that now carries another owner raises PaneGone."""
        self._check_handle(handle)
        deadline = time.monotonic() + max(0.0, timeout)
        fmt = f"#{{pane_id}}{SEP}#{{pane_pid}}{SEP}#{{{OWNER_OPTION}}}"
        try:
            out = self._run(["display-message", "-p", "-t", handle.pane_id, fmt]).rstrip("\n")
        except TmuxFailed as exc:
            if exc.no_server or exc.no_session or "can't find" in exc.message:
                return
            raise
        pane_id, pid_text, owner = [*out.split(SEP, 2), "", ""][:3]
        if pane_id != handle.pane_id:
            return  # gone
        if owner != handle.owner:
            raise PaneGone(
                f"pane {handle.pane_id} now belongs to {owner or 'nobody'}; not killing it"
            )
        pid = int(pid_text) if pid_text.isdigit() else handle.pid or 0
        self._stop_processes(pid, deadline - time.monotonic())
        with contextlib.suppress(PaneGone):
            self._guarded(handle, f"kill-window -t {handle.pane_id}")
        with self._locks_guard:
            self._locks.pop(handle.pane_id, None)

    def attach_server_argv(self) -> list[str]:
        """The command that attaches a terminal to corral's whole tmux server."""
        return [self.tmux_bin, *self._where, "attach"]

    def attach_argv(self, handle: PaneHandle) -> list[str] | None:
        self._check_handle(handle)
        return [self.tmux_bin, *self._where, "attach-session", "-t", handle.pane_id]

    def close(self) -> None:
        """Nothing to release: the panes keep running under the tmux server."""
        with self._locks_guard:
            self._locks.clear()

    # -- the server ---------------------------------------------------------------------

    def server_running(self) -> bool:
        try:
            self._run(["list-sessions", "-F", "#{session_id}"])
        except TmuxFailed:
            return False
        return True

    def server_pid(self) -> int | None:
        try:
            out = self._run(["display-message", "-p", "#{pid}"]).strip()
        except TmuxFailed:
            return None
        return int(out) if out.isdigit() else None

    def kill_server(self) -> None:
        """Stop the private server and every pane on it (tests, benchmarks)."""
        self._run_quiet(["kill-server"])
