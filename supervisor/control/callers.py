"""Who is at the other end of a control connection: the operator, or an
agent. The owner decides it from the kernel's word (the peer's pid from
SO_PEERCRED, or the process holding a loopback TCP port) and what it
recorded when it started each agent — never from the caller's environment
or parameters, which an agent writes.

Rules, in order:

1. A connection on a session's agent socket is that session's agent (the
   socket exists only for it: `paths.agent_socket_path`).
2. A peer in another pid namespace than the owner's is confined code: an
   agent (of the session whose pane root is its ancestor when the owner can
   see that, else of an unknown session). A sandbox cannot leave its pid
   namespace.
3. A peer whose ancestry (ppid, up to pid 1) reaches the root process of a
   live local agent pane is that session's agent; one that reaches corral's
   own agent tmux server but no pane it knows is an agent of an unknown
   session (an agent can ask tmux for a new window outside its own tree).
4. Anything else is the operator. A peer whose process cannot be read (it
   exited before it was classified, or /proc refuses) is refused as an
   agent: doubt never makes anyone the operator.

Residual risk, stated: an *unconfined* agent runs as the operator's uid.
Rule 3 holds while its processes stay under its pane: a double-forked
orphan is kept there by the pane's subreaper; without one it is reparented
outside and looks like the operator. A same-uid process can also ptrace or
inject into one of the operator's own processes (a shell, an editor) and
call from there. Confinement (bubblewrap, its own pid namespace, no ptrace
outside) closes both; unconfined agents are trusted to that extent and the
board says they are unconfined.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import socket
import struct
import time
from collections.abc import Callable, Iterable, Mapping

log = logging.getLogger("corral.supervisor.control.callers")

MAX_ANCESTRY = 4096  # a pid chain longer than this is a loop or an attack: refused
VANISHED = "the peer's process vanished or cannot be read"
PEER_READS = 4  # reads of a TCP peer's holders while one vanishes mid-read
PEER_REREAD_SECS = 0.02
TMUX_PID_TTL_SECS = 5.0


@dataclasses.dataclass(frozen=True)
class Operator:
    """The person: a process of theirs outside every agent's tree."""

    pid: int | None = None
    why: str = "outside every agent's process tree"

    @property
    def is_agent(self) -> bool:
        return False

    def describe(self) -> str:
        return "the operator"


@dataclasses.dataclass(frozen=True)
class Agent:
    """An agent or one of its descendants; `session_id` None when the owner
    knows it is an agent but not whose."""

    session_id: str | None
    pid: int | None = None
    why: str = ""

    @property
    def is_agent(self) -> bool:
        return True

    def describe(self) -> str:
        if self.session_id is None:
            return "an agent of an unknown session"
        return f"session {self.session_id[-8:]} (an agent)"


Caller = Operator | Agent


def peer_pid_uid(sock: socket.socket) -> tuple[int, int]:
    """(pid, uid) of the process at the other end of a unix socket."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, _gid = struct.unpack("3i", raw)
    return int(pid), int(uid)


def pid_namespace(pid: int | str) -> int:
    """The inode of a process's pid namespace (raises OSError when unreadable)."""
    return os.stat(f"/proc/{pid}/ns/pid").st_ino


def parent_pid(pid: int) -> int:
    """The ppid from /proc/<pid>/stat (the comm field may hold spaces and parens)."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        stat = f.read()
    return int(stat[stat.rindex(b")") + 2 :].split()[1])


def ancestry(pid: int) -> list[int]:
    """`pid` and its ancestors up to (not including) pid 0; OSError when one vanished."""
    chain = [pid]
    while chain[-1] > 1:
        if len(chain) > MAX_ANCESTRY:
            raise OSError(f"pid {pid}: its ancestry does not end")
        chain.append(parent_pid(chain[-1]))
    return chain


class CallerClassifier:
    """Classifies peers against the owner's live agent panes.

    `pane_roots` returns {root pid of a live local agent pane: session id};
    `tmux_server_pid` returns corral's own agent tmux server's pid (None when
    it runs none). Both are read per classification: cheap (a dict built
    from the pane records; the server pid cached for a few seconds)."""

    def __init__(
        self,
        pane_roots: Callable[[], Mapping[int, str]],
        tmux_server_pid: Callable[[], int | None] | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.pane_roots = pane_roots
        self._tmux_server_pid = tmux_server_pid
        self._clock = clock
        self._tmux_cached: tuple[float, int | None] | None = None
        self.own_namespace = pid_namespace("self")

    def tmux_server_pid(self) -> int | None:
        if self._tmux_server_pid is None:
            return None
        now = self._clock()
        if self._tmux_cached is None or now - self._tmux_cached[0] > TMUX_PID_TTL_SECS:
            try:
                found = self._tmux_server_pid()
            except Exception as exc:
                log.info("asking for corral's agent tmux server's pid failed: %s", exc)
                found = None
            self._tmux_cached = (now, found)
        return self._tmux_cached[1]

    def classify_pid(self, pid: int | None, roots: Mapping[int, str] | None = None) -> Caller:
        """The caller behind process `pid` (None or 0: unknown, refused as an
        agent). `roots`: the pane roots read beforehand (when this runs off
        the thread that owns the pane records)."""
        if not pid or pid < 0:
            return Agent(None, pid, "the peer's process is unknown")
        roots = self.pane_roots() if roots is None else roots
        try:
            if pid_namespace(pid) != self.own_namespace:
                sid = _pane_of(_safe_ancestry(pid), roots)
                return Agent(sid, pid, "in another pid namespace (confined)")
            chain = ancestry(pid)
        except (OSError, ValueError, IndexError):
            return Agent(None, pid, VANISHED)
        sid = _pane_of(chain, roots)
        if sid is not None:
            return Agent(sid, pid, "runs under its agent pane")
        if _under_tmux(chain):  # only then is corral's tmux server worth asking for
            server = self.tmux_server_pid()
            if server is not None and server in chain:
                return Agent(None, pid, "runs under corral's agent tmux server")
        return Operator(pid)

    def classify_socket(self, sock: socket.socket | None) -> Caller:
        """A unix socket's peer (SO_PEERCRED)."""
        if sock is None:
            return Agent(None, None, "no socket")
        try:
            pid, _uid = peer_pid_uid(sock)
        except OSError:
            return Agent(None, None, "no peer credentials")
        return self.classify_pid(pid)

    def classify_tcp_peer(self, local: tuple[str, int], remote: tuple[str, int]) -> Caller:
        """A loopback TCP peer: every process holding the other end's socket.
        One agent among them makes the caller an agent (it can write on the
        connection). A holder that vanished while it was read is most often a
        child forked that moment, before it closed its inherited sockets: the
        holders are read again, a few times, before doubt refuses the call.
        Runs off the event loop (it may wait a few milliseconds)."""
        caller: Caller = Agent(None, None, "no process holds the peer's socket")
        for attempt in range(PEER_READS):
            if attempt:
                time.sleep(PEER_REREAD_SECS)
            pids = tcp_peer_pids(local, remote)
            if not pids:
                return Agent(None, None, "no process holds the peer's socket")
            roots = self.pane_roots()
            callers = [self.classify_pid(pid, roots) for pid in pids]
            agents = [c for c in callers if isinstance(c, Agent)]
            if not agents:
                return callers[0]
            caller = agents[0]
            if not any(c.why == VANISHED for c in agents):
                return caller  # an agent, read in full
        return caller


def _pane_of(chain: Iterable[int], roots: Mapping[int, str]) -> str | None:
    for link in chain:
        found = roots.get(link)
        if found is not None:
            return found
    return None


def _under_tmux(chain: Iterable[int]) -> bool:
    """Whether a tmux process is among `chain` (its server names itself `tmux: server`)."""
    for link in chain:
        try:
            with open(f"/proc/{link}/comm", "rb") as f:
                if f.read().startswith(b"tmux"):
                    return True
        except OSError:
            return True  # unreadable: ask tmux rather than guess
    return False


def _safe_ancestry(pid: int) -> list[int]:
    """The chain as far as it can be read (a confined peer: best effort for its session)."""
    chain = [pid]
    with contextlib.suppress(OSError, ValueError, IndexError):
        while chain[-1] > 1 and len(chain) <= MAX_ANCESTRY:
            chain.append(parent_pid(chain[-1]))
    return chain


def tcp_peer_pids(local: tuple[str, int], remote: tuple[str, int]) -> list[int]:
    """The pids of the processes holding the client end of a loopback TCP
    connection to `local` from `remote` (found in /proc/net/tcp{,6} by its
    ports, then by its socket inode in /proc/*/fd): more than one when a
    holder forked or passed it on. Empty when it cannot be determined; the
    caller treats that as an agent."""
    inode = _tcp_inode(local_port=remote[1], remote_port=local[1])
    if inode is None:
        return []
    target = f"socket:[{inode}]"
    holders: list[int] = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        try:
            fds = os.scandir(f"/proc/{pid}/fd")
        except OSError:
            continue
        with fds:
            for fd in fds:
                try:
                    if os.readlink(fd.path) == target:
                        holders.append(pid)
                        break
                except OSError:
                    continue
    return holders


def _tcp_inode(*, local_port: int, remote_port: int) -> int | None:
    """The inode of the TCP socket bound to `local_port` connected to `remote_port`."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii") as f:
                next(f, None)
                for line in f:
                    fields = line.split()
                    if len(fields) < 10:
                        continue
                    lport = int(fields[1].rsplit(":", 1)[1], 16)
                    rport = int(fields[2].rsplit(":", 1)[1], 16)
                    if lport == local_port and rport == remote_port:
                        inode = int(fields[9])
                        return inode or None
        except (OSError, ValueError):
            continue
    return None
