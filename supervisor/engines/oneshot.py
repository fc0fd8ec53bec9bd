"""The one-shot engine: each round runs a command that does the work and exits.

Round 1 runs the command with the task prompt (the intent, the confirmed
contract, the constraints); each repair round runs it again, in the same
worktree, with the task plus the failing checks and their output. The
command runs in its own pane like any agent (started by the external
engine's spawn: scrubbed environment, recursion guard, owner marker), so the
operator can watch it, and the pane stays after the exit so its output can
be read. Exit 0 ends the round and the runtime verifies; any other status
fails the session: `one-shot agent '<command>' exited with status N`, with
the last lines of its output. Guidance queued for the agent rides with the
next run's prompt; a run cannot be talked to mid-way.
"""

from __future__ import annotations

import asyncio
import logging

from ..agents.base import AgentUnavailable
from ..agents.oneshot import OneShotProfile
from ..errors import swallowed
from ..events import GUIDANCE_DELIVERED, OperatorGuidanceData, PlanTextData
from ..panes.base import PaneError, PaneGone
from ..panes.manager import PaneManager
from ..states import LoopFailure
from ..status import ANSI
from .base import EngineOutcome, RunContext
from .external import ExternalEngine, guidance_prompt, repair_prompt, task_prompt

log = logging.getLogger("corral.supervisor.engines.oneshot")

TAIL_LINES = 20
# what tmux (remain-on-exit) writes under a finished program's output
_DEAD_BANNER = ("Pane is dead",)


class OneShotEngine:
    """Runs a `OneShotProfile` once per round in a pane of `panes`."""

    def __init__(self, spawner: ExternalEngine, label: str) -> None:
        if not isinstance(spawner.profile, OneShotProfile):
            raise TypeError("the one-shot engine runs one-shot profiles only")
        self.spawner = spawner
        self.profile: OneShotProfile = spawner.profile
        self.panes: PaneManager = spawner.panes
        self.label = label

    def prompt(self, ctx: RunContext) -> str:
        """A one-shot command remembers nothing between runs: a repair run
        gets the whole task again, then what still fails."""
        text = task_prompt(ctx.intent, ctx.contract)
        if ctx.round > 1 and ctx.failing_checks:
            text += "\n\n" + repair_prompt(ctx.failing_checks, ctx.round, ctx.rounds_left)
        return text

    async def run(self, ctx: RunContext) -> EngineOutcome:
        sid = ctx.session_id
        try:
            record = self.panes.record(sid)
            if record is not None and record.alive and ctx.round == 1:
                ctx.emit(
                    PlanTextData(
                        text=f"Re-adopted the running {self.profile.label}; waiting for it to exit."
                    )
                )
            else:
                if record is not None:  # the previous run's finished pane
                    await self.panes.kill(sid)
                text = self.prompt(ctx)
                notes = ctx.take_guidance()
                if notes:
                    text += "\n\n" + guidance_prompt(notes)
                await self.spawner.spawn(ctx, text)
                for note in notes:
                    ctx.emit(OperatorGuidanceData(text=note, status=GUIDANCE_DELIVERED))
            status = await self._await_exit(ctx)
            if status == 0:
                return EngineOutcome(iterations=1, authored_by=[self.profile.name])
            tail = await self._tail(sid)
            what = (
                f"exited with status {status}"
                if status is not None
                else "disappeared before its exit status was known"
            )
            error = f"one-shot agent '{self.profile.command}' {what}"
            if tail:
                error += "; its last output:\n" + "\n".join(tail)
            ctx.emit(PlanTextData(text=error))  # the event log keeps the tail too
            return EngineOutcome(failure=LoopFailure.EXECUTION, error=error, iterations=1)
        except AgentUnavailable as exc:
            return EngineOutcome(failure=LoopFailure.ENGINE_UNAVAILABLE, error=str(exc))
        except (PaneError, PaneGone) as exc:
            return EngineOutcome(
                failure=LoopFailure.INFRASTRUCTURE,
                error=f"one-shot agent '{self.profile.command}' failed: {exc}",
            )
        except asyncio.CancelledError:
            if not ctx.detaching():  # the operator cancelled: stop the command
                with swallowed(log, "stopping the one-shot command on cancel"):
                    await asyncio.shield(self.panes.kill(sid, timeout=3.0))
            raise

    async def _await_exit(self, ctx: RunContext) -> int | None:
        """The command's exit status once its pane reports it (None: the pane vanished)."""
        record = self.panes.record(ctx.session_id)
        version = record.status_version if record else 0
        while True:
            record = self.panes.record(ctx.session_id)
            if record is None:
                return None
            if not record.alive:
                return record.exit_status
            version = await self.panes.wait_change(ctx.session_id, version, 1.0)

    async def _tail(self, session_id: str) -> list[str]:
        """The last lines the command printed (tmux's own banner left out)."""
        try:
            lines = await self.panes.scrollback(session_id, 500)
        except PaneError:
            record = self.panes.record(session_id)
            lines = list(record.screen.lines) if record and record.screen else []
        plain = [ANSI.sub("", line).rstrip() for line in lines]
        plain = [line for line in plain if not line.startswith(_DEAD_BANNER)]
        while plain and not plain[-1]:
            plain.pop()
        return plain[-TAIL_LINES:]
