"""One session while this process runs it: the stored snapshot plus what only
a running supervisor has (event log, attention, pending question, steering,
workspace, tasks)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from ..git.stats import GitStats
from ..git.workspace import GitWorkspace
from ..llm.chain import Ledger
from ..models import CoderSession
from ..status import StatusReading
from .active_context import ActiveContext
from .attention import AttentionState
from .journal import EventLog
from .questions import PendingQuestion, SteeringQueue


@dataclass(eq=False)
class LiveSession:
    session: CoderSession
    log: EventLog
    attention: AttentionState = field(default_factory=AttentionState)
    question: PendingQuestion = field(default_factory=PendingQuestion)
    steering: SteeringQueue = field(default_factory=SteeringQueue)
    workspace: GitWorkspace | None = None
    task: asyncio.Task[None] | None = None  # the run loop, while it runs
    ops: set[asyncio.Task[object]] = field(default_factory=set)  # drafting, revisions, clean-up
    cancel_requested: bool = False
    agent_status: StatusReading | None = None
    active_context: ActiveContext = field(default_factory=ActiveContext)  # its agent's work time
    git_stats: GitStats | None = None  # files/lines changed, base lead (session.git_stats)
    # What the models served for this session since it was last recorded.
    model_ledger: Ledger = field(default_factory=Ledger)
    # The agent's report that the task cannot be done as specified (its
    # reason), until the run loop hands it to the operator.
    impossible: str | None = None

    @property
    def id(self) -> str:
        return self.session.id

    @property
    def task_running(self) -> bool:
        return self.task is not None and not self.task.done()
