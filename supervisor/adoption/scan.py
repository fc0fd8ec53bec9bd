"""Finding agent panes on the user's own tmux servers.

The user's servers are the one their terminal runs in (`$TMUX`) and the
sockets in tmux's default socket directory (`$TMUX_TMPDIR` or /tmp, then
`tmux-<uid>`). A pane is an agent when the command tmux sees running in it
(`pane_current_command`) is one of an agent profile's binaries; an
interpreter (node, python) or a shell counts when its command line, or a
child's, names one.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..agents.base import AgentProfile
from ..panes.tmux import OWNER_OPTION, SEP

# what a pane may show running an agent: its interpreter, or the shell that
# started it without job control (`bash -c 'claude; exec bash'`)
WRAPPERS = ("node", "python", "python3", "bun", "deno", "bash", "zsh", "sh", "dash", "fish")
_FIELDS = (
    "pane_id",
    "pane_pid",
    "pane_dead",
    "session_name",
    "window_index",
    "pane_index",
    "pane_current_path",
    OWNER_OPTION,
    "pane_current_command",  # last: the only field that may hold anything
)
FORMAT = SEP.join(f"#{{{f}}}" for f in _FIELDS)


@dataclass(frozen=True)
class AgentPane:
    """One pane running an agent on a user's tmux server."""

    socket: Path
    pane_id: str  # "%3"
    where: str  # "work:1.0" (session:window.pane)
    command: str
    agent: str  # the profile's name
    cwd: str
    owner: str  # our owner marker when corral already watches it ("" when not)
    pid: int | None = None

    @property
    def target(self) -> str:
        """What `corral adopt` takes: `<socket>:<pane id>`."""
        return f"{self.socket}:{self.pane_id}"


def default_sockets() -> list[Path]:
    """The user's tmux servers: `$TMUX`'s, then the default socket directory's."""
    found: list[Path] = []
    tmux = os.environ.get("TMUX", "")
    if tmux:
        found.append(Path(tmux.split(",", 1)[0]))
    base = Path(os.environ.get("TMUX_TMPDIR") or "/tmp") / f"tmux-{os.getuid()}"
    try:
        entries = sorted(base.iterdir())
    except OSError:
        entries = []
    for entry in entries:
        try:
            if stat.S_ISSOCK(entry.lstat().st_mode) and entry not in found:
                found.append(entry)
        except OSError:
            continue
    return found


def _cmdline_names(pid: int | None) -> list[str]:
    """Names of `pid` and its children, and base names of the words of their
    command lines (an agent run by an interpreter: `node /usr/bin/claude`)."""
    if pid is None:
        return []
    pids = [pid]
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        pids += [int(c) for c in children if c.isdigit()]
    except OSError:
        pass
    names: list[str] = []
    for p in pids:
        try:
            raw = Path(f"/proc/{p}/cmdline").read_bytes()
            names.append(Path(f"/proc/{p}/comm").read_text().strip())
        except OSError:
            continue
        names += [os.path.basename(w.decode("utf-8", "replace")) for w in raw.split(b"\0") if w]
    return names


def match_profile(
    command: str, pid: int | None, profiles: list[AgentProfile]
) -> AgentProfile | None:
    """The profile whose binary runs in a pane (by its current command)."""
    for profile in profiles:
        if command in profile.binaries:
            return profile
    if command in WRAPPERS or command.startswith("python"):
        names = _cmdline_names(pid)
        for profile in profiles:
            if any(b in names for b in profile.binaries):
                return profile
    return None


def list_panes(socket: Path, profiles: list[AgentProfile]) -> list[AgentPane]:
    """The live agent panes on the tmux server at `socket` (none when no
    server answers there)."""
    binary = shutil.which("tmux")
    if binary is None:
        return []
    try:
        proc = subprocess.run(
            [binary, "-S", str(socket), "list-panes", "-a", "-F", FORMAT],
            capture_output=True,
            stdin=subprocess.DEVNULL,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    if proc.returncode != 0:
        return []
    panes: list[AgentPane] = []
    for row in proc.stdout.decode("utf-8", "replace").splitlines():
        fields = row.split(SEP, len(_FIELDS) - 1)
        if len(fields) != len(_FIELDS):
            continue
        pane_id, pid_text, dead, session, window, index, cwd, owner, command = fields
        if dead == "1":
            continue
        pid = int(pid_text) if pid_text.isdigit() else None
        profile = match_profile(command, pid, profiles)
        if profile is None:
            continue
        panes.append(
            AgentPane(
                socket=socket,
                pane_id=pane_id,
                where=f"{session}:{window}.{index}",
                command=command,
                agent=profile.name,
                cwd=cwd,
                owner=owner,
                pid=pid,
            )
        )
    return panes


def scan(sockets: list[Path], profiles: list[AgentProfile]) -> list[AgentPane]:
    """Agent panes on every given server, in socket order."""
    found: list[AgentPane] = []
    for socket in sockets:
        found += list_panes(socket, profiles)
    return found
