"""Where corral keeps its state, and private directories.

The state dir is the XDG state home (`$XDG_STATE_HOME/corral`, default
`~/.local/state/corral`) unless `CORRAL_HOME` names another. `CORRAL_HOME` must
be absolute: a relative path would resolve differently per process, and
clean-up code (which removes worktrees under it) depends on it.

Part of the public surface: the console and the command line may import it
(where the state dir and the config file are; see `interface`).
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import NamedTuple

# the errors are imported where raised: `corral sessions --json` reads its
# kept listing through this module and must not pay for `errors`' imports

SOCKET_NAME = "control.sock"  # the owner's control socket, in the state dir
# each local agent's own socket to the owner
# short names: a unix socket's path holds 104 bytes at most, and the state dir
# comes first (`<state>/as/<last 12 of the session id>/s`)
AGENT_SOCKETS_DIR = "as"
AGENT_SOCKET_NAME = "s"
AGENT_SOCKET_ENV = "CORRAL_AGENT_SOCKET"  # set in the agent's environment


def agent_socket_dir(state_dir: Path, session_id: str) -> Path:
    """The directory of a session's agent socket (its sandbox may read it)."""
    return Path(state_dir) / AGENT_SOCKETS_DIR / session_id[-12:]


def agent_socket_path(state_dir: Path, session_id: str) -> Path:
    return agent_socket_dir(state_dir, session_id) / AGENT_SOCKET_NAME


def control_socket(state_dir: Path) -> Path:
    """The socket this process reaches the owner on: its agent socket when
    corral started it as an agent (`CORRAL_AGENT_SOCKET`), else the state
    dir's. The variable can only narrow what a caller may do: the owner
    serves an agent socket's caller as that agent, and classifies callers
    of the main socket itself."""
    given = os.environ.get(AGENT_SOCKET_ENV, "").strip()
    if given and os.path.isabs(given):
        return Path(given)
    return Path(state_dir) / SOCKET_NAME


def owner_running(state_dir: Path) -> bool:
    """Whether an owner answers on the control socket (a quick connect; here
    so a command can ask before importing the client)."""
    import socket

    path = control_socket(state_dir)
    if not path.exists():
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(1)
        try:
            sock.connect(str(path))
        except OSError:
            return False
    return True


def default_state_dir(env: dict[str, str] | None = None) -> Path:
    env = dict(os.environ) if env is None else env
    override = env.get("CORRAL_HOME", "").strip()
    if override:
        path = Path(override).expanduser()
        if not path.is_absolute():
            from .errors import StateDirError

            raise StateDirError(
                f"CORRAL_HOME must be an absolute path, got {override!r}; "
                "set it to a full path such as $HOME/.corral"
            )
        return path
    xdg = env.get("XDG_STATE_HOME", "").strip()
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".local" / "state"
    return base / "corral"


# who holds a state dir is read here (taking it is the store's `OwnerLock`): a
# command asks before it loads the store
LOCK_NAME = "owner.lock"


class LockHolder(NamedTuple):  # not a dataclass: `dataclasses` costs the CLI ~10 ms to import
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


def ensure_unowned(state_dir: Path) -> None:
    """Refuse, naming the holder, when another corral owns `state_dir`: one
    owner per state dir (a second console would fight the first). Here, not
    with the stored board, so a command can ask before it loads the store
    and its models."""
    holder = read_lock_holder(state_dir)
    if holder is not None:
        from .errors import CorralError

        raise CorralError(
            f"another corral already owns {state_dir} ({holder.describe()}); switch to that "
            "console, close it first, or set CORRAL_HOME to use a separate state dir"
        )


def config_path(env: dict[str, str] | None = None) -> Path:
    env = dict(os.environ) if env is None else env
    explicit = env.get("CORRAL_CONFIG", "").strip()
    if explicit:
        return Path(explicit).expanduser()
    xdg = env.get("XDG_CONFIG_HOME", "").strip()
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".config"
    return base / "corral" / "config.toml"


def config_stamp(path: Path | None = None) -> list[int] | None:
    """The config file as stat sees it (None: there is none): what a result
    made after reading it (`corral sessions --json`'s kept listing) is kept
    with, so a changed file is read again."""
    try:
        st = (path or config_path()).stat()
    except OSError:
        return None
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns]


def configured_host_names(path: Path | None = None) -> list[str]:
    """The `[[hosts]]` names in the configuration file, read without checking
    the rest (the console's first frame; building the supervisor loads the
    file in full and refuses a bad one)."""
    import tomllib

    path = path or config_path()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    hosts = data.get("hosts", [])
    if not isinstance(hosts, list):
        return []
    return [h["name"] for h in hosts if isinstance(h, dict) and isinstance(h.get("name"), str)]


def ensure_private_dir(path: Path) -> Path:
    """Create `path` (and parents) and make it owner-only (0700)."""
    path.mkdir(parents=True, exist_ok=True)
    try:
        os.chmod(path, 0o700)
    except PermissionError as exc:  # someone else's dir: refuse, do not widen
        from .errors import StateDirError

        raise StateDirError(
            f"cannot make {path} private ({exc}); choose another CORRAL_HOME"
        ) from exc
    return path
