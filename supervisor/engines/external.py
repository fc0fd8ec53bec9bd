"""The external engine: an agent CLI in its own pane does the work.

Round 1 starts the agent in the session's worktree with the task, the
confirmed contract and the constraints. Each later round (the runtime found
red checks and there is repair budget) pastes a repair prompt with the
failing checks and their output into the same pane. A round ends when the
agent ends its turn (hook first, debounced screen otherwise). A question on
screen parks the session on the question gate and the operator's answer
selects the option by its text. A crash uses the transient-retry budget,
then fails loudly: `external agent '<name>' failed: …`. A new pane for an
agent whose own session is known (a revive, a crash retry) resumes that
conversation (`claude --resume <id>`, `codex resume <id>`). A profile whose
exit ends its turn (`custom:` commands) that exits 0 is not a crash: the
round ends and the runtime verifies; a repair round then starts it again
with the task and the failing checks (so does any round whose agent is gone).

Operator guidance queued while the agent works is pasted at its next idle
prompt (never mid-turn, never over a question): when a turn ends with
guidance waiting, it is pasted and the round waits for that turn instead;
at the start of a repair round it rides with the repair prompt. Each message
is reported `delivered` only once the paste showed in the pane and Enter was
pressed, else `not_delivered` with the reason.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import shlex
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from ..agents.base import (
    SESSION_ENV,
    AgentProfile,
    AgentUnavailable,
    LaunchPlan,
    check_recursion,
    hook_command,
)
from ..agents.profiles import DEMO_AGENT
from ..agents.provider_home import in_own_home, isolate, session_home
from ..errors import CorralError, swallowed
from ..events import (
    BLOCKED_BY_OPERATOR,
    BLOCKED_BY_PROVIDER,
    GUIDANCE_DELIVERED,
    GUIDANCE_NOT_DELIVERED,
    MESSAGE_ACCEPTED,
    MESSAGE_AMBIGUOUS,
    MESSAGE_REJECTED,
    AgentStartedData,
    AuthRequiredData,
    BlockedData,
    OperatorGuidanceData,
    PaneAnswerData,
    PlanTextData,
)
from ..governance.env_scrub import scrubbed_env
from ..hosts.unreachable import HostUnreachable
from ..models import CheckResult, OutcomeContract
from ..panes.base import HostDown, PaneError, PaneGone, PaneSpec
from ..panes.manager import PaneManager
from ..panes.outage import PasteUncertain
from ..paths import AGENT_SOCKET_ENV, agent_socket_dir, agent_socket_path, ensure_private_dir
from ..sandbox import active_policy
from ..sandbox.agent import KEEPER, AgentLaunch, kept_argv, launch_agent
from ..sandbox.netproxy import forget_agent, serve_agent, serve_agent_again
from ..sandbox.network import PROXY_SOCKET_NAME
from ..session.messages import Message, message_prompt
from ..states import LoopFailure, label
from ..status import AgentStatus, Question, StatusTracker
from .base import EngineOutcome, RunContext, go_on_prompt, held_back_line, judging_note

log = logging.getLogger("corral.supervisor.engines.external")

# an answer that declines what the agent asked ("No", "No, and tell it …",
# "Reject", "Deny"): the operator blocked it
DECLINED = re.compile(r"^(no|reject|deny|decline)\b", re.I)

# An agent started with its task on the command line may show its idle prompt
# before it takes the task up: its first idle only counts after it was seen
# working, or this long after its screen first read as anything (a CLI that
# takes 20 s to draw its first screen on a loaded machine, Gemini CLI's, then
# submits its task: counted from the spawn, its first screen ended the turn
# before the task began). A turn corral starts by a paste needs no grace:
# the tracker knows when the paste landed (`StatusTracker.on_prompt`).
TURN_START_GRACE = 20.0
# The turn loop wakes when its pane's meaning changes (`PaneRecord.status_version`),
# and besides that only to look at the clock: every second while the agent
# shows idle (the start grace above runs), every few seconds otherwise (a
# safety net; nothing waits on the clock then).
IDLE_RECHECK_SECS = 1.0
BUSY_RECHECK_SECS = 5.0
# How long a cancelled agent gets to exit on SIGTERM before it is killed, so
# the engine has ended well before the cancel stops waiting for it.
CANCEL_TERM_SECS = 2.0
HOST_START_WAIT_SECS = 300.0  # how long starting an agent waits for its host to answer
T = TypeVar("T")


# how an agent in a pane (or over ACP, with corral's MCP tools) says its task
# cannot be done as specified
REPORT_IMPOSSIBLE = (
    "run `echo 'REASON' | $CORRAL_HOOK_CMD impossible` (or call corral's report_impossible "
    "tool), then stop"
)


def task_prompt(intent: str, contract: OutcomeContract) -> str:
    checks = "\n".join(f"- {c.name}: `{c.command.strip()}`" for c in contract.checks)
    return (
        f"{intent.strip()}\n\n"
        "Done means every one of these checks passes. corral re-runs them itself when you "
        f"stop, so do not just claim success:\n{checks}{held_back_line(contract)}\n\n"
        "If the task cannot be done as specified (its tests contradict its intent), "
        f"{REPORT_IMPOSSIBLE}, instead of changing the tests.\n\n"
        "Work only inside this directory. Do not commit, push or open pull requests: the "
        "operator reviews and delivers your diff."
    )


def repair_prompt(failing: list[CheckResult], round_: int, rounds_left: int) -> str:
    answer = go_on_prompt(failing)
    if answer is not None:
        return answer
    parts = [
        f"corral re-ran the contract and {len(failing)} check(s) still fail "
        f"(repair round {round_ - 1}; {rounds_left} left after this one):"
    ]
    for r in failing:
        tail = "\n".join(r.output_tail.strip().splitlines()[-30:])
        status = "timed out" if r.timed_out else f"exit {r.exit_code}"
        parts.append(f"\n## {r.name} ({status})\n{tail}")
    parts.append("\nFix the cause (not the checks), then stop.")
    parts.append(judging_note(REPORT_IMPOSSIBLE))
    return "\n".join(parts)


RESUMED = (
    "corral started you again on the same conversation, in the same worktree (your edits "
    "are kept). Continue the task where you stopped; corral re-runs the checks when you stop."
)


def guidance_prompt(notes: list[str]) -> str:
    lines = "\n".join(f"- {n.strip()}" for n in notes)
    return (
        "Guidance from the operator supervising this run (it takes precedence over your "
        f"plan; corral's checks still decide when you are done):\n{lines}"
    )


class ExternalEngine:
    """Runs one agent profile in a pane managed by `panes`."""

    def __init__(
        self,
        profile: AgentProfile,
        panes: PaneManager,
        *,
        session_dir: Callable[[str], Path],
        transient_retries: int = 1,
        python: str = sys.executable,
        size: tuple[int, int] = (200, 50),
    ) -> None:
        self.profile = profile
        self.panes = panes
        self.session_dir = session_dir
        self.transient_retries = transient_retries
        self.python = python
        self.size = size
        if forget_agent not in panes.on_untrack:
            panes.on_untrack.append(forget_agent)  # a proxy socket ends with its pane
        self.label = f"external:{profile.name}"
        self.incarnations: dict[str, int] = {}

    # -- spawning ---------------------------------------------------------------

    def _plan(
        self,
        ctx: RunContext,
        prompt: str,
        resume: str | None = None,
        incarnation: int | None = None,
    ) -> tuple[LaunchPlan, dict[str, str]]:
        binary = self.profile.find()
        if binary is None:
            raise AgentUnavailable(
                f"{self.profile.label} is not installed (looked for "
                f"{', '.join(self.profile.binaries) or self.profile.name} on PATH)"
            )
        chain = check_recursion(self.profile.name)
        hooks = self.panes.hooks_file(ctx.session_id)
        plan = self.profile.plan(
            binary,
            prompt=prompt,
            session_dir=self.session_dir(ctx.session_id),
            hook_cmd=hook_command(self.python, hooks, incarnation),
        )
        if resume is not None:
            plan = self.profile.with_resume(plan, resume) or plan
        plan = self.profile.with_model(plan, ctx.model_id)
        env = scrubbed_env(allow=plan.env_allow, invoked_by=chain)
        env.update(plan.env_extra)
        env.setdefault("TERM", "xterm-256color")
        # its own config home, never the operator's (provider_home)
        home = isolate(
            self.profile.name,
            self.session_dir(ctx.session_id),
            env,
            os.environ,
            resuming=resume is not None,
        )
        if home is not None:
            plan = self.profile.in_home(plan, home)
        # `corral msg` from inside the pane knows its sender and reaches this owner
        env[SESSION_ENV] = ctx.session_id
        env["CORRAL_HOME"] = str(self.panes.hooks_root.parent)
        # its own socket to the owner: whatever arrives there is this agent
        env[AGENT_SOCKET_ENV] = str(agent_socket_path(self.panes.hooks_root.parent, ctx.session_id))
        return plan, env

    def _plan_on_host(
        self,
        ctx: RunContext,
        prompt: str,
        resume: str | None = None,
        incarnation: int | None = None,
    ) -> tuple[LaunchPlan, dict[str, str]]:
        """The launch on the session's host: the agent's program as named
        there (corral's demo agent is installed there first), hooks that
        write the hooks file there, and the host's own minimal environment."""
        place = ctx.place
        plan = self.profile.plan(
            self._host_binary(place),
            prompt=prompt,
            session_dir=self.session_dir(ctx.session_id),
            hook_cmd=place.hook_command(ctx.session_id, incarnation),
        )
        if resume is not None:
            plan = self.profile.with_resume(plan, resume) or plan
        plan = self.profile.with_model(plan, ctx.model_id)
        if self.profile.name == "demo" and plan.argv[:1] == [sys.executable]:
            plan.argv = [place.facts().python3 or "python3", *plan.argv[1:]]
        plan.argv = self._files_to_host(place, ctx.session_id, plan.argv)
        env = place.env()
        env.update(plan.env_extra)
        env[SESSION_ENV] = ctx.session_id
        return plan, env

    def _files_to_host(self, place: Any, session_id: str, argv: list[str]) -> list[str]:
        """Files the profile made for this run in the session's directory here
        (Claude Code's `--settings`) are copied to the session's directory on
        the host, and the command names them there."""
        here = str(self.session_dir(session_id)).rstrip("/") + "/"
        there = place.session_dir(session_id) + "/"
        out = []
        for word in argv:
            if word.startswith(here):
                local, word = Path(word), there + word[len(here) :]
                if local.is_file():
                    place.put(word, local.read_bytes())
            out.append(word)
        return out

    def _host_binary(self, place: Any) -> str:
        """The agent's program on the host: corral's demo agent is copied
        there; any other agent must be installed there (checked at spawn)."""
        if self.profile.name == "demo":
            demo = Path(DEMO_AGENT)
            place.install("demo_agent/recipes.json", demo.with_name("recipes.json").read_bytes())
            return str(
                place.install("demo_agent/demo_agent.py", demo.read_bytes(), executable=True)
            )
        command = getattr(self.profile, "command", "")
        words = shlex.split(command) if command else list(self.profile.binaries[:1])
        if not words:
            raise AgentUnavailable(f"{self.profile.label} names no program to run")
        return words[0]

    def _launch(self, ctx: RunContext, plan: LaunchPlan, env: dict[str, str]) -> AgentLaunch:
        """The pane's command: in the sandbox when the operator confines this
        agent (`[sandbox] agents`, `[agents.<name>] sandbox`)."""
        if ctx.place is not None:
            place = ctx.place
            python = place.facts().python3
            argv, kept = plan.argv, ""
            if python:  # whatever it starts there still ends with it
                keeper = place.install("corral-keeper.py", KEEPER.read_bytes())
                argv, kept = kept_argv(plan.argv, python, keeper), "; under the pane keeper"
            return AgentLaunch(
                argv,
                env,
                confined=False,
                account=(
                    f"on host {place.name} in {ctx.remote_worktree}; corral's agent "
                    f"sandbox does not confine agents on other hosts{kept}"
                ),
            )
        dirs, files = self.profile.own_paths(env)
        if in_own_home(self.profile.name, self.session_dir(ctx.session_id), env):
            # the session's own home is all of the agent's config it may write
            # (the operator's `writable` entries name the operator's HOME)
            home = session_home(self.session_dir(ctx.session_id))
            dirs, files = [home], self.profile.writable_paths(os.environ)
        if self.profile.writes_session_dir:
            dirs = [*dirs, self.session_dir(ctx.session_id)]
        sockets = ensure_private_dir(agent_socket_dir(self.panes.hooks_root.parent, ctx.session_id))
        return launch_agent(
            plan.argv,
            ctx.worktree,
            env,
            policy=active_policy(),
            choice=self.profile.sandbox,
            own_dirs=dirs,
            own_files=files,
            hooks_file=self.panes.hooks_file(ctx.session_id),
            python=self.python,
            agent_socket_dir=sockets,
            inside=self.profile.inside_sandbox,
            env_files=self.profile.env_allow,
            # a one-shot preset (`claude-p`) reaches what its agent does
            agent=getattr(self.profile, "settings_key", self.profile.name),
            network_allow=self.profile.network_allow,
            network_hosts=self.profile.network_hosts,
        )

    async def _serve_network_again(self, ctx: RunContext) -> None:
        """A re-adopted confined agent's network: its proxy socket is served
        again with the allow-list it started with (none: it has the host's)."""
        if ctx.place is not None:
            return
        sockets = agent_socket_dir(self.panes.hooks_root.parent, ctx.session_id)
        socket = sockets / PROXY_SOCKET_NAME
        await serve_agent_again(ctx.session_id, socket, ctx.emit)

    async def _until_host_answers(self, ctx: RunContext, step: Callable[[], Awaitable[T]]) -> T:
        """Run a step of starting the agent; on a host that does not answer
        (a dropped connection, sshd away) that is an outage, not a failure:
        said once, then the step is tried again until the host answers, for
        up to HOST_START_WAIT_SECS. Here (no host) it runs once."""
        deadline = time.monotonic() + HOST_START_WAIT_SECS
        said = False
        pause = 0.5
        while True:
            try:
                return await step()
            except (HostUnreachable, HostDown) as exc:
                place = ctx.place
                if place is None:
                    raise
                if time.monotonic() >= deadline:
                    raise CorralError(
                        f"host {place.name} did not answer for {HOST_START_WAIT_SECS:.0f} s "
                        f"while the agent was starting: {exc}"
                    ) from exc
                if not said:
                    ctx.emit(
                        PlanTextData(
                            text=f"Host {place.name} does not answer ({exc}); the agent "
                            "starts when it does."
                        )
                    )
                    said = True
                await asyncio.sleep(pause)
                pause = min(pause * 2, 5.0)

    async def _spawn_pane(self, ctx: RunContext, spec: PaneSpec, backend: str | None) -> Any:
        """Start the pane; on a host whose connection dropped during the
        start, the pane may or may not exist there: once the host answers,
        the one carrying this start's owner marker is taken, else it starts
        anew (never two agents for one start)."""
        try:
            return await self.panes.spawn(spec, self.profile, backend=backend)
        except (HostUnreachable, HostDown):
            if ctx.place is None:
                raise
        there = self.panes.backend_named(backend)
        found = await self._until_host_answers(ctx, lambda: asyncio.to_thread(there.sweep))
        info = found.get(spec.owner)
        if info is not None:
            return self.panes.adopt(spec.session_id, info.handle, self.profile, backend=backend)
        return await self._until_host_answers(
            ctx, lambda: self.panes.spawn(spec, self.profile, backend=backend)
        )

    async def spawn(self, ctx: RunContext, prompt: str, resume: str | None = None) -> None:
        """Start the agent on `prompt`; with `resume`, continuing that
        conversation of its own (`claude --resume <id>`). Never once the
        session is being cancelled: a late retry must not outlive the cancel."""
        if ctx.stopping():
            raise asyncio.CancelledError
        # unique and increasing across restarts: a late action (or hook line)
        # meant for an old pane can never match the new owner marker
        incarnation = max(self.incarnations.get(ctx.session_id, 0) + 1, time.time_ns() // 1000)
        self.incarnations[ctx.session_id] = incarnation
        planner = self._plan if ctx.place is None else self._plan_on_host
        plan, env = await self._until_host_answers(
            ctx, lambda: asyncio.to_thread(planner, ctx, prompt, resume, incarnation)
        )
        launch = await asyncio.to_thread(self._launch, ctx, plan, env)
        if launch.network is not None and launch.proxy_socket is not None:
            # served before the agent starts: its first request must find it
            await serve_agent(ctx.session_id, launch.network, launch.proxy_socket, ctx.emit)
        backend = None if ctx.place is None else ctx.place.backend.name
        spec = PaneSpec(
            session_id=ctx.session_id,
            incarnation=incarnation,
            name=label(ctx.session_id),
            cwd=ctx.worktree if ctx.remote_worktree is None else Path(ctx.remote_worktree),
            argv=launch.argv,
            env=launch.env,
            width=self.size[0],
            height=self.size[1],
        )
        pane = {
            "owner": spec.owner,
            "agent": self.profile.name,
            "state": "starting",
            "backend": backend or self.panes.backend.name,
        }
        if ctx.place is not None:
            pane["host"] = ctx.place.name
        ctx.note_pane(pane)
        try:
            record = await self._spawn_pane(ctx, spec, backend)
        except BaseException:
            ctx.note_pane(None)
            raise
        ctx.note_pane(
            {**pane, "state": "live", "pane_id": record.handle.pane_id, "pid": record.handle.pid}
        )
        if plan.agent_session:  # named by corral at launch (Gemini, Aider), not by a hook
            ctx.note_agent_session(plan.agent_session, plan.transcript)
        ctx.emit(
            AgentStartedData(
                agent=self.profile.name,
                pane=record.handle.pane_id,
                incarnation=incarnation,
                started=plan.shown or " ".join(plan.argv[:1]),
                confined=launch.confined,
                sandbox=launch.account,
            ),
        )
        if plan.paste_prompt:
            await self._wait_ready(ctx)
            now = self.panes.record(ctx.session_id)
            if now is None or not now.alive:
                return  # it exited before asking for the task; the turn loop reads how
            try:
                await self.panes.send_text(ctx.session_id, plan.paste_prompt)
            except PasteUncertain as exc:
                # maybe it landed: pasting it again could start the task twice
                ctx.emit(
                    PlanTextData(
                        text=f"Could not tell whether the task landed: {exc}. Waiting for "
                        "the agent's turn; the checks decide what comes next."
                    )
                )
                return
            except PaneGone:
                if not self.profile.exit_ends_turn:
                    raise
                # it exited while the task was being pasted: the turn loop
                # sees the exit once the sweep has its status
                return
            self.panes.prompted(ctx.session_id, self.panes.clock())

    async def _wait_ready(self, ctx: RunContext, timeout: float = 60) -> None:
        """Until the agent shows its idle prompt (for agents given the task by paste)."""
        deadline = time.monotonic() + timeout
        record = self.panes.record(ctx.session_id)
        version = record.status_version if record else 0
        while time.monotonic() < deadline:
            record = self.panes.record(ctx.session_id)
            if record is None or not record.alive:
                return
            if record.status.status is AgentStatus.IDLE:
                return
            version = await self.panes.wait_change(ctx.session_id, version, 1.0)

    # -- the run ------------------------------------------------------------------

    async def run(self, ctx: RunContext) -> EngineOutcome:
        retries = self.transient_retries
        try:
            record = self.panes.record(ctx.session_id)
            if record is not None and ctx.round == 1 and record.alive:
                await self._serve_network_again(ctx)
                ctx.emit(
                    PlanTextData(
                        text=(
                            f"Re-adopted the running {self.profile.label} pane; waiting for its turn "
                            "to end."
                        )
                    ),
                )
                start_version, resumed = record.status_version, True
                since: float | None = None
            elif ctx.round == 1 or record is None or not record.alive:
                resume = ctx.resume_id() if self.profile.resumable else None
                text = RESUMED if resume else task_prompt(ctx.intent, ctx.contract)
                if ctx.round > 1 and ctx.failing_checks:  # a new process: the task, then the repair
                    text += "\n\n" + repair_prompt(ctx.failing_checks, ctx.round, ctx.rounds_left)
                if record is not None:  # its finished pane (tmux keeps it after the exit)
                    await self.panes.kill(ctx.session_id)
                since = time.monotonic()
                if resume:
                    ctx.emit(
                        PlanTextData(text=f"Resuming {self.profile.label}'s conversation {resume}.")
                    )
                await self.spawn(ctx, text, resume)
                start_version, resumed = 0, False
            else:
                text = repair_prompt(ctx.failing_checks, ctx.round, ctx.rounds_left)
                # the agent is at its idle prompt: waiting guidance and messages ride along
                notes = ctx.take_guidance()
                if notes:
                    text += "\n\n" + guidance_prompt(notes)
                messages = ctx.take_messages()
                if messages:
                    text += "\n\n" + message_prompt(messages)
                since = time.monotonic()
                try:
                    await self._paste(ctx, text, notes, messages)
                except PasteUncertain as exc:
                    # maybe it landed: pasting again could start the repair twice
                    ctx.emit(
                        PlanTextData(
                            text=f"Could not tell whether the repair prompt landed: {exc}. "
                            "Waiting for the agent's turn; the checks decide what comes next."
                        )
                    )
                start_version, resumed = record.status_version, False
            while True:
                outcome = await self._await_turn(ctx, resumed=resumed, since=since)
                if outcome is not None:
                    return outcome
                record = self.panes.record(ctx.session_id)
                if (
                    self.profile.exit_ends_turn
                    and record is not None
                    and not record.alive
                    and record.exit_status == 0
                ):
                    ctx.emit(
                        PlanTextData(text=f"{self.profile.label} exited with status 0: turn over.")
                    )
                    return EngineOutcome(iterations=1, authored_by=[self.profile.name])
                # the agent crashed, or was stopped with `corral panes stop`
                reason = record.status.reason if record else "the pane disappeared"
                meant = self.panes.stopped_on_purpose(ctx.session_id)
                if meant:
                    reason, retries = "stopped with `corral panes stop`; not started again", 0
                if retries <= 0 and self.profile.resumable and ctx.resume_id():
                    return EngineOutcome(
                        dormant=True,
                        error=f"{self.profile.label} stopped ({reason})",
                        iterations=1,
                    )
                if retries <= 0:
                    return EngineOutcome(
                        failure=LoopFailure.EXECUTION,
                        error=f"external agent '{self.profile.name}' failed: {reason}",
                        iterations=1,
                        keep_worktree=meant,
                    )
                retries -= 1
                ctx.emit(
                    PlanTextData(
                        text=(
                            f"{self.profile.label} stopped ({reason}); starting it again once "
                            "(transient retry)."
                        )
                    ),
                )
                await self.panes.kill(ctx.session_id)
                resume = ctx.resume_id() if self.profile.resumable else None
                prompt = (
                    RESUMED
                    if resume
                    else task_prompt(ctx.intent, ctx.contract)
                    + "\n\nA previous attempt stopped unexpectedly; the worktree keeps its edits."
                )
                since = time.monotonic()
                await self.spawn(ctx, prompt, resume)
                resumed = False
                del start_version
                start_version = 0
        except AgentUnavailable as exc:
            return EngineOutcome(failure=LoopFailure.ENGINE_UNAVAILABLE, error=str(exc))
        except (PaneError, PaneGone) as exc:
            return EngineOutcome(
                failure=LoopFailure.INFRASTRUCTURE,
                error=f"external agent '{self.profile.name}' failed: {exc}",
            )
        except asyncio.CancelledError:
            if not ctx.detaching():  # the operator cancelled: stop the agent
                with swallowed(log, "stopping the agent's pane on cancel"):
                    await asyncio.shield(self.panes.kill(ctx.session_id, timeout=CANCEL_TERM_SECS))
            raise

    async def _await_turn(
        self, ctx: RunContext, *, resumed: bool, since: float | None = None
    ) -> EngineOutcome | None:
        """Until the agent ends a turn (outcome) or dies (None). `since`: when
        this round began; a turn corral's paste started then has ended when
        the tracker says so, however fast it was."""
        record = self.panes.record(ctx.session_id)
        if record is None:
            return None
        turns_at_start = record.tracker.turn_ends
        seen_running = resumed and record.status.status is AgentStatus.RUNNING
        started = time.monotonic()
        shown: float | None = None  # when its screen first read as something
        version = record.status_version
        asked: tuple[str, tuple[str, ...]] | None = None
        signed_out = False
        limits_said = record.tracker.limits
        while True:
            record = self.panes.record(ctx.session_id)
            if record is None or not record.alive:
                return None
            limits_said = self._say_limits(ctx, record.tracker, limits_said)
            reading = record.status
            if shown is None and reading.status is not AgentStatus.UNKNOWN:
                shown = time.monotonic()
            if reading.status is AgentStatus.AUTH:
                # not a turn's end and not the agent's fault: no verification,
                # no repair prompt; the operator signs it in (or cancels)
                if not signed_out:
                    signed_out = True
                    ctx.emit(AuthRequiredData(message=f"{self.profile.label}: {reading.reason}"))
                version = await self.panes.wait_change(ctx.session_id, version, 1.0)
                continue
            if signed_out:
                if reading.status is not AgentStatus.RUNNING:
                    version = await self.panes.wait_change(ctx.session_id, version, 1.0)
                    continue
                signed_out = False
                ctx.emit(PlanTextData(text=f"{self.profile.label} is signed in and working again."))
            if reading.status is AgentStatus.RUNNING:
                seen_running = True
            if reading.status is AgentStatus.WAITING and reading.question is not None:
                key = (reading.question.prompt, reading.question.options)
                if key != asked:
                    asked = key
                    if not await self._ask(ctx, reading.question):
                        asked = None  # it did not land: ask again while it is on screen
                    version = record.status_version
                    continue
            if reading.status is AgentStatus.IDLE and (
                record.tracker.turn_ends > turns_at_start
                or seen_running
                or (since is not None and record.tracker.prompted_turn_ended(since))
                or time.monotonic() - (shown or started) > TURN_START_GRACE
            ):
                turns_before = record.tracker.turn_ends
                began = time.monotonic()
                # what it printed last, read before the turn is settled: its
                # hook can end the turn before the sweep saw a refusal line
                await self.panes.read_now(ctx.session_id)
                limits_said = self._say_limits(ctx, record.tracker, limits_said)
                if await self._deliver_guidance(ctx):
                    # the agent took the guidance: this round ends with that turn
                    turns_at_start, seen_running = turns_before, False
                    started = since = began
                    shown = None
                    continue
                return EngineOutcome(iterations=1, authored_by=[self.profile.name])
            recheck = IDLE_RECHECK_SECS if reading.status is AgentStatus.IDLE else BUSY_RECHECK_SECS
            version = await self.panes.wait_change(ctx.session_id, version, recheck)

    def _say_limits(self, ctx: RunContext, tracker: StatusTracker, said: int) -> int:
        """Each rate-limit or quota refusal the agent reported since `said`
        (its screen's error line, its hook) as a typed `blocked` event, by
        its provider; returns how many are said now."""
        if tracker.limits > said:
            ctx.emit(
                BlockedData(
                    what=f"{self.profile.label}'s model request",
                    why=tracker.limit or "rate limited",
                    by=BLOCKED_BY_PROVIDER,
                )
            )
        return max(tracker.limits, said)

    async def _deliver_guidance(self, ctx: RunContext) -> bool:
        """Paste the waiting guidance and messages at the agent's idle prompt
        (only into the pane seen idle); True when it landed (the agent starts
        a turn on it)."""
        record = self.panes.record(ctx.session_id)
        if record is None or not record.alive or record.status.status is not AgentStatus.IDLE:
            return False
        notes = ctx.take_guidance()
        messages = ctx.take_messages()
        if not notes and not messages:
            return False
        parts = ([guidance_prompt(notes)] if notes else []) + (
            [message_prompt(messages)] if messages else []
        )
        try:
            await self._paste(
                ctx, "\n\n".join(parts), notes, messages, incarnation=record.incarnation
            )
        except PaneGone:
            raise
        except PaneError:
            return False  # reported as not delivered; the turn's outcome stands
        return True

    async def _paste(
        self,
        ctx: RunContext,
        text: str,
        notes: list[str],
        messages: list[Message] | None = None,
        *,
        incarnation: int | None = None,
    ) -> None:
        """Paste `text` (confirmed on screen before Enter) and report each
        guidance note it carries as delivered or not and why, and each message
        as accepted, rejected (its pane was gone) or ambiguous (not confirmed)."""
        messages = messages or []
        try:
            await self.panes.send_text(ctx.session_id, text, incarnation=incarnation)
        except asyncio.CancelledError:
            reason = "the run stopped while it was being pasted; it may show unsent"
            self._not_delivered(ctx, notes, reason)
            if messages:
                ctx.messages_ended(messages, MESSAGE_AMBIGUOUS, reason)
            raise
        except Exception as exc:
            self._not_delivered(ctx, notes, f"the paste into the agent's pane failed: {exc}")
            if messages:
                gone = isinstance(exc, PaneGone)
                ctx.messages_ended(
                    messages,
                    MESSAGE_REJECTED if gone else MESSAGE_AMBIGUOUS,
                    f"the agent's pane was gone: {exc}"
                    if gone
                    else f"the paste was not confirmed (it may show unsent): {exc}",
                )
            raise
        landed = self.panes.clock()
        for note in notes:
            ctx.emit(OperatorGuidanceData(text=note, status=GUIDANCE_DELIVERED))
        if messages:
            ctx.messages_ended(messages, MESSAGE_ACCEPTED, None)
        self.panes.prompted(ctx.session_id, landed)

    @staticmethod
    def _not_delivered(ctx: RunContext, notes: list[str], reason: str) -> None:
        for note in notes:
            ctx.emit(OperatorGuidanceData(text=note, status=GUIDANCE_NOT_DELIVERED, reason=reason))

    async def _ask(self, ctx: RunContext, question: Question) -> bool:
        """Park the session on the question gate until the operator answers or
        the question leaves the screen (answered in the pane itself). False
        when an answer was given but not seen to land (the caller asks again)."""
        asking = asyncio.ensure_future(ctx.ask_user(question.prompt, list(question.options)))
        record = self.panes.record(ctx.session_id)
        version = record.status_version if record else 0
        try:
            while not asking.done():
                record = self.panes.record(ctx.session_id)
                if record is None or not record.alive:
                    return True
                current = record.status
                if current.status in (AgentStatus.EXITED, AgentStatus.ERROR):
                    return True
                if current.status is not AgentStatus.WAITING or current.question != question:
                    ctx.emit(PlanTextData(text="The question was answered in the pane."))
                    return True
                waiter = asyncio.ensure_future(self.panes.wait_change(ctx.session_id, version, 1.0))
                await asyncio.wait({asking, waiter}, return_when=asyncio.FIRST_COMPLETED)
                if waiter.done():
                    version = waiter.result()
                else:
                    waiter.cancel()
            try:
                answer = asking.result()
            except CorralError as exc:  # expired: the agent keeps waiting; say so
                ctx.emit(PlanTextData(text=f"No answer: {exc}"))
                return True
            landing = await self.panes.choose(ctx.session_id, question, answer)
            if not landing.landed:
                ctx.emit(
                    PlanTextData(text=f"The answer {answer!r} did not land: {landing.detail}.")
                )
                return False
            ctx.emit(
                PaneAnswerData(question=question.prompt, answer=answer, action=landing.detail),
            )
            if DECLINED.match(answer.strip()):  # the operator said no, and it landed
                ctx.emit(
                    BlockedData(
                        what=question.prompt,
                        why=f"the operator chose {answer.strip()!r}",
                        by=BLOCKED_BY_OPERATOR,
                    )
                )
            return True
        finally:
            if not asking.done():
                asking.cancel()
                ctx.withdraw_question()
