"""After a restart, each stored session goes back to where it was, or is
told plainly that it cannot:

- a running session whose agent pane is still alive (its owner marker
  matches) is re-adopted, and its run goes on; so is a one-shot agent's
  pane that exited while corral was closed (tmux keeps it): its exit is
  its turn's end, so the run goes on to verify it (or fails with its status);
- a session waiting at a gate comes back to life when its worktree is intact
  and, for a review, its verified tree (stored with the session) is still in
  the repository: the review is of that tree, so a worktree changed while
  corral was closed comes back as "changed since verification";
- a running session whose agent pane died while corral was closed, and
  whose agent named its own session (Claude Code, Codex), is dormant: kept
  as it was, no needs-you, revivable (`Supervisor.revive`) with the agent's
  resume command in the same worktree;
- anything else that was mid-flight is recorded as failed, its worktree kept.

Every live pane carrying our owner marker is re-adopted, whatever its agent
profile (a `custom:` agent too), when its session can continue: running, or
waiting at a gate (a review sent back continues in the same pane). The pane
of a session that is finished, or that cannot continue, is stopped. Panes
of ours that no session claims are listed as strays and left alone
(`corral panes stop` stops them).
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from ..agents.base import AgentProfile
from ..agents.oneshot import is_oneshot, oneshot_profile
from ..agents.profiles import profile_for
from ..errors import CorralError
from ..events import PlanTextData
from ..git.trees import anchor_verified, tree_exists
from ..git.workspace import GitWorkspace
from ..models import CoderSession, IdentityState
from ..panes.base import HostDown, PaneHandle, PaneInfo
from ..panes.manager import PaneManager
from ..session.identity import can_go_dormant, is_dormant
from ..session.registry import SessionRegistry
from ..states import ApprovalKind, CoderState, label
from .run_loop import RunLoop
from .verifier import Verifier, name_paths

S = CoderState
REVIVE_WAIT_SECS = 10.0  # how long a revive waits for the dormant run to finish stopping

log = logging.getLogger("corral.supervisor")


class Recovery:
    def __init__(
        self,
        registry: SessionRegistry,
        verifier: Verifier,
        run_loop: RunLoop,
        panes: PaneManager | None,
    ) -> None:
        self._registry = registry
        self._verifier = verifier
        self._run_loop = run_loop
        self._panes = panes

    async def recover(self, sessions: list[CoderSession]) -> list[str]:
        """Bring `sessions` (as stored) back; returns the owner markers of
        stray panes."""
        panes = await self._start_panes(sessions)
        live_panes = {owner: info for owner, info in panes.items() if info.alive}
        live_panes.update(self._on_hosts_down(sessions, panes))
        for session in sessions:
            adoptable = panes if is_oneshot(session.engine) else live_panes
            if session.state is S.RUNNING and self._readopt(session, adoptable):
                continue
            if can_go_dormant(session):
                self._registry.mark_dormant(session)
                continue
            if session.state in (S.CREATED, S.CONTRACT_CONFIRMED, S.RUNNING):
                self._registry.mark_orphan_failed(session)
            elif session.state in (S.CONTRACT_PROPOSED, S.NEEDS_APPROVAL):
                await self._restore_gate(session)
                if self._registry.get_live(session.id) is not None:
                    self._adopt_at_gate(session, live_panes)
        # a finished session's agent (exited or not) is stopped, whoever started it
        finished = [
            s for s in sessions if s.state.is_terminal and s.pane and s.pane.get("owner") in panes
        ]
        if finished and self._panes is not None:
            await asyncio.gather(
                *(self._panes.stop_agent(s.id, s.pane) for s in finished),
                return_exceptions=True,
            )
        known = {s.pane.get("owner") for s in sessions if s.pane}
        # a user's pane adopted again at start is a live session's, not a stray
        for sid in self._registry.live_ids():
            live = self._registry.get_live(sid)
            if live is not None and live.session.pane:
                known.add(live.session.pane.get("owner"))
        strays = sorted(o for o in live_panes if o not in known)
        for owner in strays:
            log.warning("a corral pane with no matching session is running: %s (left alone)", owner)
        return strays

    async def _start_panes(self, sessions: list[CoderSession]) -> dict[str, PaneInfo]:
        """Start the pane manager; returns our live panes by owner marker,
        here and on each host a stored session's pane is on."""
        self._hosts_down: dict[str, str] = {}  # backend name -> why it did not answer
        if self._panes is None:
            return {}
        self._panes.on_status = self._registry.note_agent_status
        self._panes.on_hook = self._registry.note_agent_hook
        try:
            infos = await asyncio.to_thread(self._panes.backend.sweep)
        except Exception as exc:  # no tmux server yet, or none at all
            log.info("pane sweep at start-up: %s", exc)
            infos = {}
        for name in sorted({_backend_of(s) for s in sessions} - {""}):
            backend = self._panes.backends.get(name)
            if backend is None:
                continue
            try:
                infos.update(await asyncio.to_thread(backend.sweep))
            except HostDown as exc:
                self._hosts_down[name] = str(exc)
            except Exception as exc:
                log.info("pane sweep of %s at start-up: %s", name, exc)
        await self._panes.start()
        return infos

    def _on_hosts_down(
        self, sessions: list[CoderSession], found: dict[str, PaneInfo]
    ) -> dict[str, PaneInfo]:
        """The panes of running sessions whose host did not answer at
        start-up, as they were stored: they are adopted all the same (the
        board says "host unreachable" until the host answers, and the sweep
        then finds them by their owner marker, or finds them gone)."""
        out: dict[str, PaneInfo] = {}
        for s in sessions:
            pane = s.pane or {}
            owner, pane_id = pane.get("owner"), pane.get("pane_id")
            if (
                s.state is not S.RUNNING
                or _backend_of(s) not in self._hosts_down
                or not isinstance(owner, str)
                or owner in found
                or not isinstance(pane_id, str)
            ):
                continue
            pid = pane.get("pid")
            handle = PaneHandle("tmux", pane_id, owner, pid if isinstance(pid, int) else None)
            out[owner] = PaneInfo(handle=handle, alive=True)
        return out

    def _adopt_at_gate(self, session: CoderSession, live_panes: dict[str, PaneInfo]) -> None:
        """A gate session's agent still running: tracked again, so the review
        shows its screen, a send-back continues in it and delivery stops it."""
        owner = (session.pane or {}).get("owner")
        info = live_panes.get(owner) if owner else None
        if info is None or self._panes is None:
            return
        self._panes.adopt(
            session.id, info.handle, _profile_of(session), backend=_backend_of(session) or None
        )

    def _readopt(self, session: CoderSession, live_panes: dict[str, PaneInfo]) -> bool:
        pane = session.pane or {}
        owner = pane.get("owner")
        info = live_panes.get(owner) if owner else None
        if info is None or self._panes is None or not session.worktree:
            return False
        profile = _profile_of(session)
        live = self._registry.register(session)
        live.workspace = GitWorkspace(Path(session.repo), Path(session.worktree))
        self._panes.adopt(session.id, info.handle, profile, backend=_backend_of(session) or None)
        was = "was still running" if info.alive else "had exited while corral was closed"
        text = f"corral restarted; the {profile.label} pane {was} and was re-adopted."
        down = self._hosts_down.get(_backend_of(session))
        if down:
            text = (
                f"corral restarted; the {profile.label} pane is on host {session.host}, which "
                f"does not answer now ({down}): the session waits as host unreachable and "
                "goes on when the host answers."
            )
        self._registry.emit(live, PlanTextData(text=text))
        self._run_loop.start(live)
        return True

    async def revive(self, session_id: str) -> None:
        """Start a dormant session's agent again on its own conversation, in
        the same worktree; its run goes on from there (hooks re-armed by the
        new pane). The old agent's dead pane goes first: it would be a stray."""
        session = self._registry.stored(session_id)
        if session is None:
            raise CorralError(f"no corral session '{session_id}'")
        if not is_dormant(session):
            raise CorralError(
                f"{label(session_id)} cannot be revived (state: {session.state.value}; only a "
                "running session whose agent named its own conversation can be)"
            )
        if not session.worktree or not Path(session.worktree).is_dir():
            raise CorralError(
                f"{label(session_id)} cannot be revived: its worktree {session.worktree} is gone"
            )
        live = self._registry.get_live(session_id)  # dormant after a crash: still listed live
        if live is None:
            live = self._registry.register(session)
            live.workspace = GitWorkspace(Path(session.repo), Path(session.worktree))
        elif live.task is not None and not live.task.done():
            # the run that went dormant may still be stopping its agent (an ACP
            # agent's process ends with its run): a revive waits for that
            await asyncio.wait({live.task}, timeout=REVIVE_WAIT_SECS)
            if not live.task.done():
                raise CorralError(
                    f"{label(session_id)} is still stopping its agent; revive it again in a moment"
                )
            if not is_dormant(session):  # revived by another caller meanwhile
                raise CorralError(f"{label(session_id)} is already being revived")
        identity = session.agent_identity
        assert identity is not None
        identity.state = IdentityState.LIVE  # first: a second revive meanwhile is refused
        self._registry.persist(live)
        if self._panes is not None:
            await self._panes.stop_agent(session_id, session.pane)
        self._registry.emit(
            live,
            PlanTextData(
                text=f"Revived: {identity.agent} resumes its conversation {identity.session_id}."
            ),
        )
        self._run_loop.start(live)

    async def _restore_gate(self, session: CoderSession) -> None:
        """Only an intact worktree (for a review: with its verified tree still
        in the repository) comes back; otherwise the session stays listed as
        stored, with no action offered."""
        if not session.worktree or not Path(session.worktree).is_dir():
            return
        review = session.state is S.NEEDS_APPROVAL and session.no_change_finding is None
        changed: list[str] = []
        if review:
            tree, repo = session.review_tree, Path(session.repo)
            if tree is None or session.start_commit is None:
                return
            try:
                if not await asyncio.to_thread(tree_exists, repo, tree):
                    return
                # anchored again: a tree verified by an older corral had no ref
                await asyncio.to_thread(
                    anchor_verified, repo, session.id, session.start_commit, tree
                )
                changed = await self._verifier.changes_since_verification(session)
            except CorralError:
                return
        live = self._registry.register(session)
        live.workspace = GitWorkspace(Path(session.repo), Path(session.worktree))
        if session.state is S.NEEDS_APPROVAL:
            live.attention.approval_kind = (
                ApprovalKind.FINDING if session.no_change_finding else ApprovalKind.MERGE
            )
            if changed:
                text = (
                    "Review restored after a restart: the worktree changed since verification "
                    f"({name_paths(changed)}). Approve delivers the verified tree you reviewed; "
                    "re-verify (v) to verify the current content instead. The saved verification "
                    "results were not re-run; earlier activity is in the journal."
                )
            else:
                text = (
                    "Review restored after a restart: the worktree is exactly as verified. The "
                    "saved verification results were not re-run; earlier activity is in the "
                    "journal."
                )
        else:
            text = "Restored after a restart: the contract is waiting for confirmation again."
        self._registry.emit(live, PlanTextData(text=text))
        if review:
            self._verifier.note_changes(live, changed)
            self._verifier.watch(live)


def _backend_of(session: CoderSession) -> str:
    """The pane backend a session's pane is on, when it is another host's."""
    name = (session.pane or {}).get("backend")
    return name if isinstance(name, str) and name.startswith("ssh:") else ""


def _profile_of(session: CoderSession) -> AgentProfile:
    """The profile of the agent in a session's pane, for its status markers
    and dialogs. Never refuses: the session's engine (`external:custom:…`
    included) first, then the agent its pane names, else a plain profile
    that reads the screen only."""
    pane_agent = str((session.pane or {}).get("agent", "") or "")
    if is_oneshot(session.engine):
        return oneshot_profile(session.engine)
    names = []
    if session.engine.startswith("external:"):
        names.append(session.engine.removeprefix("external:"))
    names.append(pane_agent)
    for name in names:
        try:
            return profile_for(name)
        except Exception as exc:
            log.info("no agent profile for %r (%s); trying the next name", name, exc)
            continue
    return AgentProfile(name=pane_agent or "agent", label=pane_agent or "the agent", binaries=())
