"""The panes on corral's tmux servers (here and on each `[[hosts]]` machine)
that carry corral's owner marker, matched to their stored sessions: listing
them (strays included) and stopping the ones the operator names.

`corral panes` reads and acts through this without owning the state dir; a
stray is listed, never killed unless asked for. Blocks on tmux and ssh.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .hosts.settings import HostSettings
from .panes.base import PaneBackend, PaneError, PaneHandle, PaneInfo
from .panes.stop_mark import agents_dir, mark_stopped
from .panes.tmux import TmuxBackend
from .states import CoderState, label
from .store import read_sessions

__all__ = ["AgentPane", "PaneListing", "PaneStop", "agent_panes", "attach_command", "stop_panes"]


@dataclass(frozen=True)
class AgentPane:
    """A pane on corral's tmux server (here or on a host) carrying corral's owner marker."""

    pane_id: str
    alive: bool
    exit_status: int | None
    command: str
    session_id: str | None  # None: a stray, no stored session owns it
    session_state: CoderState | None
    owner: str = ""  # the owner marker, "<session id>:<incarnation>"
    host: str = ""  # the [[hosts]] name it runs on ("": this machine)

    @property
    def stray(self) -> bool:
        return self.session_id is None


@dataclass
class PaneListing:
    """Every marked pane here and on the configured hosts; hosts that did
    not answer are named with the reason (their panes are not known)."""

    panes: list[AgentPane] = field(default_factory=list)
    unreachable: dict[str, str] = field(default_factory=dict)


def agent_panes(state_dir: Path, hosts: list[HostSettings] | None = None) -> PaneListing:
    """Every marked pane (one tmux sweep here, one ssh round trip per host
    from `[[hosts]]`), matched to its stored session by owner marker. A
    stray is listed, never killed."""
    listing = PaneListing()
    with _pane_places(state_dir, hosts) as places:
        for place, (infos, error) in zip(places, _sweep_all(places), strict=True):
            if error:
                listing.unreachable[place.host] = error
                continue
            listing.panes += [pane for _owner, pane in _match(infos, state_dir, place.host)]
    return listing


@dataclass(frozen=True)
class _Place:
    host: str  # "": this machine
    backend: PaneBackend


@contextlib.contextmanager
def _pane_places(state_dir: Path, hosts: list[HostSettings] | None) -> Iterator[list[_Place]]:
    """corral's tmux server here and each host's; a connection made only
    for this is closed after (a console's own connection is left running)."""
    from .hosts.connection import HostConnection
    from .hosts.remote_tmux import RemoteTmuxBackend

    if hosts is None:
        from .config import load_config

        hosts = load_config().hosts
    places = [_Place("", _tmux_backend())]
    ours: list[HostConnection] = []
    for settings in hosts:
        conn = HostConnection(settings, state_dir)
        if conn.master_pid() is None:
            ours.append(conn)
        places.append(_Place(settings.name, RemoteTmuxBackend(conn, settings.state_dir)))
    try:
        yield places
    finally:
        for conn in ours:
            conn.close()


def _sweep_all(places: list[_Place]) -> list[tuple[dict[str, PaneInfo], str]]:
    """Each place's panes (side by side: a host that does not answer holds
    up no other), or why a host did not answer."""
    from concurrent.futures import ThreadPoolExecutor

    def one(place: _Place) -> tuple[dict[str, PaneInfo], str]:
        if not place.host:
            return place.backend.sweep(), ""
        try:
            return place.backend.sweep(), ""
        except PaneError as exc:
            return {}, str(exc)

    with ThreadPoolExecutor(max_workers=min(8, len(places))) as pool:
        return list(pool.map(one, places))


def _match(
    infos: dict[str, PaneInfo], state_dir: Path, host: str = ""
) -> list[tuple[str, AgentPane]]:
    sessions, _ = read_sessions(state_dir)
    owners = {(s.pane or {}).get("owner"): s for s in sessions if s.pane}
    panes: list[tuple[str, AgentPane]] = []
    for owner, info in sorted(infos.items()):
        session = owners.get(owner)
        panes.append(
            (
                owner,
                AgentPane(
                    pane_id=info.handle.pane_id,
                    alive=info.alive,
                    exit_status=info.exit_status,
                    command=info.current_command,
                    owner=owner,
                    session_id=session.id if session else None,
                    session_state=session.state if session else None,
                    host=host,
                ),
            )
        )
    return panes


@dataclass(frozen=True)
class PaneStop:
    """One pane `stop_panes` was asked to stop, and whether it is gone now."""

    pane: AgentPane
    owner: str
    gone: bool
    error: str | None = None


def _tmux_backend() -> TmuxBackend:
    """corral's own tmux server here (`CORRAL_TMUX_SOCKET_DIR` respected)."""
    socket_dir = os.environ.get("CORRAL_TMUX_SOCKET_DIR", "").strip()
    return TmuxBackend(socket_dir=Path(socket_dir) if socket_dir else None)


def attach_command() -> list[str]:
    """The exact command that attaches a terminal to corral's tmux server (its
    socket, `CORRAL_TMUX_SOCKET_DIR` respected), to watch every agent at once."""
    return _tmux_backend().attach_server_argv()


def stop_panes(
    state_dir: Path,
    which: list[str],
    *,
    strays: bool = False,
    every: bool = False,
    hosts: list[HostSettings] | None = None,
) -> list[PaneStop]:
    """Stop the marked panes (here and on the configured hosts) chosen by
    owner marker, session id (or its label), pane id, `strays` or `every`:
    the process group, then the window. Each result says whether a later
    sweep saw the pane gone. A pane of a session a running console owns is
    stopped too: that session then sees its agent exit, marked as stopped on
    purpose, so it is not started again as after a crash."""
    results: list[PaneStop] = []
    with _pane_places(state_dir, hosts) as places:
        for place, (infos, _error) in zip(places, _sweep_all(places), strict=True):
            results += _stop_in(place, infos, state_dir, which, strays=strays, every=every)
    return results


def _stop_in(
    place: _Place,
    infos: dict[str, PaneInfo],
    state_dir: Path,
    which: list[str],
    *,
    strays: bool,
    every: bool,
) -> list[PaneStop]:
    backend = place.backend
    chosen: list[tuple[str, AgentPane, PaneHandle]] = []
    for owner, pane in _match(infos, state_dir, place.host):
        session = pane.session_id or ""
        wanted = (
            every
            or (strays and pane.stray)
            or any(
                w in (owner, pane.pane_id, session, label(session) if session else owner)
                or (len(w) >= 6 and bool(session) and session.endswith(w))
                for w in which
            )
        )
        if wanted:
            chosen.append((owner, pane, infos[owner].handle))
    errors: dict[str, str] = {}
    for owner, pane, handle in chosen:
        if pane.session_id:  # its owner must not take the exit for a crash
            with contextlib.suppress(OSError):
                mark_stopped(agents_dir(state_dir), pane.session_id, owner)
        try:
            backend.kill(handle, 5.0)
        except PaneError as exc:
            errors[owner] = str(exc)
    after: dict[str, PaneInfo] = {}
    if chosen:
        try:
            after = backend.sweep()
        except PaneError as exc:  # a host that stopped answering: not seen gone
            after = {owner: infos[owner] for owner, _p, _h in chosen}
            for owner, _p, _h in chosen:
                errors.setdefault(owner, str(exc))
    return [
        PaneStop(pane, owner, gone=owner not in after, error=errors.get(owner))
        for owner, pane, _handle in chosen
    ]
