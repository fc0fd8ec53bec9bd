"""Adopting and releasing the user's own agent panes.

An adopted pane becomes a session (engine `adopted:<agent>`, running, no
contract, no worktree) whose pane record lives on the user's server through
`AdoptingBackend`. Its owner marker is set only on a pane that carries none,
and checked before the adoption is reported. Releasing it (or cancelling it)
removes the marker and leaves the pane running as it was.

An adoption survives a restart: closing corral leaves the marker on the pane
and the session stored as running; when corral starts again (after a close or
a crash) it is adopted again if its pane is still there, still carries our
marker and still runs the same agent — else it ends, with the sentence saying
which of those changed, and our marker is removed if the pane still has it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
from collections.abc import Callable
from pathlib import Path

from ..agents.base import AgentProfile
from ..agents.profiles import PROFILES, preference
from ..cancelling import cancel_and_wait
from ..errors import CorralError, swallowed
from ..events import PlanTextData
from ..models import AdoptablePane, CoderSession
from ..panes.base import PaneGone, PaneHandle, owner_of
from ..panes.manager import PaneManager
from ..session.live import LiveSession
from ..session.registry import SessionRegistry
from ..states import CoderState, label
from .backend import AdoptingBackend, UserTmux
from .scan import AgentPane, default_sockets, list_panes, match_profile, scan
from .steer import Steering

log = logging.getLogger("corral.adoption")

ADOPTED = "adopted:"
LIST_HINT = "`corral adopt --list` shows the agent panes corral can adopt"


def is_adopted(session: CoderSession) -> bool:
    return session.engine.startswith(ADOPTED)


def _profiles() -> list[AgentProfile]:
    return [PROFILES[name] for name in preference() if name in PROFILES]


def _public(pane: AgentPane) -> AdoptablePane:
    return AdoptablePane(
        target=pane.target,
        socket=str(pane.socket),
        pane_id=pane.pane_id,
        where=pane.where,
        agent=pane.agent,
        command=pane.command,
        cwd=pane.cwd,
    )


class Adoptions:
    """The adopted panes of one supervisor."""

    def __init__(
        self,
        registry: SessionRegistry,
        panes: PaneManager | None,
        *,
        id_factory: Callable[[], str],
        sockets: Callable[[], list[Path]] = default_sockets,
    ) -> None:
        self.registry = registry
        self.panes = panes
        self.id_factory = id_factory
        self.sockets = sockets
        # panes the operator let go of (released, cancelled) or that ended:
        # the scanner never takes one of them again
        self._held: set[tuple[str, str]] = set()
        self._scanner: asyncio.Task[None] | None = None

    # -- the opt-in scanner ([adoption] scan) ----------------------------------------------

    def start_scanner(self, every: float, extra: list[Path]) -> None:
        """Adopt, every `every` seconds, the agent panes on the user's servers
        (and `extra` ones) that carry no marker and were never let go of."""

        async def loop() -> None:
            while True:
                await asyncio.sleep(every)
                try:
                    await self.scan_once(extra)
                except Exception:  # the next round tries again
                    log.exception("scanning for agent panes failed")

        self._scanner = asyncio.get_running_loop().create_task(loop())

    async def stop_scanner(self) -> None:
        if self._scanner is not None:
            await cancel_and_wait([self._scanner], what="the pane scanner")
            self._scanner = None

    async def scan_once(self, extra: list[Path] | None = None) -> list[str]:
        """One round: the sessions it adopted."""
        if self.panes is None or self.panes.backend.name != "tmux":
            return []
        servers = [*self.sockets(), *(extra or [])]
        home = str(Path.home())
        adopted: list[str] = []
        for pane in await self.adoptable(list(dict.fromkeys(servers))):
            if (pane.socket, pane.pane_id) in self._held or pane.cwd == home:
                continue  # let go of once, or no project to work on
            try:
                sid = await self.adopt(pane.target)
            except CorralError as exc:  # taken or gone meanwhile: the next round sees
                log.info("the scanner did not adopt %s: %s", pane.target, exc)
                continue
            live = self.registry.get_live(sid)
            if live is not None:
                self.registry.emit(
                    live,
                    PlanTextData(
                        text="Adopted by the scanner ([adoption] scan = true): release it to "
                        "let it go, and the scanner leaves that pane alone."
                    ),
                )
            adopted.append(sid)
        return adopted

    # -- listing ------------------------------------------------------------------------

    def _own_socket(self) -> Path | None:
        """corral's own tmux server (its panes are never "adoptable")."""
        backend = self.panes.backend if self.panes is not None else None
        primary = getattr(backend, "primary", backend)
        path = getattr(primary, "socket_path", None)
        if path is not None:
            return Path(path)
        name = getattr(primary, "socket_name", None)
        if not name:
            return None
        base = Path(os.environ.get("TMUX_TMPDIR") or "/tmp") / f"tmux-{os.getuid()}"
        return base / name

    def _servers(self, sockets: list[Path] | None) -> list[Path]:
        own = self._own_socket()
        chosen = sockets if sockets is not None else self.sockets()
        return [s for s in chosen if own is None or s.absolute() != own.absolute()]

    async def adoptable(self, sockets: list[Path] | None = None) -> list[AdoptablePane]:
        """Agent panes on the user's servers that carry no corral marker."""
        found = await asyncio.to_thread(scan, self._servers(sockets), _profiles())
        return [_public(p) for p in found if not p.owner]

    # -- adopting -----------------------------------------------------------------------

    def _require_tmux(self) -> PaneManager:
        if self.panes is None or self.panes.backend.name != "tmux":
            raise CorralError(
                "adoption needs the tmux pane backend: start corral with --backend tmux"
            )
        return self.panes

    def _resolve(self, target: str) -> tuple[Path, str]:
        """(socket, pane id) a target names: `<socket>:%N`, or `%N` / `session:w.p`
        looked up on the user's servers (it must be unique)."""
        target = target.strip()
        head, sep, tail = target.rpartition(":")
        if sep and tail.startswith("%") and tail[1:].isdigit():
            return Path(head), tail
        matches = [
            p for p in scan(self._servers(None), _profiles()) if target in (p.pane_id, p.where)
        ]
        if not matches:
            raise CorralError(f"no agent pane '{target}' on your tmux servers: {LIST_HINT}")
        if len(matches) > 1:
            names = ", ".join(p.target for p in matches)
            raise CorralError(f"'{target}' names several panes ({names}): give one of those")
        return matches[0].socket, matches[0].pane_id

    async def adopt(self, target: str) -> str:
        """Adopt the agent pane `target` names; returns the new session's id
        once the pane carries our marker and is tracked."""
        panes = self._require_tmux()
        socket, pane_id = await asyncio.to_thread(self._resolve, target)
        own = self._own_socket()
        if own is not None and socket.absolute() == own.absolute():
            raise CorralError(f"pane {pane_id} is one corral started: it is already a session")
        server = UserTmux(socket)
        seen = await asyncio.to_thread(server.look, pane_id)
        if seen is None:
            raise CorralError(
                f"pane {pane_id} is gone from the tmux server at {socket}: nothing to adopt; "
                + LIST_HINT
            )
        marker = seen[1]
        if marker:
            sid = marker.rpartition(":")[0]
            whose = f" (session {label(sid)})" if sid in self.registry.known_ids() else ""
            raise CorralError(f"pane {pane_id} is already watched by corral{whose}")
        listed = await asyncio.to_thread(list_panes, socket, _profiles())
        pane = next((p for p in listed if p.pane_id == pane_id), None)
        if pane is None:
            known = ", ".join(_profiles_names())
            raise CorralError(
                f"pane {pane_id} runs no agent CLI corral knows ({known}): nothing to adopt"
            )
        profile = PROFILES[pane.agent]
        sid = self.id_factory()
        owner = owner_of(sid, 1)
        try:
            handle = await asyncio.to_thread(server.mark, pane_id, owner)
        except PaneGone as exc:
            raise CorralError(f"cannot adopt pane {pane_id}: {exc}") from exc
        try:
            live = self._register(sid, pane, handle)
        except Exception:
            await asyncio.to_thread(server.unmark, handle)
            raise
        backend = panes.backend
        if not isinstance(backend, AdoptingBackend):
            backend = panes.backend = AdoptingBackend(backend)
        backend.add(owner, server)
        # no hooks reach a pane corral did not start: its screen tells its status
        panes.adopt(sid, handle, dataclasses.replace(profile, hooks=False))
        live.steering.open()  # what you type on its screen is pasted at its prompt
        steering = Steering(self.registry, panes, live, self._closed, self._agent_left)
        live.task = asyncio.get_running_loop().create_task(steering.run())
        self.registry.notify(sid)
        return sid

    def _register(self, sid: str, pane: AgentPane, handle: PaneHandle) -> LiveSession:
        now = self.registry.clock()
        profile = PROFILES[pane.agent]
        session = CoderSession(
            id=sid,
            repo=pane.cwd,
            intent=f"{profile.label} in your tmux pane {pane.where}",
            state=CoderState.RUNNING,
            engine=ADOPTED + pane.agent,
            engine_ran=ADOPTED + pane.agent,
            created_at=now,
            updated_at=now,
            pane={
                "owner": handle.owner,
                "pane_id": handle.pane_id,
                "backend": "tmux",
                "agent": pane.agent,
                "state": "live",
                "adopted": True,
                "socket": str(pane.socket),
                "where": pane.where,
            },
        )
        live = self.registry.register(session)
        self.registry.persist(live)
        text = (
            f"Adopted {profile.label} in your tmux pane {pane.where} ({pane.pane_id} on "
            f"{pane.socket}): corral watches and steers it; release leaves it running."
        )
        self.registry.emit(live, PlanTextData(text=text))
        return live

    # -- letting go ---------------------------------------------------------------------

    async def release(self, session_id: str) -> None:
        """Stop watching an adopted pane: its marker is removed (checked) and
        the pane runs on untouched; the session ends (abandoned)."""
        live = self.registry.get_live(session_id)
        if live is None or live.session.state.is_terminal:
            stored = self.registry.stored(session_id)
            if stored is None:
                raise CorralError(f"no corral session '{session_id}'")
            if not is_adopted(stored):
                raise CorralError(f"{label(session_id)} is not an adopted pane: cancel it instead")
            raise CorralError(f"{label(session_id)} was already released")
        if not is_adopted(live.session):
            raise CorralError(f"{label(session_id)} is not an adopted pane: cancel it instead")
        await self._let_go(live, "released: the pane runs on, untouched")

    async def _let_go(self, live: LiveSession, why: str) -> None:
        task = live.task
        if task is not None and not task.done():
            await cancel_and_wait([task], what=f"the watch of {live.id}")
        live.question.clear()
        await self._unmark(live.session)
        self._finish(live, why)

    async def _unmark(self, session: CoderSession) -> None:
        """Remove our marker from the pane (checked), never anything more."""
        pane = session.pane or {}
        owner, pane_id = str(pane.get("owner", "")), str(pane.get("pane_id", ""))
        if self.panes is not None and self.panes.record(session.id) is not None:
            await self.panes.kill(session.id)  # the adopting backend only unmarks
        backend = self.panes.backend if self.panes is not None else None
        server = backend.server_of(owner) if isinstance(backend, AdoptingBackend) else None
        if server is None:
            if not pane.get("socket"):
                return
            server = UserTmux(Path(str(pane["socket"])))
        await asyncio.to_thread(server.unmark, PaneHandle("tmux", pane_id, owner))
        seen = await asyncio.to_thread(server.look, pane_id)
        if seen is not None and seen[1] == owner:
            raise CorralError(f"the marker on pane {pane_id} could not be removed; try again")
        if isinstance(backend, AdoptingBackend):
            backend.drop(owner)

    def _finish(self, live: LiveSession, why: str) -> None:
        session = live.session
        pane = session.pane or {}
        self._held.add((str(pane.get("socket", "")), str(pane.get("pane_id", ""))))
        if session.pane is not None:
            session.pane = {**session.pane, "state": "released"}
        if not session.state.is_terminal:
            session.error = why
            self.registry.transition(live, CoderState.ABANDONED)

    async def _agent_left(self, live: LiveSession) -> bool:
        """Whether the adopted agent exited while its pane runs on (a shell
        now): then the marker is removed and the session ends."""
        pane = live.session.pane or {}
        server = UserTmux(Path(str(pane.get("socket", ""))))
        seen = await asyncio.to_thread(server.look_command, str(pane.get("pane_id", "")))
        if seen is None:
            return False  # gone: the sweep says so, and `_closed` ends it
        pid, _owner, command = seen
        profile = match_profile(command, pid, _profiles())
        if profile is not None and profile.name == pane.get("agent"):
            return False
        await self._unmark(live.session)
        self._finish(live, f"its agent exited (the pane runs {command or 'something else'} now)")
        return True

    def _closed(self, live: LiveSession) -> None:
        """The pane went away by itself: the session ends (nothing to stop)."""
        owner = str((live.session.pane or {}).get("owner", ""))
        backend = self.panes.backend if self.panes is not None else None
        if isinstance(backend, AdoptingBackend):
            backend.drop(owner)
        if self.panes is not None:
            self.panes.records.pop(live.id, None)
        self._finish(live, "its pane closed (the agent exited)")

    async def release_all(self) -> None:
        """corral is closing: every adopted pane is left as it is (running,
        marked, the session stored running), so the next start adopts it
        again; nothing is typed into it and nothing stops it."""
        for sid in sorted(self.registry.live_ids()):
            live = self.registry.get_live(sid)
            if live is None or not is_adopted(live.session) or live.session.state.is_terminal:
                continue
            try:
                await self._leave(live)
            except Exception as exc:  # closing goes on; the next start settles it
                log.warning("could not leave adopted pane of %s: %s", sid, exc)

    async def _leave(self, live: LiveSession) -> None:
        task = live.task
        if task is not None and not task.done():
            await cancel_and_wait([task], what=f"the watch of {live.id}")
        live.question.clear()
        live.steering.close()
        owner = str((live.session.pane or {}).get("owner", ""))
        if self.panes is not None:
            self.panes.records.pop(live.id, None)  # forgotten, never killed
            backend = self.panes.backend
            if isinstance(backend, AdoptingBackend):
                backend.drop(owner)
        live.session.pane = {**(live.session.pane or {}), "state": "left"}
        self.registry.detach(live)

    async def settle(self, sessions: list[CoderSession]) -> list[CoderSession]:
        """At start: an adopted session left unfinished (corral closed, or
        crashed) is adopted again where its pane still runs its agent under
        our marker; else it ends, saying why, its marker removed. The others
        are returned for recovery."""
        rest: list[CoderSession] = []
        for session in sessions:
            if not is_adopted(session):
                rest.append(session)
                continue
            if session.state.is_terminal:
                continue
            why = await self._why_not_readopt(session)
            if why is None:
                try:
                    self._readopt(session)
                    continue
                except Exception as exc:  # ends below, saying so
                    why = f"it could not be watched again ({exc})"
            with swallowed(
                log, "unmarking an adopted pane that could not be watched again", logging.WARNING
            ):
                await self._unmark(session)
            session.pane = {**(session.pane or {}), "state": "released"}
            session.error = f"ended when corral started again: {why}"
            session.state = CoderState.ABANDONED
            session.updated_at = self.registry.clock()
            store = self.registry.store
            if store is not None:
                store.save_session(session)
            log.warning("adoption of %s ended at start: %s", label(session.id), why)
        return rest

    async def _why_not_readopt(self, session: CoderSession) -> str | None:
        """Why the pane cannot be adopted again (None: it can)."""
        if self.panes is None or self.panes.backend.name != "tmux":
            return "adoption needs the tmux pane backend, and this corral runs another"
        pane = session.pane or {}
        socket, pane_id = str(pane.get("socket", "")), str(pane.get("pane_id", ""))
        if not socket or not pane_id:
            return "its pane was not recorded"
        seen = await asyncio.to_thread(UserTmux(Path(socket)).look_command, pane_id)
        if seen is None:
            return f"its pane {pane_id} is gone"
        pid, owner, command = seen
        if owner != pane.get("owner"):
            return f"its pane {pane_id} no longer carries corral's marker for it"
        profile = match_profile(command, pid, _profiles())
        if profile is None or profile.name != pane.get("agent"):
            return f"its pane {pane_id} runs {command or 'something else'} now, not its agent"
        return None

    def _readopt(self, session: CoderSession) -> None:
        """Watch and steer the pane again, as `adopt` did."""
        panes = self._require_tmux()
        pane = session.pane or {}
        owner, pane_id = str(pane["owner"]), str(pane["pane_id"])
        server = UserTmux(Path(str(pane["socket"])))
        session.pane = {**pane, "state": "live"}
        live = self.registry.register(session)
        self.registry.persist(live)
        backend = panes.backend
        if not isinstance(backend, AdoptingBackend):
            backend = panes.backend = AdoptingBackend(backend)
        backend.add(owner, server)
        profile = PROFILES[str(pane["agent"])]
        panes.adopt(
            session.id,
            PaneHandle("tmux", pane_id, owner),
            dataclasses.replace(profile, hooks=False),
        )
        live.steering.open()
        steering = Steering(self.registry, panes, live, self._closed, self._agent_left)
        live.task = asyncio.get_running_loop().create_task(steering.run())
        self.registry.emit(
            live,
            PlanTextData(
                text=f"corral started again: your {profile.label} pane {pane.get('where') or pane_id} "
                "is watched and steered again (it ran on meanwhile)."
            ),
        )


def _profiles_names() -> list[str]:
    return [p.name for p in _profiles()]
