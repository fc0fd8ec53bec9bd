"""The foreman service: the split of each `foreman:<agent>` session (proposed
at gate 1, shown and replaceable there), its placement ledger (read from the
store, so it survives a restart), its board progress, and the engine the run
loop uses for it.

Asking for a split of a session whose engine cannot distribute is refused
with a sentence saying which engine to use, never ignored.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from ..agents.oneshot import is_oneshot
from ..config import SupervisorConfig
from ..engines.base import EngineRegistry
from ..errors import CorralError
from ..events import PlanTextData
from ..gates.run_loop import FOREMAN_PREFIX as PREFIX
from ..gates.run_loop import is_foreman
from ..gates.verifier import Verifier
from ..git.run import git
from ..hosts.configured import Hosts
from ..llm.base import Message, ModelError, ModelProvider
from ..models import ForemanView, Placement, Split
from ..panes.manager import PaneManager
from ..session.live import LiveSession
from ..session.registry import SessionRegistry
from ..states import CoderState, label
from ..status import AgentStatus
from ..store.placements import PlacementStore
from ..workspaces import Workspaces
from .places import Places
from .split import (
    DEFAULT_SUBTASKS,
    parse_split,
    split_from_reply,
    split_per_check,
    split_prompt,
)

if TYPE_CHECKING:  # the engine loads with the first foreman session's run
    from .engine import ForemanEngine

S = CoderState
log = logging.getLogger("corral.supervisor")

NOT_DISTRIBUTED = (
    "{name} runs {engine}, which cannot distribute: only a foreman:<agent> session is split "
    "into subtasks. Start the task with engine foreman:{agent} to split it"
)
LOCAL_ONLY = (
    "Other hosts are configured ([[hosts]]), but {agent} runs on this machine only (the "
    "built-in engine and one-shot agents do): every subtask runs here (host=local)."
)
HOSTS_OFF = (
    "Other hosts are configured ([[hosts]]), but foreman_hosts = false: every subtask runs "
    "on this machine (host=local)."
)


def runs_on_hosts(inner: str) -> bool:
    """Only an agent in a pane can run on a host (not the built-in engine, not one-shots)."""
    return inner.startswith("external:") and not is_oneshot(inner)


def inner_engine(engine: str) -> str:
    return engine.removeprefix(PREFIX)


class Foreman:
    def __init__(
        self,
        registry: SessionRegistry,
        verifier: Verifier,
        workspaces: Workspaces,
        ledger: PlacementStore,
        *,
        engines: EngineRegistry,
        config: SupervisorConfig,
        panes: PaneManager | None,
        hosts: Hosts | None = None,
    ) -> None:
        self._registry = registry
        self._hosts = hosts
        self._verifier = verifier
        self._workspaces = workspaces
        self._ledger = ledger
        self._engines = engines
        self._config = config
        self._panes = panes
        self._proposing: dict[str, asyncio.Task[Split]] = {}
        self._places: Places | None = None  # made on first use (it needs the loop)

    def _shared_places(self) -> Places:
        """This machine and the hosts, one set of slots for every foreman session."""
        if self._places is None:
            limits = {h.name: h.max_sessions for h in self._config.hosts}
            self._places = Places(limits, local=self._config.foreman_local, busy=self._busy_on)
        return self._places

    def subtasks_on(self, host: str) -> int:
        """Foreman subtasks running on `host` now (they take its slots)."""
        return 0 if self._places is None else self._places.taken(host)

    def _busy_on(self, host: str) -> int:
        """Unfinished sessions on `host` (a foreman's subtasks are counted by `Places`)."""
        return sum(
            1 for r in self._registry.summaries() if r.host == host and not r.state.is_terminal
        )

    # -- the split (gate 1) ---------------------------------------------------------------

    def split(self, session_id: str) -> Split | None:
        """The split stored for a session (None: not proposed yet)."""
        data = self._ledger.load_split(session_id)
        return None if data is None else Split.model_validate_json(data)

    def set_split(self, session_id: str, data: str | dict[str, object] | Split) -> Split:
        """Replace the split at gate 1 (the operator's own, or an edit of the
        proposal); refused whole, with every problem named, when it cannot run."""
        live = self._registry.live(session_id)
        s = live.session
        self._refuse_undistributed(s.id, s.engine)
        if s.state not in (S.CREATED, S.CONTRACT_PROPOSED):
            raise CorralError(
                f"{label(s.id)} is {s.state.value}: the split can only change at gate 1, before "
                "the contract is confirmed"
            )
        try:
            split = parse_split(data, s.contract)
        except ValueError as exc:
            raise CorralError(str(exc)) from None
        if not isinstance(data, Split) or split.proposed_by == "operator":
            split = split.model_copy(update={"proposed_by": "operator"})
        self._ledger.save_split(s.id, split.model_dump_json())
        self._registry.emit(live, PlanTextData(text=describe(split, "Split set")))
        return split

    def refuse_split_request(self, session_id: str) -> None:
        """Raise the sentence for a split asked of a session that cannot distribute."""
        s = self._registry.live(session_id).session
        self._refuse_undistributed(s.id, s.engine)

    def _refuse_undistributed(self, session_id: str, engine: str) -> None:
        if not is_foreman(engine):
            agent = engine.removeprefix("external:") if engine != "native" else "native"
            raise CorralError(
                NOT_DISTRIBUTED.format(name=label(session_id), engine=engine, agent=agent)
            )

    def on_started(self, live: LiveSession) -> None:
        """A foreman session proposes its split as soon as its contract is
        proposed, so gate 1 shows both."""
        if not is_foreman(live.session.engine):
            return
        self._registry.spawn(live, self._propose_at_gate(live))

    async def _propose_at_gate(self, live: LiveSession) -> None:
        with contextlib.suppress(TimeoutError, CorralError):
            # needs: also returns when drafting failed or was cancelled (terminal)
            await self._registry.wait_for(live.id, {S.CONTRACT_PROPOSED}, needs=True, timeout=None)
            if live.session.state is S.CONTRACT_PROPOSED:
                await self.ensure_split(live)

    async def ensure_split(self, live: LiveSession) -> Split:
        """The stored split, or one proposed now (once, however many ask)."""
        stored = self.split(live.id)
        if stored is not None:
            return stored
        task = self._proposing.get(live.id)
        if task is None:
            task = asyncio.ensure_future(self._propose(live))
            self._proposing[live.id] = task
            task.add_done_callback(lambda _t: self._proposing.pop(live.id, None))
        return await asyncio.shield(task)

    async def _propose(self, live: LiveSession) -> Split:
        s = live.session
        assert s.contract is not None
        split: Split | None = None
        provider: ModelProvider | None = getattr(self._engines, "provider", None)
        if provider is not None:
            try:
                split = await self._ask_model(provider, s.execution_intent(), s.contract, s.repo)
            except (ModelError, ValueError) as exc:
                self._registry.emit(
                    live,
                    PlanTextData(
                        text=f"The model's split was not usable ({exc}); proposing one "
                        "subtask per contract check instead."
                    ),
                )
        if split is None:
            split = split_per_check(s.execution_intent(), s.contract, DEFAULT_SUBTASKS)
        if self.split(s.id) is None:  # the operator's own split wins a race
            self._ledger.save_split(s.id, split.model_dump_json())
            self._registry.emit(live, PlanTextData(text=describe(split, "Split proposed")))
        return self.split(s.id) or split

    async def _ask_model(
        self, provider: ModelProvider, intent: str, contract: object, repo: str
    ) -> Split:
        from ..models import OutcomeContract

        assert isinstance(contract, OutcomeContract)
        entries = await asyncio.to_thread(_top_entries, Path(repo))
        prompt = split_prompt(intent, contract, entries, DEFAULT_SUBTASKS)
        turn = await provider.complete(
            [Message("system", "You plan parallel coding work."), Message("user", prompt)],
            max_tokens=2048,
            timeout=120.0,
        )
        return split_from_reply(turn.text, contract, provider.model)

    # -- the ledger -----------------------------------------------------------------------

    def placements(self, session_id: str) -> list[Placement]:
        return self._ledger.placements(session_id)

    def view(self, session_id: str) -> ForemanView:
        """The split and the ledger, for a session view (both from the store)."""
        return ForemanView(split=self.split(session_id), placements=self.placements(session_id))

    def interrupt_unfinished(self) -> None:
        """After a restart: subtasks an earlier owner left running say so."""
        live = {sid for sid in self._registry.known_ids() if self._registry.is_live(sid)}
        self._ledger.interrupt_unfinished(
            live, "corral stopped while this subtask ran; its worktree is kept"
        )

    # -- the run --------------------------------------------------------------------------

    def engine(self, live: LiveSession) -> ForemanEngine:
        from .engine import ForemanEngine, ForemanHooks

        s = live.session
        registry = self._registry

        def progress(verified: int, total: int) -> None:
            s.foreman_progress = f"{verified}/{total} subtasks verified"
            registry.persist(live)
            registry.notify(s.id)

        def integrated(lines: list[str]) -> None:
            s.foreman_placements = lines
            registry.persist(live)

        async def stop_pane(child_id: str) -> None:
            if self._panes is not None and self._panes.record(child_id) is not None:
                await self._panes.kill(child_id, timeout=3.0)

        def pane_status(child_id: str) -> AgentStatus | None:
            # a host that stops answering leaves the tracker as it was (nothing
            # was read): the pane says so itself, and that is what counts here
            record = None if self._panes is None else self._panes.record(child_id)
            if record is None:
                return None
            return AgentStatus.UNREACHABLE if record.unreachable else record.status.status

        inner = inner_engine(s.engine)
        places: Places | None = None
        note: str | None = None
        if self._config.hosts and self._hosts is not None:
            if not self._config.foreman_hosts:
                note = HOSTS_OFF
            elif not runs_on_hosts(inner):
                note = LOCAL_ONLY.format(agent=inner)
            else:
                places = self._shared_places()
                note = (
                    f"Subtasks are placed round robin over {', '.join(places.names)}, up to "
                    "each host's max_sessions."
                )
        hooks = ForemanHooks(
            session=s,
            split=lambda: self.ensure_split(live),
            progress=progress,
            integrated=integrated,
            stop_pane=stop_pane,
            hosts_note=note,
            places=places,
            hosts=self._hosts,
            host_wait=self._config.foreman_host_wait_secs,
            pane_status=pane_status,
        )
        return ForemanEngine(
            inner_engine(s.engine),
            create=self._engines.create,
            workspaces=self._workspaces,
            verifier=self._verifier,
            ledger=self._ledger,
            hooks=hooks,
            rounds=1 + self._config.repair_invokes,
        )


def describe(split: Split, what: str) -> str:
    """`Split proposed (…): s1 — …; s2 — …` for the session's log."""
    parts = []
    for sub in split.subtasks:
        first = sub.intent.strip().splitlines()[0][:80] if sub.intent.strip() else ""
        checks = ", ".join(c if isinstance(c, str) else c.name for c in sub.checks)
        owns = f" [{', '.join(sub.files)}]" if sub.files else ""
        parts.append(f"{sub.id} — {first}{owns} (checks: {checks})")
    return f"{what} ({split.proposed_by}), {len(split.subtasks)} subtask(s): " + "; ".join(parts)


def _top_entries(repo: Path) -> list[str]:
    out = git(repo, "ls-tree", "--name-only", "HEAD", check=False)
    return [line for line in out.splitlines() if line]
