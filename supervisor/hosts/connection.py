"""One multiplexed SSH connection per host: OpenSSH is the transport, no
daemon of ours runs on the host.

- A master (`ssh -f -N -o ControlMaster=yes -o ControlPersist=…`) is started
  on first use; every command then rides on it through the ControlPath in
  corral's state dir (named by a hash of the host, so the path stays short). Commands
  run with `ControlMaster=no`: a command never becomes a master itself, since
  a backgrounded master started by a command would hold that command's
  output pipes open until ControlPersist ends.
- `BatchMode=yes` always: a host that wants a password or a new host key is
  an error sentence, never a prompt that hangs the console.
- A remote command is one string for the remote shell: argv is shell-quoted
  word by word (`shlex.join`), so nothing in an argument is interpreted there.
- When the master dies (killed, network gone), the next command notices (ssh
  says the control socket refused, or the transport fails with status 255),
  the connection starts a new master with backoff and retries once. While the
  host stays down, calls fail fast with `HostUnreachable` until the next
  attempt is due, so a sweep tick never waits on a dead host twice.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shlex
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from .settings import HostSettings
from .unreachable import HostUnreachable

SSH_FAILED = 255  # ssh's own failure status (as opposed to the remote command's)
BACKOFF = (0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0)
CONTROL_PERSIST = 600
_SOCKET_BUDGET = 104 - 18  # sun_path, minus the temporary suffix ssh adds while binding
_MASTER_PID = re.compile(r"pid=(\d+)")


@dataclass(frozen=True)
class RemoteResult:
    returncode: int
    stdout: bytes
    stderr: bytes

    @property
    def text(self) -> str:
        return self.stdout.decode("utf-8", "replace")

    @property
    def error(self) -> str:
        return self.stderr.decode("utf-8", "replace").strip()


def explain(host: HostSettings, stderr: str) -> str:
    """ssh's stderr as one sentence naming the host and what to check."""
    where = f"host {host.name} ({host.destination})"
    s = stderr.lower()
    if "permission denied" in s:
        return (
            f"{where} refused our SSH key: check that the key (IdentityFile, or ssh-agent) "
            "is in the remote user's ~/.ssh/authorized_keys and that the user name is right"
        )
    if "host key verification failed" in s or "no matching host key" in s:
        return (
            f"{where}: its host key is unknown or changed; connect once with `ssh "
            f"{host.destination}` to check and accept it (corral never accepts keys for you)"
        )
    if "could not resolve hostname" in s or "name or service not known" in s:
        return f"{where}: the name does not resolve; check the destination and ~/.ssh/config"
    if "connection refused" in s:
        return f"{where} refused the connection: is sshd running, and is the port right?"
    if "timed out" in s or "no route to host" in s or "network is unreachable" in s:
        return f"{where} does not answer (timed out): check the network and the host"
    last = stderr.strip().splitlines()[-1] if stderr.strip() else "ssh failed without a message"
    return f"{where} cannot be reached: {last}"


def _control_dir(state_dir: Path) -> Path:
    """A 0700 directory for the control sockets, short enough for a unix socket."""
    preferred = Path(state_dir) / "ssh"
    if len(os.fsencode(preferred)) + 1 + 20 <= _SOCKET_BUDGET:
        chosen = preferred
    else:
        chosen = Path(tempfile.gettempdir()) / f"corral-ssh-{os.getuid()}"
    chosen.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(chosen, 0o700)
    return chosen


class HostConnection:
    """Runs commands on one host over one multiplexed SSH connection."""

    def __init__(
        self,
        host: HostSettings,
        state_dir: Path,
        *,
        ssh_bin: str = "ssh",
        connect_timeout: float = 10.0,
        backoff: tuple[float, ...] = BACKOFF,
    ) -> None:
        self.host = host
        self.name = host.name
        self.control_dir = _control_dir(state_dir)
        # the state dir is part of the name: two corrals (or two test runs) that
        # name a host alike never share, nor close, each other's master
        key = f"{Path(state_dir).resolve()}\0{host.name}\0{host.destination}"
        digest = hashlib.sha256(key.encode()).hexdigest()
        self.control_path = self.control_dir / digest[:20]
        self._ssh = ssh_bin
        self._connect_timeout = connect_timeout
        self._backoff = backoff
        self._lock = threading.Lock()
        self._failures = 0
        self._next_attempt = 0.0
        self._up = False
        self._ever_up = False
        self.last_error = ""
        self.round_trips = 0  # remote commands run (each one round trip over the master)
        self.reconnects = 0  # masters started after the first

    # -- argv ----------------------------------------------------------------------------

    def _base(self, master: str) -> list[str]:
        timeout = max(1, round(self._connect_timeout))
        return [
            self._ssh,
            *self.host.ssh_options,
            "-o", "BatchMode=yes",
            "-o", f"ControlMaster={master}",
            "-o", f"ControlPath={self.control_path}",
            "-o", f"ControlPersist={CONTROL_PERSIST}",
            "-o", f"ConnectTimeout={timeout}",
            "-o", "ServerAliveInterval=5",
            "-o", "ServerAliveCountMax=3",
        ]  # fmt: skip

    def ssh_base(self) -> list[str]:
        """`ssh` with this host's options, riding the master (for GIT_SSH_COMMAND)."""
        return self._base("no")

    def ssh_argv(self, argv: list[str]) -> list[str]:
        """The local argv that runs `argv` on the host (quoted for its shell)."""
        return [*self._base("no"), "-T", "--", self.host.destination, shlex.join(argv)]

    def attach_argv(self, argv: list[str]) -> list[str]:
        """Like ssh_argv, with a terminal (for attaching a real terminal to a pane)."""
        return [*self._base("no"), "-t", "--", self.host.destination, shlex.join(argv)]

    # -- the master ------------------------------------------------------------------------

    def _control(self, op: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [*self._base("no"), "-O", op, "--", self.host.destination],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=self._connect_timeout,
            check=False,
        )

    def master_pid(self) -> int | None:
        """The master's pid, if one answers on the control socket."""
        try:
            proc = self._control("check")
        except (OSError, subprocess.TimeoutExpired):
            return None
        m = _MASTER_PID.search(proc.stderr.decode("utf-8", "replace"))
        return int(m.group(1)) if proc.returncode == 0 and m else None

    def _start_master(self) -> bool:
        """Start a background master unless one runs (True: started one);
        raise HostUnreachable with ssh's reason."""
        if self.master_pid() is not None:
            return False
        with contextlib.suppress(OSError):
            self.control_path.unlink()  # a stale socket of a master that died
        with tempfile.TemporaryFile() as err:
            try:
                proc = subprocess.run(
                    [*self._base("yes"), "-f", "-N", "--", self.host.destination],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=err,
                    timeout=self._connect_timeout + 5,
                    check=False,
                )
                code = proc.returncode
            except subprocess.TimeoutExpired:
                code = -1
            except OSError as exc:
                raise HostUnreachable(self.name, f"ssh could not be run ({exc})") from exc
            err.seek(0)
            message = err.read().decode("utf-8", "replace")
        if code != 0:
            if code == -1:
                message += "\nconnection timed out"
            raise HostUnreachable(self.name, explain(self.host, message))
        return True

    def connect(self) -> None:
        """Make sure a master runs, honouring the backoff after failures."""
        with self._lock:
            self._connect_locked(force=False)

    def _connect_locked(self, *, force: bool) -> None:
        now = time.monotonic()
        if self._failures and not force and now < self._next_attempt:
            raise HostUnreachable(
                self.name,
                self.last_error + f" (next attempt in {self._next_attempt - now:.1f} s)",
            )
        try:
            started = self._start_master()
        except HostUnreachable as exc:
            self._up = False
            self.last_error = str(exc)
            delay = self._backoff[min(self._failures, len(self._backoff) - 1)]
            self._failures += 1
            self._next_attempt = time.monotonic() + delay
            raise
        if started and self._ever_up:
            self.reconnects += 1
        self._ever_up = True
        self._failures = 0
        self._up = True
        self.last_error = ""

    @property
    def reachable(self) -> bool:
        """True after the last contact with the host worked."""
        return self._up

    # -- running commands ----------------------------------------------------------------

    def run(
        self,
        argv: list[str],
        *,
        input: bytes | None = None,
        timeout: float = 30.0,
        repeatable: bool = True,
    ) -> RemoteResult:
        """Run `argv` on the host. Returns the remote status and output; raises
        HostUnreachable when the host cannot be reached (after one reconnect).
        A command lost with its connection may have run: it is run again only
        when `repeatable` (a paste is not: its caller looks first)."""
        with self._lock:
            if not self._up:
                self._connect_locked(force=False)
            for attempt in range(2):
                result = self._once(argv, input, timeout)
                lost = connection_lost(result.returncode, result.error)
                if lost and not repeatable:
                    self._up = False
                    with contextlib.suppress(OSError):
                        self._drop_stale_socket()
                    raise HostUnreachable(self.name, explain(self.host, result.error))
                if not lost and "control socket connect" not in result.error.lower():
                    return result
                # the master died: this command either failed, or went direct
                self._up = False
                with contextlib.suppress(OSError):
                    self._drop_stale_socket()
                try:
                    self._connect_locked(force=attempt == 0)
                except HostUnreachable:
                    if not lost:
                        return _quiet(result)  # it ran anyway, directly
                    raise
                if not lost:
                    return _quiet(result)
            raise HostUnreachable(self.name, explain(self.host, result.error))

    def run_script(
        self, script: str, *, input: bytes | None = None, timeout: float = 30.0
    ) -> RemoteResult:
        """Run a POSIX sh script on the host (one round trip)."""
        return self.run(["sh", "-c", script], input=input, timeout=timeout)

    def _once(self, argv: list[str], input: bytes | None, timeout: float) -> RemoteResult:
        self.round_trips += 1
        try:
            proc = subprocess.run(
                self.ssh_argv(argv),
                input=input if input is not None else b"",
                capture_output=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return RemoteResult(SSH_FAILED, b"", b"ssh: remote command timed out")
        except OSError as exc:
            raise HostUnreachable(self.name, f"ssh could not be run ({exc})") from exc
        return RemoteResult(proc.returncode, proc.stdout, proc.stderr)

    def _drop_stale_socket(self) -> None:
        """Remove the control socket when no master answers on it (a killed
        master leaves it behind, and a new master could not bind)."""
        if self.master_pid() is None and self.control_path.exists():
            self.control_path.unlink()

    def close(self) -> None:
        """Stop the master (the panes on the host keep running under its tmux)."""
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            self._control("exit")
        self._up = False


def connection_lost(status: int, stderr: str) -> bool:
    """Whether ssh itself failed: status 255 with an ssh-level message, or with
    no message at all (a connection cut mid-command says nothing). corral's
    own remote commands (tmux, git, sh) never exit 255 themselves, so such a
    status is an outage until the host answers again."""
    return status == SSH_FAILED and (not stderr.strip() or _transport_failed(stderr))


def _transport_failed(stderr: str) -> bool:
    """Status 255 with an ssh-level message: the connection failed, not the command."""
    s = stderr.lower()
    return any(
        word in s
        for word in (
            "ssh:",
            "connection",
            "broken pipe",
            "permission denied",
            "host key",
            "timed out",
            "mux_client",
            "control socket",
            "kex_exchange",
        )
    )


def _quiet(result: RemoteResult) -> RemoteResult:
    """The result without ssh's complaint about the dead master's socket."""
    lines = result.stderr.split(b"\n")
    kept = [line for line in lines if not line.startswith(b"Control socket connect")]
    return RemoteResult(result.returncode, result.stdout, b"\n".join(kept))
