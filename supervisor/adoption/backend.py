"""Panes on the user's tmux servers, next to corral's own.

`UserTmux` talks to a server corral did not start: it marks a pane with our
owner (only a pane that carries no owner), and its `kill` only removes that
marker — it never signals a process or closes a window. `AdoptingBackend`
puts those panes beside the pane manager's own backend: every call for an
adopted pane's owner goes to its server, everything else to corral's own,
so the pane manager, the sweep and every stop path treat adopted panes as
any other — and cannot kill one.
"""

from __future__ import annotations

import contextlib
import secrets
import threading
from pathlib import Path
from typing import Any

from ..panes.base import PaneBackend, PaneError, PaneGone, PaneHandle, PaneInfo, PaneSpec, Screen
from ..panes.tmux import OWNER_OPTION, SEP, TmuxBackend, TmuxFailed


def _fmt_literal(value: str) -> str:
    """`value` as literal text inside a tmux format operand."""
    return value.replace("#", "##").replace(",", "#,").replace("}", "#}")


class UserTmux(TmuxBackend):
    """A user's own tmux server, reached by its socket path."""

    def __init__(self, socket: Path) -> None:
        super().__init__(socket_name="user", socket_path=socket)

    def spawn(self, spec: PaneSpec) -> PaneHandle:
        raise PaneError("corral starts no pane on a server it did not start")

    def look(self, pane_id: str) -> tuple[int | None, str] | None:
        """(pid, owner marker) of a pane, or None when it is gone."""
        seen = self.look_command(pane_id)
        return None if seen is None else seen[:2]

    def look_command(self, pane_id: str) -> tuple[int | None, str, str] | None:
        """(pid, owner marker, the command running in it) of a pane, or None
        when it is gone."""
        fmt = SEP.join(
            f"#{{{f}}}"
            for f in ("pane_id", "pane_pid", "pane_dead", OWNER_OPTION, "pane_current_command")
        )
        try:
            out = self.run_tmux(["display-message", "-p", "-t", pane_id, fmt]).rstrip("\n")
        except TmuxFailed:
            return None
        found, pid, dead, owner, command = [*out.split(SEP, 4), "", "", "", ""][:5]
        if found != pane_id or dead == "1":
            return None
        return (int(pid) if pid.isdigit() else None), owner, command

    def mark(self, pane_id: str, owner: str) -> PaneHandle:
        """Put our owner marker on a pane that carries none (checked and set
        inside tmux in one invocation); PaneGone when it is gone or taken."""
        nonce = secrets.token_hex(8)
        empty = f"#{{==:#{{{OWNER_OPTION}}},}}"
        setter = f'set-option -p -t {pane_id} {OWNER_OPTION} "{_fmt_literal(owner)}"'
        try:
            out = self.run_tmux(
                ["if-shell", "-F", "-t", pane_id, empty, setter, f"display-message -p {nonce}"]
            )
        except TmuxFailed as exc:
            raise PaneGone(f"pane {pane_id} is gone ({exc.message})") from exc
        if nonce in out:
            raise PaneGone(f"pane {pane_id} already carries an owner marker")
        seen = self.look(pane_id)
        if seen is None or seen[1] != owner:
            raise PaneGone(f"pane {pane_id} did not keep the owner marker")
        return PaneHandle("tmux", pane_id, owner, seen[0])

    def kill(self, handle: PaneHandle, timeout: float = 5.0) -> None:
        """Never kills: only our marker is removed (the pane runs on)."""
        self.unmark(handle)

    def unmark(self, handle: PaneHandle) -> None:
        """Remove our owner marker, if the pane still carries it."""
        check = f"#{{==:#{{{OWNER_OPTION}}},{_fmt_literal(handle.owner)}}}"
        unset = f"set-option -p -u -t {handle.pane_id} {OWNER_OPTION}"
        with contextlib.suppress(TmuxFailed):  # gone: nothing carries the marker any more
            self.run_tmux(["if-shell", "-F", "-t", handle.pane_id, check, unset])

    def run_tmux(self, argv: list[str]) -> str:
        return self._run(argv)


class AdoptingBackend:
    """corral's own backend plus the user's servers of adopted panes."""

    def __init__(self, primary: PaneBackend) -> None:
        self.primary = primary
        self.name = primary.name
        self._adopted: dict[str, UserTmux] = {}  # owner -> its server
        self._guard = threading.Lock()

    def add(self, owner: str, server: UserTmux) -> None:
        with self._guard:
            self._adopted[owner] = server

    def drop(self, owner: str) -> None:
        with self._guard:
            self._adopted.pop(owner, None)

    def server_of(self, owner: str) -> UserTmux | None:
        with self._guard:
            return self._adopted.get(owner)

    def _for(self, handle: PaneHandle) -> PaneBackend:
        return self.server_of(handle.owner) or self.primary

    def spawn(self, spec: PaneSpec) -> PaneHandle:
        return self.primary.spawn(spec)

    def sweep(self) -> dict[str, PaneInfo]:
        infos = self.primary.sweep()
        with self._guard:
            adopted = dict(self._adopted)
        for server in {id(s): s for s in adopted.values()}.values():
            try:
                found = server.sweep()
            except PaneError:
                continue  # that server is gone: its panes read as gone
            infos.update({o: i for o, i in found.items() if adopted.get(o) is server})
        return infos

    def capture(self, handles: list[PaneHandle]) -> dict[str, Screen]:
        groups: dict[int, tuple[PaneBackend, list[PaneHandle]]] = {}
        for handle in handles:
            backend = self._for(handle)
            groups.setdefault(id(backend), (backend, []))[1].append(handle)
        screens: dict[str, Screen] = {}
        for backend, group in groups.values():
            screens.update(backend.capture(group))
        return screens

    def scrollback(self, handle: PaneHandle, lines: int = 2000) -> list[str]:
        return self._for(handle).scrollback(handle, lines)

    def send_text(
        self, handle: PaneHandle, text: str, *, enter: bool = True, confirm_timeout: float = 5.0
    ) -> None:
        self._for(handle).send_text(handle, text, enter=enter, confirm_timeout=confirm_timeout)

    def send_keys(self, handle: PaneHandle, keys: list[str]) -> None:
        self._for(handle).send_keys(handle, keys)

    def resize(self, handle: PaneHandle, width: int, height: int) -> None:
        if self.server_of(handle.owner) is None:  # the user's own pane keeps its size
            self.primary.resize(handle, width, height)

    def kill(self, handle: PaneHandle, timeout: float = 5.0) -> None:
        """An adopted pane is released (marker removed), never killed."""
        self._for(handle).kill(handle, timeout)

    def attach_argv(self, handle: PaneHandle) -> list[str] | None:
        return self._for(handle).attach_argv(handle)

    def close(self) -> None:
        self.primary.close()

    def __getattr__(self, name: str) -> Any:
        # what only corral's own backend has (kill_server, mirror_hooks, …)
        return getattr(self.primary, name)
