"""`Supervisor`: the one public facade, everything a client may do.

A session flows top-down through the services it composes:

    session registry → contract gate → run loop → verifier → approval gate

(`session/registry.py`, then `gates/contract.py`, `gates/run_loop.py`,
`gates/verifier.py`, `gates/approval.py`; `gates/__init__.py` says who hands
what to whom). The facade builds them and delegates; it decides nothing.

Long work (drafting, baselines, engines, git) runs on supervisor-owned asyncio
tasks, so a caller that goes away (a closed screen) never cancels it. Errors
are `CorralError` carrying the sentence the operator reads.

The console and the command line import only the public modules named in
pyproject.toml (`[tool.corral] supervisor_public_modules`): this facade,
`models`, `states`, `errors`, `interface` (types re-exported on purpose),
`factory`, `paths`, and what the command line reads without an owner
(`stored_board`, `worktree_pruning`, `pane_cleanup`, `doctor`); an import
contract in `make lint` enforces it.
"""

from __future__ import annotations

import asyncio
import builtins
import logging
import os
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .acp.agents import is_acp
from .acp.view import conversation_screen
from .agents.profiles import known_profile, registered_profiles
from .config import McpSettings, SupervisorConfig, load_config
from .contracts.drafting import ContractDrafter
from .discuss.linked_runs import DISCUSSIONS_DIR, DiscussionRuns
from .engines.base import EngineRegistry
from .errors import CorralError
from .events import BoundaryData, CoderEvent, MessageData
from .foreman.service import Foreman
from .gates.approval import ApprovalGate, commit_message
from .gates.contract import DRAFTING_CANCELLED, NOT_EXPRESSIBLE, ContractGate
from .gates.recovery import Recovery
from .gates.run_loop import RunLoop, UserInputExpired, is_foreman
from .gates.verifier import Verifier
from .git import publish
from .git.patches import FilePatch, Selection
from .git.trees import snapshot_tree
from .hosts.configured import Hosts
from .models import (
    MAX_PACK_MESSAGES,
    AdoptablePane,
    ApproveResult,
    CancelResult,
    CheckResult,
    CoderSession,
    ContextPack,
    DeleteResult,
    OutcomeContract,
    Placement,
    PullRequestResult,
    PushResult,
    ReviseResult,
    ScheduledTask,
    SessionDetail,
    SessionSummary,
    Split,
    StartResult,
    SubscribeResult,
    TaskRun,
    TranscriptTurn,
)
from .notify import Notice, Notifier
from .panes.base import PaneHandle, Screen
from .panes.manager import PaneManager
from .paths import default_state_dir
from .sandbox import SandboxPolicy, set_active_policy
from .sandbox.netproxy import network_proxy
from .scheduler import Scheduler, new_task
from .session import lifecycle
from .session.board import BoardFeed, WatchDropped, Watcher
from .session.context_pack import export_pack
from .session.deletion import delete_session
from .session.git_stats import GitStatsWatch
from .session.janitor import Janitor
from .session.journal import Subscription, SubscriptionClosed, SubscriptionDropped
from .session.live import LiveSession
from .session.registry import SessionRegistry, new_session_id
from .session.search import search as search_sessions
from .session.summaries import stored_summary
from .session.transcripts import read_transcript
from .session.transcripts import resolve as resolve_transcript
from .session.usage import UsageWatch
from .states import CoderState, NeedsYou, label
from .store import DB_NAME, Store
from .store.placements import PlacementStore
from .workspaces import Workspaces

if TYPE_CHECKING:  # adopting loads with the first adopted pane (or a stored one)
    from .adoption.service import Adoptions

log = logging.getLogger("corral.supervisor")

DELETE_WAITS_SECS = 10.0  # for a finished session's last clean-up before deleting it


@dataclass(frozen=True)
class _Gates:
    """The services that work on the state dir, built when it is opened."""

    contract: ContractGate
    run_loop: RunLoop
    approval: ApprovalGate
    recovery: Recovery
    janitor: Janitor
    foreman: Foreman
    verifier: Verifier


class Supervisor:
    def __init__(
        self,
        state_dir: Path | None = None,
        *,
        drafter: ContractDrafter,
        engines: EngineRegistry,
        config: SupervisorConfig | None = None,
        clock: Callable[[], float] = time.time,
        panes: PaneManager | None = None,
        id_factory: Callable[[], str] = new_session_id,
        hosts: Hosts | None = None,
        registry: SessionRegistry | None = None,
    ) -> None:
        """`hosts`: the places on other machines sessions may run on (by
        default built from `[[hosts]]`; a caller that keeps its own hands
        them in). `registry`: the sessions' registry, by default built here
        on `state_dir`; a caller that sets up what it holds (a bench feeding a
        session's log) builds it on the same state dir and config and hands
        it in."""
        self.state_dir = Path(state_dir) if state_dir else default_state_dir()
        self._config = config or load_config()
        self._drafter = drafter
        self._engines = engines
        self._clock = clock
        self._panes = panes
        self._id_factory = id_factory
        sandbox = self._config.sandbox
        set_active_policy(
            SandboxPolicy(
                enabled=sandbox.enabled,
                writable=tuple(Path(p).expanduser() for p in sandbox.writable),
                hidden=tuple(Path(p).expanduser() for p in sandbox.hidden),
                state_dir=self.state_dir,
                shell_network=sandbox.shell_network,
                agents=sandbox.agents,
                network=sandbox.network,
                network_allow=tuple(sandbox.network_allow),
            )
        )
        if registry is None:
            registry = SessionRegistry(
                self.state_dir, config=self._config, clock=clock, panes=panes
            )
        self._registry = registry
        # other machines sessions may run on ([[hosts]]); their panes are
        # another backend of the one pane manager
        self._hosts = hosts if hosts is not None else Hosts(self._config.hosts, self.state_dir)
        if panes is not None:
            for place in self._hosts:
                panes.add_backend(place.backend)
        self._host_chores: set[asyncio.Task[None]] = set()  # cleanups on hosts, awaited by close
        self._workspaces: Workspaces | None = None
        self._placements: PlacementStore | None = None
        self.broken_rows: builtins.list[str] = []  # stored rows that do not parse
        self.stray_panes: builtins.list[str] = []  # our panes no session claims
        self._gates: _Gates | None = None
        self._scheduler: Scheduler | None = None  # running while the state dir is owned
        self._adopting: Adoptions | None = None  # built on first use (`_adoptions`)
        # says once, outside the board, when a session needs you or finishes
        self._notifier = Notifier(self._config.notify, self.watch)
        self._git_stats = GitStatsWatch(self._registry, self._config.git_stats_secs)
        self._usage = UsageWatch(
            self._registry, self._config.usage_secs, self._config.budget, self._config.prices
        )

    # -- owning the state dir ------------------------------------------------------------

    async def open(self) -> None:
        """Take ownership of the state dir, build the gates on it, and bring
        back what the last owner left (see `gates.recovery`)."""
        sessions, self.broken_rows = self._registry.open()
        workspaces = self._workspaces = Workspaces(self.state_dir, self.state_dir / DB_NAME)
        try:
            await asyncio.to_thread(workspaces.reconcile)
            # a worktree made just before a crash, its session never saved
            claimed = self._registry.known_ids() | set(self.broken_rows)
            await asyncio.to_thread(workspaces.discard_unclaimed, claimed)
        except CorralError as exc:  # a vanished repo must not keep the console shut
            log.warning("worktree reconciliation: %s", exc)
        ledger = self._placements = PlacementStore(self.state_dir / DB_NAME)
        gates = self._gates = self._compose(workspaces, ledger)
        if sessions:  # user panes: released, never killed
            sessions = await self._adoptions.settle(sessions)
        self.stray_panes = await gates.recovery.recover(sessions)
        await asyncio.to_thread(gates.foreman.interrupt_unfinished)
        gates.janitor.start()
        self._scheduler = Scheduler(lambda: self._registry.store, self._run_task)
        self._scheduler.start()
        self._notifier.start()
        scanning = self._config.adoption
        if scanning.scan and self._panes is not None:  # opt-in: your panes are yours
            extra = [Path(s).expanduser() for s in scanning.sockets]
            self._adoptions.start_scanner(scanning.scan_secs, extra)
        self._git_stats.start()
        self._usage.start()

    def _compose(self, workspaces: Workspaces, ledger: PlacementStore) -> _Gates:
        """Build the services bottom-up, so each receives the one it hands on to."""
        registry, config = self._registry, self._config
        hosts = self._hosts
        verifier = Verifier(registry, workspaces, config, hosts=hosts)
        approval = ApprovalGate(registry, verifier, workspaces)
        foreman = Foreman(
            registry,
            verifier,
            workspaces,
            ledger,
            engines=self._engines,
            config=config,
            panes=self._panes,
            hosts=hosts,
        )
        run_loop = RunLoop(
            registry,
            verifier,
            approval,
            engines=self._engines,
            workspaces=workspaces,
            config=config,
            foreman=foreman,
            hosts=hosts,
        )
        janitor = Janitor(registry, workspaces, config)
        discussion_runs = DiscussionRuns(self.state_dir / DISCUSSIONS_DIR)

        def finished(session: CoderSession) -> None:
            discussion_runs.record_safely(session)
            if session.host and session.state is CoderState.MERGED:
                # delivered here: its worktree on the host has done its work
                chore = asyncio.get_running_loop().create_task(
                    asyncio.to_thread(self._hosts.discard, session)
                )
                self._host_chores.add(chore)
                chore.add_done_callback(self._host_chores.discard)

        registry.on_finished = finished
        contract = ContractGate(
            registry,
            verifier,
            run_loop,
            drafter=self._drafter,
            engines=self._engines,
            workspaces=workspaces,
            config=config,
            id_factory=self._id_factory,
            before_start=janitor.sweep,
            discussion_runs=discussion_runs,
            hosts=hosts,
            subtasks_on=foreman.subtasks_on,
        )
        recovery = Recovery(registry, verifier, run_loop, self._panes)
        return _Gates(contract, run_loop, approval, recovery, janitor, foreman, verifier)

    async def close(self) -> None:
        """Stop in-process work and release the state dir. Agents in tmux panes
        whose session can continue (running, or waiting at a gate) keep running
        on purpose and are re-adopted by the next owner: `left_running` names
        their sessions, for the caller to say so. In-process runs are recorded
        as failed (their worktrees are kept); finished sessions' agents are
        stopped before this returns."""
        await self._notifier.stop()
        await self._git_stats.stop()
        await self._usage.stop()
        if self._scheduler is not None:
            await self._scheduler.stop()
            self._scheduler = None
        if self._gates is not None:
            await self._gates.janitor.stop()
        if self._adopting is not None:  # nothing was adopted without it
            await self._adopting.stop_scanner()
            await self._adopting.release_all()
        known = self._registry.known_ids()
        await self._registry.stop_sessions()
        if self._panes is not None:
            await self._panes.stop()
        # confined agents left running lose their proxy with this owner until
        # the next one re-adopts them and serves it again
        for sid in network_proxy().serving():
            if sid in known:
                network_proxy().close(sid)
        if self._host_chores:
            await asyncio.wait(set(self._host_chores), timeout=30)
        await asyncio.to_thread(self._hosts.close)  # the panes there run on
        if self._gates is not None:
            await asyncio.to_thread(self._gates.verifier.close)
        if self._workspaces is not None:
            self._workspaces.close()
            self._workspaces = None
        if self._placements is not None:
            self._placements.close()
            self._placements = None
        self._registry.release()

    async def __aenter__(self) -> Supervisor:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def left_running(self) -> builtins.list[str]:
        """Sessions whose agent the last close() left running (tmux panes)."""
        return list(self._registry.left_running)

    @property
    def opened(self) -> bool:
        """The state dir is owned: close() has something to release."""
        return self._registry.store is not None

    @property
    def _adoptions(self) -> Adoptions:
        """The adopted panes' service, built when first needed: an adoption,
        a listing, or stored sessions to settle at open."""
        if self._adopting is None:
            from .adoption.service import Adoptions

            self._adopting = Adoptions(self._registry, self._panes, id_factory=self._id_factory)
        return self._adopting

    @property
    def _board(self) -> BoardFeed:
        return self._registry.board

    def _open_gates(self) -> _Gates:
        if self._gates is None:
            raise CorralError("the supervisor is not open: call open() first")
        return self._gates

    # -- gate 1: the contract ------------------------------------------------------------

    async def start(
        self,
        intent: str,
        repo: Path | str,
        *,
        engine: str = "auto",
        base: str | None = None,
        max_iterations: int | None = None,
        constraints: builtins.list[str] | None = None,
        discussion_id: str | None = None,
        wait: bool = True,
        contract: OutcomeContract | None = None,
        model: str | None = None,
        split: Split | dict[str, object] | str | None = None,
        host: str | None = None,
        decided: Collection[NeedsYou] = (),
        context: ContextPack | None = None,
    ) -> StartResult:
        """Register a session and draft its contract (see `ContractGate.start`);
        `model` pins a configured model (or a name the agent knows); `host`
        runs it on a configured host (`[[hosts]]`). A `foreman:<agent>`
        session proposes its split at gate 1; `split` sets the operator's own
        instead (refused for an engine that cannot split). `decided`: needs
        the operator already decided and the caller answers at once (`corral
        run --yes` confirms, `--deliver` approves): no notice is sent for them;
        the row still shows them while they last. With `decided`, start
        returns at `created` (as `wait=False`), registered before drafting runs.
        `context`: another session's context pack, given to the agent with
        the task (`export_context`)."""
        gates = self._open_gates()
        for text in (intent, *(constraints or [])):
            if not _is_unicode(text):
                raise CorralError(
                    "the intent holds bytes that are not text (invalid UTF-8, or a lone "
                    "surrogate such as \\ud800); write it as valid Unicode and start again"
                )
        foreman = is_foreman(self._engines.resolve(engine)[0])
        if split is not None and not foreman:
            raise CorralError(
                f"a split needs the foreman engine (foreman:<agent>); this task asks for "
                f"{engine}, which runs one agent. Start it with foreman:{engine} to split it"
            )
        if foreman and host:
            raise CorralError(
                "the foreman places its subtasks itself, on this machine and the configured "
                "[[hosts]] up to their max_sessions: start it without a host"
            )
        result = await gates.contract.start(
            intent,
            repo,
            engine=engine,
            base=base,
            max_iterations=max_iterations,
            constraints=constraints,
            discussion_id=discussion_id,
            wait=wait and not decided,
            contract=contract,
            model=model,
            host=host or None,
            context=context,
        )
        if decided:  # before the drafting task first runs: no await since it was made
            self._notifier.decided_ahead(result.session_id, {n.value for n in decided})
        live = self._registry.get_live(result.session_id)
        if split is not None:
            gates.foreman.set_split(result.session_id, split)
        elif live is not None:
            gates.foreman.on_started(live)
        return result

    async def revise(self, session_id: str, request: str) -> ReviseResult:
        return await self._open_gates().contract.revise(session_id, request)

    async def confirm(
        self, session_id: str, contract: OutcomeContract | None = None
    ) -> dict[str, str]:
        return await self._open_gates().contract.confirm(session_id, contract)

    # -- the foreman: split at gate 1, placements after ------------------------------------

    async def foreman_split(self, session_id: str) -> Split:
        """A foreman session's split: the stored one, or (at gate 1) one proposed
        now. Refused with a sentence for a session that cannot distribute."""
        foreman = self._open_gates().foreman
        stored = foreman.split(session_id)
        if stored is not None:
            return stored
        live = self._registry.get_live(session_id)
        if live is None:
            raise CorralError(f"{session_id[-8:]} has no split (not a live foreman session)")
        foreman.refuse_split_request(session_id)
        return await foreman.ensure_split(live)

    def set_foreman_split(self, session_id: str, split: Split | dict[str, object] | str) -> Split:
        """Replace a foreman session's split at gate 1 (JSON text, a dict or a `Split`)."""
        return self._open_gates().foreman.set_split(session_id, split)

    def placements(self, session_id: str) -> builtins.list[Placement]:
        """The placement ledger of a foreman session (stored; survives restarts)."""
        return self._open_gates().foreman.placements(session_id)

    # -- the run -------------------------------------------------------------------------

    async def respond(self, session_id: str, text: str, *, steer: bool = False) -> dict[str, bool]:
        return await self._open_gates().run_loop.respond(session_id, text, steer=steer)

    def question_options(self, session_id: str) -> builtins.list[str]:
        return self._open_gates().run_loop.question_options(session_id)

    async def set_mode(self, session_id: str, mode: str) -> dict[str, str]:
        """Ask a running ACP agent to switch mode (`session/set_mode`)."""
        return {"mode": await self._open_gates().run_loop.set_mode(session_id, mode)}

    async def set_model(self, session_id: str, model: str) -> dict[str, str]:
        """Ask a running ACP agent to switch to a model it offers (`session/set_model`)."""
        return {"model": await self._open_gates().run_loop.set_model(session_id, model)}

    async def set_option(self, session_id: str, key: str, value: str) -> dict[str, str]:
        """Set a running ACP agent's config option (`session/set_config_option`)."""
        chosen = await self._open_gates().run_loop.set_option(session_id, key, value)
        return {"key": key, "value": chosen}

    # -- gate 2: approval, and cancel ------------------------------------------------------

    async def review_files(self, session_id: str) -> builtins.list[FilePatch]:
        return await self._open_gates().approval.review_files(session_id)

    async def checkout_clashes(self, session_id: str) -> builtins.list[str]:
        return await self._open_gates().approval.checkout_clashes(session_id)

    async def reverify(self, session_id: str) -> builtins.list[CheckResult]:
        return await self._open_gates().approval.reverify(session_id)

    async def approve(
        self,
        session_id: str,
        *,
        approve: bool = True,
        accept_finding: bool = False,
        delivery: str | None = None,
        comment: str | None = None,
        selection: Selection | None = None,
        override_red: bool = False,
        discard_rest: bool = False,
        accept_judge_changes: bool = False,
        accept_flaky: bool = False,
    ) -> ApproveResult:
        """Deliver, accept a finding, or reject (see `ApprovalGate.approve`)."""
        self._notifier.operator_acts(session_id)
        return await self._open_gates().approval.approve(
            session_id,
            approve=approve,
            accept_finding=accept_finding,
            delivery=delivery,
            comment=comment,
            selection=selection,
            override_red=override_red,
            discard_rest=discard_rest,
            accept_judge_changes=accept_judge_changes,
            accept_flaky=accept_flaky,
        )

    async def send(
        self,
        sender: str,
        target: str,
        text: str,
        *,
        expects_reply: bool = False,
        responds_to: str | None = None,
    ) -> MessageData:
        """Send `text` to session `target`'s agent, from `sender` (a session id,
        or "operator"): queued, pasted at its next idle prompt, logged in both
        sessions. Refused (CorralError) for an unknown or finished target, one
        with no working agent, and by the rate and hop guards. `expects_reply`:
        kept pending on both rows until the target's answer (`responds_to`
        this message's id) is delivered back to the sender."""
        self._open_gates()
        stored = self._registry.get_live(target)
        return self._registry.send_message(
            sender,
            target,
            text,
            expects_reply=expects_reply,
            responds_to=responds_to,
            # an ACP agent takes it as its next turn's prompt (engines/acp.py)
            speaks_acp=stored is not None and is_acp(stored.session.engine),
        )

    def report_impossible(self, session_id: str, reason: str) -> str:
        """The session's agent says its task cannot be done as specified (the
        tests contradict the intent): when its turn ends the session asks the
        operator (revise the contract, go on, or cancel) instead of verifying
        or repairing. Returns what the agent is told."""
        return self._registry.note_impossible(session_id, reason)

    def record_boundary(self, session_id: str, data: BoundaryData) -> bool:
        """Write an agent's refused attempt at what only a person may do on
        `session_id`'s log, where the board shows it. False when that session
        is not live (nothing to show it on)."""
        live = self._registry.get_live(session_id)
        if live is None:
            return False
        self._registry.emit(live, data)
        return True

    # -- scheduled tasks ---------------------------------------------------------------

    async def add_task(
        self,
        name: str,
        *,
        action: str,
        params: dict[str, str],
        at: float | None = None,
        every: float | None = None,
        cron: str | None = None,
    ) -> ScheduledTask:
        """Schedule `action` (start / send / revive) once `at`, `every` N
        seconds, or on a `cron` expression; stored, so it survives a restart."""
        task = new_task(name, action=action, params=params, at=at, every=every, cron=cron)
        self._require_store().save_task(task)
        return task

    async def tasks(self) -> builtins.list[ScheduledTask]:
        return self._require_store().list_tasks()

    async def remove_task(self, task_id: str) -> None:
        if not self._require_store().delete_task(task_id):
            raise CorralError(f"no scheduled task '{task_id}'")

    async def pause_task(self, task_id: str, paused: bool = True) -> ScheduledTask:
        """Pause a task (kept, not run) or resume it (`paused=False`)."""
        return self._require_scheduler().pause(task_id, paused)

    async def run_task_now(self, task_id: str) -> TaskRun:
        """Run a task at once, out of its schedule; the run is recorded."""
        return await self._require_scheduler().run_now(task_id)

    async def run_due_tasks(self) -> builtins.list[TaskRun]:
        """Run every scheduled task that is due now, without waiting for the
        scheduler's next pass; returns their runs. For scripts and tests."""
        return await self._require_scheduler().run_due()

    def _require_scheduler(self) -> Scheduler:
        if self._scheduler is None:
            raise CorralError("the supervisor is not open: call open() first")
        return self._scheduler

    async def task_runs(self, task_id: str) -> builtins.list[TaskRun]:
        """A task's last runs (at most 200), newest first."""
        return self._require_store().task_runs(task_id)

    def _require_store(self) -> Store:
        store = self._registry.store
        if store is None:
            raise CorralError("the supervisor is not open: call open() first")
        return store

    async def _run_task(self, task: ScheduledTask) -> str:
        """One scheduled action, through the same calls an operator makes."""
        p = task.params
        if task.action == "start":
            given = p.get("contract")
            result = await self.start(
                p["intent"],
                Path(p["repo"]),
                engine=p.get("engine", "auto"),
                host=p.get("host"),
                contract=OutcomeContract.model_validate_json(given) if given else None,
            )
            return f"started {label(result.session_id)}"
        if task.action == "send":
            message = await self.send("operator", p["target"], p["text"])
            return f"message {message.message_id} queued for {label(p['target'])}"
        await self.revive(p["session"])
        return f"revived {label(p['session'])}"

    async def revive(self, session_id: str) -> None:
        """Start a dormant session's agent again with its resume command
        (`claude --resume <id>`), in the same worktree; refuses anything else."""
        await self._open_gates().recovery.revive(session_id)

    async def cancel(self, session_id: str) -> CancelResult:
        self._notifier.operator_acts(session_id)
        return await self._open_gates().approval.cancel(session_id)

    def listen_for_notices(self, listener: Callable[[Notice], None]) -> bool:
        """Hear each notice (a session starts needing you, or finished by
        itself) in-process, when `[notify] terminal` asks for it; False when
        it does not, and nothing is registered."""
        if not self._config.notify.terminal:
            return False
        self._notifier.add_listener(listener)
        return True

    # -- adoption: agent panes the user started -------------------------------------------

    async def adoptable(
        self, sockets: builtins.list[Path] | None = None
    ) -> builtins.list[AdoptablePane]:
        """Agent panes on the user's own tmux servers (`$TMUX`, the default
        socket directory, or `sockets`) that corral did not start."""
        return await self._adoptions.adoptable(sockets)

    async def adopt(self, target: str) -> str:
        """Observe and steer the user's agent pane `target` (`<socket>:%N`,
        `%N` or `session:window.pane`): status, questions, messages and the
        live terminal; no contract, no worktree. Returns the session id."""
        self._open_gates()
        return await self._adoptions.adopt(target)

    async def release(self, session_id: str) -> None:
        """Stop watching an adopted pane; it runs on untouched (marker removed)."""
        self._open_gates()
        await self._adoptions.release(session_id)

    # -- the operator's own lifecycle: name, archive, delete, retry -----------------------

    def rename(self, session_id: str, name: str | None) -> SessionSummary:
        """Give a session a short name shown beside its intent (None or empty clears it)."""
        cleaned = lifecycle.clean_name(name)

        def change(s: CoderSession) -> None:
            s.name = cleaned

        return self._registry.amend(session_id, change)

    def archive(self, session_id: str, archived: bool = True) -> SessionSummary:
        """Hide a finished session from the board (kept in the store, shown by
        the board's archived filter; `archived=False` brings it back). Its
        worktree is left to its lease: retention and `corral worktrees prune`
        treat it as they treat any finished session's."""
        stored = self._registry.stored(session_id)
        if stored is None:
            raise CorralError(f"no corral session '{session_id}'")
        lifecycle.refuse_archive(stored)
        when = self._clock() if archived else None

        def change(s: CoderSession) -> None:
            s.archived_at = when

        return self._registry.amend(session_id, change)

    async def delete(self, session_id: str) -> DeleteResult:
        """Delete a finished session for good: its worktree, stored row,
        journal and placements go; a delivered branch stays (see
        `session.deletion`). A running or gated session is refused (cancel it
        first). The board drops the row once it is gone."""
        self._open_gates()
        live = self._registry.get_live(session_id)
        session = live.session if live is not None else self._registry.stored(session_id)
        if session is None:
            raise CorralError(f"no corral session '{session_id}'")
        lifecycle.refuse_delete(session, busy=False)
        if live is not None:  # a delivery's clean-up may still run: let it end first
            pending = [t for t in [*live.ops, live.task] if t is not None and not t.done()]
            if pending:
                await asyncio.wait(pending, timeout=DELETE_WAITS_SECS)
            busy = live.task_running or any(not t.done() for t in live.ops)
            lifecycle.refuse_delete(session, busy=busy)
        assert self._workspaces is not None and self._placements is not None  # open
        return await delete_session(
            session,
            registry=self._registry,
            workspaces=self._workspaces,
            placements=self._placements,
            hosts=self._hosts,
            panes=self._panes,
            agents_dir=self.state_dir / "agents",
        )

    async def push(self, session_id: str, remote: str = "origin") -> PushResult:
        """Push a delivered branch `corral/<id>` to the repo's `remote` (see
        `git.publish`); answers once git reported the push done."""
        session = self._known(session_id)
        branch = publish.delivered_branch(session)
        # the notes first: a remote that verifies pushes (docs/ci/pre-receive)
        # reads the attestation of the branch's commits from its own notes
        notes = await asyncio.to_thread(publish.push_notes, Path(session.repo), remote)
        url = await asyncio.to_thread(publish.push_branch, Path(session.repo), remote, branch)
        return PushResult(
            session_id=session_id, branch=branch, remote=remote, url=url, attestations=notes
        )

    async def pull_request(self, session_id: str, remote: str = "origin") -> PullRequestResult:
        """Push the delivered branch, then `gh pr create` with the intent as
        title and the contract and its verification as body. Without `gh`
        nothing is pushed: the answer says so and gives the push command."""
        session = self._known(session_id)
        branch = publish.delivered_branch(session)
        repo = Path(session.repo)
        command = publish.push_command(repo, remote, branch)
        gh = publish.gh_path()
        if gh is None:
            return PullRequestResult(
                session_id=session_id,
                branch=branch,
                opened=False,
                message="gh (the GitHub CLI) is not installed here, so no pull request was "
                f"opened; push the branch with: {command}",
                push_command=command,
            )
        await asyncio.to_thread(publish.push_notes, repo, remote)  # first: see push
        await asyncio.to_thread(publish.push_branch, repo, remote, branch)
        title, body = publish.pr_title(session), publish.pr_body(session, branch)
        url = await asyncio.to_thread(publish.create_pr, repo, gh, branch, title, body)
        return PullRequestResult(
            session_id=session_id,
            branch=branch,
            opened=True,
            url=url,
            message=f"pull request for {branch} opened: {url}",
            push_command=command,
        )

    def _known(self, session_id: str) -> CoderSession:
        session = self._registry.stored(session_id)
        if session is None:
            raise CorralError(f"no corral session '{session_id}'")
        return session

    async def retry(
        self, session_id: str, *, wait: bool = False, keep_edits: bool = False
    ) -> StartResult:
        """Start the task of a failed, rejected or cancelled session again: a new
        session with the same intent, repo, engine, base and contract (validated
        and baselined again, then proposed at gate 1), in a fresh worktree. Its
        agent's first prompt says what went wrong last time (the reject comment,
        the error, the failing checks with their output). The old session and
        its worktree stay as they were.

        With `keep_edits`, the new worktree starts on the old one's start
        commit holding the old worktree's files as uncommitted changes (a
        budget cut or a near miss carried on, not redone); review still shows
        every change from the start commit."""
        old = self._registry.stored(session_id)
        if old is None:
            raise CorralError(f"no corral session '{session_id}'")
        lifecycle.refuse_retry(old)
        seed: str | None = None
        guidance = lifecycle.retry_guidance(old)
        base = old.base
        if keep_edits:
            lifecycle.refuse_keeping_edits(old)
            seed = await asyncio.to_thread(snapshot_tree, Path(old.worktree or ""))
            base = old.start_commit
            guidance.append(lifecycle.KEPT_EDITS)
        result = await self._open_gates().contract.start(
            old.intent,
            old.repo,
            engine=old.requested_engine or old.engine,
            base=base,
            max_iterations=old.max_iterations,
            constraints=list(old.discussion_constraints),
            wait=wait,
            contract=old.contract,
            retry_of=old.id,
            retry_guidance=guidance,
            host=old.host,
            seed_tree=seed,
        )
        if old.name:
            self.rename(result.session_id, old.name)
        split = self._open_gates().foreman.split(old.id)
        if split is not None and is_foreman(result.engine):  # the operator's split carries over
            self._open_gates().foreman.set_split(result.session_id, split)
        return result

    # -- reading sessions ------------------------------------------------------------------

    def disk_full(self) -> str | None:
        """The sentence naming the state dir and its free space once a write
        found its disk full (the sessions it stopped are recorded as failed)."""
        store = self._registry.store
        return None if store is None or store.full is None else str(store.full)

    def get(self, session_id: str) -> SessionDetail:
        detail = self._registry.detail(session_id)
        if self._gates is not None and is_foreman(detail.session.engine):
            detail.foreman = self._gates.foreman.view(session_id)
        return detail

    async def fresh(self, session_id: str) -> SessionDetail:
        """`get`, for a screen that loads what it shows (an attached console
        asks its owner off the UI loop; here it is in memory)."""
        return self.get(session_id)

    def is_live(self, session_id: str) -> bool:
        return self._registry.is_live(session_id)

    def needs_you_of(self, session_id: str) -> str | None:
        row = self._registry.summary(session_id)
        return None if row is None or row.needs_you is None else row.needs_you_label

    def journal_path(self, session_id: str) -> Path:
        return self._registry.journal_path(session_id)

    async def history(self, session_id: str) -> builtins.list[CoderEvent]:
        """The session's stored journal (its last events, oldest first): the
        whole story of a session this process is not running."""
        return await asyncio.to_thread(self._registry.history, session_id)

    async def export_context(self, session_id: str) -> ContextPack:
        """The session's context pack: its conversation (the agent's own
        transcript, else corral's log of it), bounded, and a snapshot of its
        worktree; load it with `start(context=…)` or a discussion's."""
        session = self._registry.stored(session_id)
        if session is None:
            raise CorralError(f"no corral session '{session_id}'")
        turns = await self.transcript(session_id, limit=MAX_PACK_MESSAGES)
        events = await self.history(session_id)
        return await asyncio.to_thread(export_pack, session, turns, events)

    async def transcript(self, session_id: str, limit: int = 500) -> builtins.list[TranscriptTurn]:
        """The last turns of the agent's own transcript (Claude Code's, or
        Codex's rollout of its thread), oldest first; empty for an agent that
        keeps none."""
        session = self._registry.stored(session_id)
        if session is None:
            raise CorralError(f"no corral session '{session_id}'")
        identity = session.agent_identity
        if identity is None:
            return []
        profile = known_profile(identity.agent)
        if profile is None or profile.transcript_format is None:
            return []
        path = resolve_transcript(identity.transcript_path) if identity.transcript_path else None
        if path is None and profile.locates_conversations and identity.session_id:
            # an identity stored before corral kept where the agent saved it (Codex)
            path = await asyncio.to_thread(
                profile.conversation_file, identity.session_id, dict(os.environ)
            )
        if path is None:
            return []
        return await asyncio.to_thread(read_transcript, path, profile.transcript_format, limit)

    async def search(self, text: str) -> builtins.list[str]:
        """Ids of the sessions where every word of `text` shows: in their
        name, intent, repo or id, in their journal (every event), or in
        their agent's transcript (Claude Code's, Codex's rollout, Gemini
        CLI's chat, Aider's history)."""
        store = self._require_store()
        # only where the agent's profile names a transcript format: a file any
        # other agent's hook names is the agent's word, and is never read
        readable = {p.name for p in registered_profiles() if p.transcript_format is not None}
        transcripts = store.transcript_paths(readable)
        # agents whose hooks name no file (Codex): their conversations are found by id
        locating = [p for p in registered_profiles() if p.locates_conversations]
        threads = {p.name: store.agent_threads(p.name) for p in locating}
        rows = self._registry.summaries()
        journals = self.state_dir / "journals"

        def everything() -> builtins.list[str]:
            for profile in locating:
                if not threads[profile.name]:
                    continue
                saved = profile.conversations(os.environ)
                for sid, thread in threads[profile.name].items():
                    if thread in saved and sid not in transcripts:
                        transcripts[sid] = str(saved[thread])
            return search_sessions(text, rows, journals, transcripts)

        return await asyncio.to_thread(everything)

    def subscribe(
        self, session_id: str, from_seq: int = 0
    ) -> tuple[SubscribeResult, Subscription[CoderEvent] | None]:
        return self._registry.subscribe(session_id, from_seq)

    def replay(self, session_id: str) -> builtins.list[CoderEvent]:
        """A running session's buffered events, oldest first: what a
        subscription from the start would replay now ([] for a session this
        process does not run)."""
        live = self._registry.get_live(session_id)
        return [] if live is None else live.log.buffered()

    def unsubscribe(self, sub: Subscription[CoderEvent]) -> None:
        sub.close()

    def watch(self) -> tuple[builtins.list[SessionSummary], Watcher]:
        """The whole board and a registration for changes, atomically."""
        watcher = self._board.register()
        return self._registry.summaries(), watcher

    def unwatch(self, watcher: Watcher) -> bool:
        return self._board.unregister(watcher)

    async def wait_for(
        self,
        session_id: str,
        states: set[CoderState] | None = None,
        *,
        needs: bool = False,
        timeout: float | None = 30,
    ) -> SessionSummary:
        """Wait until a session reaches one of `states` (or, with `needs`, needs
        the operator, or is terminal). For scripts and tests."""
        return await self._registry.wait_for(session_id, states, needs=needs, timeout=timeout)

    # -- the agent's pane ------------------------------------------------------------------

    def agent_screen(self, session_id: str) -> Screen | None:
        """The agent pane's last captured screen (in memory; no tmux call);
        for an ACP agent, which has no pane, its conversation's last lines."""
        screen = None if self._panes is None else self._panes.screen(session_id)
        if screen is None and (live := self._acp_live(session_id)) is not None:
            return conversation_screen(live.log.buffered())
        return screen

    def agent_screen_version(self, session_id: str) -> int:
        record = None if self._panes is None else self._panes.record(session_id)
        if record is None and (live := self._acp_live(session_id)) is not None:
            return live.log.next_seq
        return -1 if record is None else record.version

    def _acp_live(self, session_id: str) -> LiveSession | None:
        live = self._registry.get_live(session_id)
        return live if live is not None and is_acp(live.session.engine) else None

    def agent_pane(self, session_id: str) -> PaneHandle | None:
        """The session's agent pane while its agent runs (its pane id, owner
        marker and root pid); None when it has no pane, or its agent ended."""
        record = None if self._panes is None else self._panes.record(session_id)
        return record.handle if record is not None and record.alive else None

    def attach_argv(self, session_id: str) -> builtins.list[str] | None:
        """A command that attaches a real terminal to the agent's pane."""
        if self._panes is None or (record := self._panes.record(session_id)) is None:
            return None
        return self._panes.backend_of(session_id).attach_argv(record.handle)

    async def agent_scrollback(self, session_id: str, lines: int = 2000) -> builtins.list[str]:
        """The agent pane's history plus screen (ANSI kept), oldest first."""
        if self._panes is None or self._panes.record(session_id) is None:
            return []
        return await self._panes.scrollback(session_id, lines)

    async def resize_agent(self, session_id: str, width: int, height: int) -> None:
        """Resize the agent's pane (owner-checked), e.g. to fit the console's view."""
        if self._panes is None or (record := self._panes.record(session_id)) is None:
            return
        await asyncio.to_thread(
            self._panes.backend_of(session_id).resize, record.handle, width, height
        )

    async def send_keys_to_agent(self, session_id: str, keys: builtins.list[str]) -> None:
        """Keystrokes from the console's terminal view (owner-checked)."""
        if self._panes is None or self._panes.record(session_id) is None:
            raise CorralError(f"{session_id[-8:]} has no live agent pane")
        await self._panes.send_keys(session_id, keys)

    # -- what the owner's control server needs of it ---------------------------------------

    def mcp_settings(self) -> McpSettings:
        """`[mcp]`: what callers and agents may do through the owner's protocol."""
        return self._config.mcp

    def follow_local_agents(
        self, on_start: Callable[[str], None], on_end: Callable[[str], None]
    ) -> builtins.list[str]:
        """Hear each agent pane start and end (by session id); returns the
        sessions whose agent runs in a pane on this machine now."""
        if self._panes is None:
            return []
        self._panes.on_track.append(on_start)
        self._panes.on_untrack.append(on_end)
        return [sid for sid, record in self._panes.records.items() if not record.backend_name]

    def unfollow_local_agents(
        self, on_start: Callable[[str], None], on_end: Callable[[str], None]
    ) -> None:
        """Stop hearing what `follow_local_agents` registered (a second call is harmless)."""
        if self._panes is None:
            return
        for listeners, listener in (
            (self._panes.on_track, on_start),
            (self._panes.on_untrack, on_end),
        ):
            if listener in listeners:
                listeners.remove(listener)

    def agent_pane_roots(self) -> dict[int, str]:
        """{root pid of each live agent pane on this machine: its session id}:
        whoever descends from one is that session's agent."""
        return {} if self._panes is None else self._panes.local_roots()

    def agent_server_pid_reader(self) -> Callable[[], int | None] | None:
        """What reads the pid of corral's own agent tmux server here, bound to
        the backend agents start on now (None: agents run in ptys, or no panes)."""
        if self._panes is None:
            return None
        reader: Callable[[], int | None] | None = getattr(self._panes.backend, "server_pid", None)
        return reader

    def model_choices(self) -> builtins.list[tuple[str, bool]]:
        """(name, can call tools) of each configured model, in default order."""
        models = getattr(self._engines, "models", None)
        return list(models()) if models is not None else []

    def host_choices(self) -> builtins.list[str]:
        """The configured hosts a new session may run on (`[[hosts]]` names)."""
        return [place.name for place in self._hosts]

    def engine_choices(self) -> builtins.list[tuple[str, str]]:
        """Engines a new session can use here (for the new-session form)."""
        available = getattr(self._engines, "available", None)
        return available() if available else [("auto", "auto")]

    def command_engines(self) -> builtins.list[tuple[str, str, str]]:
        """Engines named by a command line the operator types: (prefix, label,
        example), e.g. `custom:` and `oneshot:`; `prefix + line` is the engine."""
        from .engines.registry import COMMAND_ENGINES

        return builtins.list(COMMAND_ENGINES)

    def engine_refusal(self, engine: str) -> str | None:
        """Why `engine` cannot run here, in the sentence `start` would refuse
        with; None when it can. Lets a form refuse before anything is made."""
        try:
            self._engines.resolve(engine)
        except CorralError as exc:
            return str(exc)
        return None

    # Last: `list` shadows the builtin for everything below it in the class.
    def list(self) -> builtins.list[SessionSummary]:
        """Every session, live or stored, most recently updated first."""
        return self._registry.summaries()


__all__ = [
    "DRAFTING_CANCELLED",
    "NOT_EXPRESSIBLE",
    "EngineRegistry",
    "FilePatch",
    "Notice",
    "Placement",
    "Screen",
    "Split",
    "Subscription",
    "SubscriptionClosed",
    "SubscriptionDropped",
    "Supervisor",
    "UserInputExpired",
    "WatchDropped",
    "Watcher",
    "commit_message",
    "new_session_id",
    "stored_summary",
]


def _is_unicode(text: str) -> bool:
    """False for a lone surrogate (from invalid UTF-8 decoded with
    surrogateescape, or JSON's `\\ud800`): it can be neither stored nor shown."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
