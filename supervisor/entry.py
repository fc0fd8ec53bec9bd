"""The live registry row of one session: its snapshot plus everything only a
running supervisor has (event log, attention, question gate, steering, tasks)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from .attention import AttentionState
from .events import EventLog
from .gates import QuestionGate, SteeringQueue
from .git.workspace import GitWorkspace
from .models import CoderSession
from .status import StatusReading


@dataclass(eq=False)
class SessionEntry:
    session: CoderSession
    log: EventLog
    attention: AttentionState = field(default_factory=AttentionState)
    gate: QuestionGate = field(default_factory=QuestionGate)
    steering: SteeringQueue = field(default_factory=SteeringQueue)
    workspace: GitWorkspace | None = None
    task: asyncio.Task[None] | None = None
    ops: set[asyncio.Task[object]] = field(default_factory=set)
    cancel_requested: bool = False
    agent_status: StatusReading | None = None

    @property
    def id(self) -> str:
        return self.session.id

    @property
    def task_running(self) -> bool:
        return self.task is not None and not self.task.done()
