"""The tmux pane backend on another host, over its one SSH connection.

Everything `tmux.py` does (owner markers, guarded side effects, batched
captures) happens on a private tmux server on the host (`-S <remote state
dir>/tmux/<name>`), each tmux invocation riding the host's multiplexed
connection. What differs:

- the sweep is ONE ssh round trip per tick: a small sh script lists every
  pane and, in the same run, captures the panes whose activity changed since
  the last sweep (or is recent: tmux keeps whole seconds), the host's clock
  included so activity reads on ours. `capture()` then serves those screens
  without asking again; only panes the sweep did not capture cost a call.
- files the supervisor watches (an agent's hooks file) are mirrored in the
  same round trip: the sweep brings the new complete lines of each remote
  file and appends them to the local copy, which is watched as before.
- processes are signalled on the host (a remote `kill` of the pane's
  process group), the working directory and the program are checked there.
- a host that cannot be reached raises `HostDown` (a PaneError): the pane is
  not known to be gone, so callers must not read it as an exit.
"""

from __future__ import annotations

import secrets
import shlex
import threading
import time
from pathlib import Path

from ..panes.base import HostDown, PaneError, PaneHandle, PaneInfo, PaneSpec, Screen
from ..panes.tmux import (
    _HEADER_FIELDS,
    _HEADER_FORMAT,
    _NAME,
    _PANE_ID,
    HISTORY_LIMIT,
    OWNER_OPTION,
    RECENT,
    SEP,
    SWEEP_FORMAT,
    TmuxBackend,
    TmuxFailed,
    standalone_ansi,
    strip_ansi,
    unreaped_from_stat,
)
from .connection import SSH_FAILED, HostConnection
from .probe import remote_path
from .unreachable import HostUnreachable

MIRROR_CHUNK = 256 * 1024  # bytes of one mirrored file brought per sweep, at most
_UNREPEATABLE = ("paste-buffer", "send-keys")  # tmux commands with effects on the agent
CACHE_TTL = 1.0  # a screen captured by the sweep serves capture() this long

__all__ = ["HostDown", "RemoteTmuxBackend"]


class RemoteTmuxBackend(TmuxBackend):
    """Agent panes as windows of a private tmux server on another host."""

    def __init__(
        self,
        conn: HostConnection,
        remote_state_dir: str,
        socket_name: str = "corral",
        tmux_session: str = "corral",
        *,
        history_limit: int = HISTORY_LIMIT,
    ) -> None:
        if not _NAME.fullmatch(socket_name):
            raise PaneError(f"tmux socket name {socket_name!r} must be letters, digits, . _ -")
        if not _NAME.fullmatch(tmux_session) or "." in tmux_session:
            raise PaneError(f"tmux session name {tmux_session!r} must be letters, digits, _ -")
        self.name = f"ssh:{conn.name}"
        self.conn = conn
        self.host = conn.name
        self.socket_name = socket_name
        self.session = tmux_session
        self.history_limit = history_limit
        self.tmux_bin = "tmux"
        self._env_bin = "env"
        self._remote_state_dir = remote_state_dir
        self.socket_path: Path | None = None
        self._where: list[str] = []
        self._base: list[str] = []
        self._env: dict[str, str] = {}
        self._term = "screen-256color"
        self._spawn_lock = threading.Lock()
        self._locks_guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        self._prepared = threading.Lock()
        self._seen: dict[str, str] = {}  # pane id -> tmux activity at its last capture
        self._cache: dict[str, tuple[float, Screen]] = {}  # owner -> (when, screen)
        self.sweeps = 0
        self._mirrors: dict[str, tuple[str, Path, int]] = {}  # key -> (remote, local, offset)
        self.last_captured: list[str] = []  # owners whose screens the last sweep brought
        self._stats: dict[int, str] = {}  # pid -> its /proc stat line there (dead panes)

    # -- reaching the host --------------------------------------------------------------

    def _remote(
        self, argv: list[str], *, input: bytes | None = None, timeout: float = 30.0
    ) -> tuple[int, str, str]:
        # a paste or keys lost with the connection may have landed: never
        # sent again here (the pane manager looks at the pane first)
        repeatable = not any(w.startswith(_UNREPEATABLE) for w in argv)
        try:
            r = self.conn.run(argv, input=input, timeout=timeout, repeatable=repeatable)
        except HostUnreachable as exc:
            raise HostDown(str(exc)) from exc
        return r.returncode, r.text, r.error

    def _prepare(self) -> None:
        """Make the socket directory (0700) on the host and learn its absolute path."""
        with self._prepared:
            if self.socket_path is not None:
                return
            script = (
                f'd={remote_path(self._remote_state_dir)}/tmux && mkdir -p "$d" && '
                'chmod 700 "$d" && cd "$d" && pwd'
            )
            code, out, err = self._remote(["sh", "-c", script])
            if code != 0 or not out.strip():
                raise PaneError(
                    f"cannot make corral's tmux directory on host {self.host}: {err or out}"
                )
            path = Path(out.strip()) / self.socket_name
            self._where = ["-S", str(path)]
            self._base = ["tmux", "-f", "/dev/null", "-u", *self._where]
            self.socket_path = path

    def _run(self, argv: list[str], *, input: bytes | None = None) -> str:
        self._prepare()
        code, out, err = self._remote([*self._base, *argv], input=input)
        if code == SSH_FAILED:  # ssh's own status, never tmux's: an outage, not a failure
            raise HostDown(f"host {self.host} did not answer: {err.strip() or 'ssh failed'}")
        if code != 0:
            raise TmuxFailed(err or f"tmux exited with status {code} on host {self.host}")
        return out

    # -- what differs on another host --------------------------------------------------

    def _preflight(self, spec: PaneSpec) -> tuple[Path, Path]:
        who = f"cannot start a pane for session {spec.session_id!r} on host {self.host}"
        if not spec.argv or not spec.argv[0]:
            raise PaneError(f"{who}: the command is empty")
        cwd = str(spec.cwd)
        if not cwd.startswith("/"):
            raise PaneError(f"{who}: the working directory {cwd} must be an absolute path")
        path = spec.env.get("PATH", "/usr/local/bin:/usr/bin:/bin")
        script = 'cd "$1" || exit 3; PATH="$2" command -v "$3" || exit 4'
        code, out, _ = self._remote(["sh", "-c", script, "sh", cwd, path, spec.argv[0]])
        if code == 3:
            raise PaneError(f"{who}: the working directory {cwd} does not exist there")
        if code != 0 or not out.strip():
            raise PaneError(f"{who}: program {spec.argv[0]!r} was not found on its PATH there")
        return Path(cwd), Path(out.strip().splitlines()[-1])

    def _stop_processes(self, pid: int, timeout: float) -> None:
        if pid <= 1:
            return
        tenths = max(1, int(timeout * 10))
        script = (
            'kill -TERM -- "-$1" 2>/dev/null || exit 0; i=0; '
            'while kill -0 -- "-$1" 2>/dev/null && [ "$i" -lt "$2" ]; do sleep 0.1; i=$((i+1)); done; '
            'kill -KILL -- "-$1" 2>/dev/null; exit 0'
        )
        self._remote(["sh", "-c", script, "sh", str(pid), str(tenths)], timeout=timeout + 10)

    def _discard(self, pane_id: str, pid: int) -> None:
        self._stop_processes(pid, 0.5)
        self._run_quiet(["kill-window", "-t", pane_id])

    def _unreaped(self, pid: int | None) -> tuple[bool, int | None]:
        # the host's /proc, as the sweep read it there: a zombie tmux lost the
        # SIGCHLD of has exited (else the pane would read alive for ever)
        stat = self._stats.get(pid or 0)
        return (True, None) if stat is None else unreaped_from_stat(stat)

    def attach_argv(self, handle: PaneHandle) -> list[str] | None:
        self._check_handle(handle)
        self._prepare()
        return self.conn.attach_argv([*self._base, "attach-session", "-t", handle.pane_id])

    # -- mirrored files -------------------------------------------------------------

    def remote_hooks_file(self, session_id: str) -> str:
        """Where an agent on the host appends its hook events."""
        return f"{self._remote_state_dir.rstrip('/')}/agents/{session_id}/hooks.jsonl"

    def mirror_hooks(self, session_id: str, local_file: Path) -> None:
        """Bring the session's remote hooks file into `local_file` with every
        sweep. The local file only ever receives the remote one's bytes, so
        its size is how far the remote file was read (a restart resumes there)."""
        if not _NAME.fullmatch(session_id):
            raise PaneError(f"session id {session_id!r} cannot name a mirrored file")
        offset = local_file.stat().st_size if local_file.exists() else 0
        self._mirrors[session_id] = (self.remote_hooks_file(session_id), local_file, offset)

    def unmirror(self, session_id: str) -> None:
        self._mirrors.pop(session_id, None)

    def _mirror_script(self, nonce: str) -> str:
        parts = []
        for key, (remote, _local, offset) in self._mirrors.items():
            parts.append(
                f"printf '%s\\n' '{nonce}-file {key}'; f={remote_path(remote)}; "
                f'[ -f "$f" ] && tail -c +{offset + 1} "$f" | head -c {MIRROR_CHUNK} '
                "| base64 | tr -d '\\n'; printf '\\n'"
            )
        return "\n".join(parts)

    def _store_mirrors(self, text: str, nonce: str) -> None:
        import base64
        import binascii

        lines = text.split("\n")
        for i, line in enumerate(lines):
            if not line.startswith(f"{nonce}-file "):
                continue
            key = line.removeprefix(f"{nonce}-file ")
            if key not in self._mirrors or i + 1 >= len(lines):
                continue
            try:
                data = base64.b64decode(lines[i + 1], validate=True)
            except (binascii.Error, ValueError):
                continue
            complete = data[: data.rfind(b"\n") + 1]  # whole lines only
            if not complete:
                continue
            remote, local, offset = self._mirrors[key]
            local.parent.mkdir(parents=True, exist_ok=True)
            with local.open("ab") as out:
                out.write(complete)
            self._mirrors[key] = (remote, local, offset + len(complete))

    # -- the batched sweep --------------------------------------------------------------

    def _sweep_script(self, nonce: str) -> str:
        tmux = shlex.join(self._base)
        known = "|".join(f"{pane}={act}" for pane, act in self._seen.items()) or "-"
        head = shlex.quote(f"'{nonce}{SEP}{_HEADER_FORMAT}'")
        brief = shlex.quote(f"#{{pane_id}} #{{window_activity}} #{{{OWNER_OPTION}}}")
        return f"""T() {{ {tmux} "$@"; }}
now=$(date +%s)
printf '%s\\n' "$now"
L=$(T list-panes -a -F {shlex.quote(SWEEP_FORMAT)} 2>&1) || {{ printf '%s\\n' "{nonce}-fail" "$L"; exit 0; }}
printf '%s\\n' "$L" "{nonce}-stats"
printf '%s\\n' "$L" | awk -F '\\037' '$3 == "1" && $4 == "" && $5 == "" {{ print $2 }}' |
  while read -r pid; do cat "/proc/$pid/stat" 2>/dev/null; done
printf '%s\\n' "{nonce}-files"
{self._mirror_script(nonce)}
printf '%s\\n' "{nonce}-captures"
H={head}
T list-panes -a -F {brief} 2>/dev/null | while read -r id act owner; do
  [ -n "$owner" ] || continue
  case "$id=$act" in
    {known}) [ $((act + {int(RECENT)})) -lt "$now" ] && continue ;;
  esac
  printf '%s\\n' "display-message -p -t '$id' $H" "capture-pane -p -e -t '$id'"
done | T source-file - 2>/dev/null
exit 0
"""

    def sweep(self) -> dict[str, PaneInfo]:
        """Every pane of ours, plus the screens of those that changed, in one ssh call."""
        self._prepare()
        nonce = secrets.token_hex(8)
        self.sweeps += 1
        code, out, err = self._remote(["sh", "-c", self._sweep_script(nonce)])
        now = time.time()
        if code == SSH_FAILED:  # ssh's own failure: the script did not run (it exits 0)
            raise HostDown(f"host {self.host} did not answer the sweep: {err or 'ssh failed'}")
        if code != 0:
            raise PaneError(f"the sweep failed on host {self.host}: {err or code}")
        first, _, rest = out.partition("\n")
        skew = now - float(first) if first.strip().isdigit() else 0.0
        if rest.startswith(f"{nonce}-fail"):
            failure = TmuxFailed(rest.partition("\n")[2].strip())
            if failure.no_server or failure.no_session:
                self._seen.clear()
                return {}
            raise PaneError(f"tmux failed on host {self.host}: {failure.message}")
        listing, _, tail = rest.partition(f"{nonce}-stats\n")
        stats, _, tail = tail.partition(f"{nonce}-files\n")
        self._stats = {
            int(line.partition(" ")[0]): line
            for line in stats.split("\n")
            if line.partition(" ")[0].isdigit()
        }
        files, _, captures = tail.partition(f"{nonce}-captures\n")
        self._store_mirrors(files, nonce)
        infos = self._parse_sweep(listing, now, skew)
        acts: dict[str, str] = {}
        for row in listing.split("\n"):
            fields = row.split(SEP)
            if len(fields) > 5 and _PANE_ID.fullmatch(fields[0]) and fields[5].isdigit():
                acts[fields[0]] = fields[5]
        self._store_captures(captures, nonce, now, acts)
        present = {i.handle.pane_id for i in infos.values()}
        self._seen = {p: a for p, a in self._seen.items() if p in present}
        return infos

    def _store_captures(self, text: str, nonce: str, now: float, acts: dict[str, str]) -> None:
        """Keep the sweep's screens for capture(), and remember at which
        activity each pane was captured (the next sweep skips it until it changes)."""
        mark = nonce + SEP
        self._cache = {o: c for o, c in self._cache.items() if now - c[0] <= CACHE_TTL}
        self.last_captured = []
        sections: list[tuple[list[str], list[str]]] = []
        if text.endswith("\n"):
            text = text[:-1]
        for line in text.split("\n") if text else []:
            if line.startswith(mark):
                sections.append((line.split(SEP, len(_HEADER_FIELDS)), []))
            elif sections:
                sections[-1][1].append(line)
        for header, body in sections:
            if len(header) != len(_HEADER_FIELDS) + 1:
                continue
            _, pane_id, _pid, _dead, cx, cy, width, height, owner = header
            if not owner or not _PANE_ID.fullmatch(pane_id):
                continue
            self._cache[owner] = (
                now,
                Screen(
                    lines=[strip_ansi(line) for line in body],
                    ansi=standalone_ansi(body),
                    cursor_x=int(cx) if cx.isdigit() else 0,
                    cursor_y=int(cy) if cy.isdigit() else 0,
                    width=int(width) if width.isdigit() else 0,
                    height=int(height) if height.isdigit() else 0,
                ),
            )
            self.last_captured.append(owner)
            if pane_id in acts:
                self._seen[pane_id] = acts[pane_id]

    def capture(self, handles: list[PaneHandle]) -> dict[str, Screen]:
        """Screens by owner: the sweep's fresh captures first, one call for the rest."""
        now = time.time()
        got: dict[str, Screen] = {}
        missing: list[PaneHandle] = []
        for handle in handles:
            cached = self._cache.pop(handle.owner, None)
            if cached is not None and now - cached[0] <= CACHE_TTL:
                got[handle.owner] = cached[1]
            else:
                missing.append(handle)
        if missing:
            got.update(super().capture(missing))
        return got
