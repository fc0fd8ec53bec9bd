"""Scheduled tasks: corral starting a session, sending a message or
reviving a session on its own, once, every N seconds, or on a cron
expression. Tasks and their last runs live in the store (SQLite), so a
schedule survives a restart; a task that came due while corral was closed
runs once when it opens, never once per missed time.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from datetime import datetime

from .cancelling import cancel_and_wait
from .errors import CorralError
from .models import OutcomeContract, ScheduledTask, TaskRun
from .store import Store

log = logging.getLogger("corral.scheduler")

NEEDED = {"start": ("intent", "repo"), "send": ("target", "text"), "revive": ("session",)}


def next_run(task: ScheduledTask, now: float) -> float | None:
    """When `task` runs next after `now` (None: never again)."""
    if task.schedule == "once":
        return task.at if task.at is not None and task.at > now else None
    if task.schedule == "interval":
        assert task.every is not None
        return now + task.every
    assert task.cron is not None
    from croniter import croniter  # here: its import costs the console's start ~20 ms

    return float(croniter(task.cron, datetime.fromtimestamp(now)).get_next(float))


def _cron_valid(expression: str) -> bool:
    from croniter import croniter

    return bool(croniter.is_valid(expression))


def new_task(
    name: str,
    *,
    action: str,
    params: dict[str, str],
    at: float | None = None,
    every: float | None = None,
    cron: str | None = None,
    now: float | None = None,
) -> ScheduledTask:
    """A validated task with its first run set; refuses, with the reason, a
    schedule or action that could never run."""
    given = [k for k, v in (("at", at), ("every", every), ("cron", cron)) if v is not None]
    if len(given) != 1:
        raise CorralError("a task needs exactly one schedule: --at, --every or --cron")
    if action not in NEEDED:
        raise CorralError(f"unknown action {action!r}: start, send or revive")
    missing = [k for k in NEEDED[action] if not params.get(k, "").strip()]
    if missing:
        raise CorralError(f"a {action} task needs {', '.join(missing)}")
    if action == "start" and params.get("contract"):
        from pydantic import ValidationError

        try:
            OutcomeContract.model_validate_json(params["contract"])
        except ValidationError as exc:
            raise CorralError(
                f"the task's contract is not a contract: {exc.errors()[0]['msg']}"
            ) from exc
    if every is not None and every < 1:
        raise CorralError("an interval is at least 1 second")
    if cron is not None and not _cron_valid(cron):
        raise CorralError(f"{cron!r} is not a cron expression (five fields: m h dom mon dow)")
    now = time.time() if now is None else now
    schedule = "once" if at is not None else "interval" if every is not None else "cron"
    task = ScheduledTask(
        id=secrets.token_hex(4),
        name=name.strip() or action,
        schedule=schedule,  # type: ignore[arg-type]
        at=at,
        every=every,
        cron=cron,
        action=action,  # type: ignore[arg-type]
        params=params,
        created_at=now,
    )
    task.next_run = at if at is not None else next_run(task, now)
    return task


def find_task(store: Store | None, task_id: str) -> ScheduledTask:
    if store is None:
        raise CorralError("the supervisor is not open: call open() first")
    task = next((t for t in store.list_tasks() if t.id == task_id), None)
    if task is None:
        raise CorralError(f"no scheduled task '{task_id}' (`corral tasks` lists them)")
    return task


class Scheduler:
    """Runs due tasks through `act` (the facade's start/send/revive) and
    records each run, kept to the last 200 per task."""

    def __init__(
        self,
        store: Callable[[], Store | None],
        act: Callable[[ScheduledTask], Awaitable[str]],
        *,
        clock: Callable[[], float] = time.time,
        tick: float = 1.0,
    ) -> None:
        self._store = store
        self._act = act
        self._clock = clock
        self._tick = tick
        self._task: asyncio.Task[None] | None = None
        self._pass = asyncio.Lock()  # one pass at a time: a due task runs once

    async def run_due(self) -> list[TaskRun]:
        """Run every task that is due now; returns their runs."""
        async with self._pass:
            return await self._run_due()

    async def _run_due(self) -> list[TaskRun]:
        store = self._store()
        if store is None:
            return []
        runs = []
        now = self._clock()
        for task in store.list_tasks():
            if task.paused or not task.enabled or task.next_run is None or task.next_run > now:
                continue
            run = await self._run_one(task, now)
            task.next_run = next_run(task, now)
            task.enabled = task.next_run is not None
            store.save_task(task)
            store.add_task_run(run)
            runs.append(run)
        return runs

    async def _run_one(self, task: ScheduledTask, now: float) -> TaskRun:
        try:
            return TaskRun(task_id=task.id, at=now, ok=True, detail=await self._act(task))
        except CorralError as exc:
            return TaskRun(task_id=task.id, at=now, ok=False, detail=str(exc))
        except Exception as exc:  # a task must never stop the scheduler
            log.exception("scheduled task %s failed", task.id)
            return TaskRun(task_id=task.id, at=now, ok=False, detail=f"corral error: {exc}")

    async def run_now(self, task_id: str) -> TaskRun:
        """Run one task now, out of its schedule (paused or not), and record
        the run; its next scheduled run stays as it was."""
        async with self._pass:
            store = self._store()
            task = find_task(store, task_id)
            assert store is not None
            run = await self._run_one(task, self._clock())
            store.add_task_run(run)
            return run

    def pause(self, task_id: str, paused: bool) -> ScheduledTask:
        """Pause a task (kept, never run until resumed) or resume it: an
        interval or cron task resumes from now, never with the runs it
        missed while paused."""
        store = self._store()
        task = find_task(store, task_id)
        assert store is not None
        task.paused = paused
        if not paused and task.schedule != "once":
            task.next_run = next_run(task, self._clock())
        store.save_task(task)
        return task

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait([self._task], what="the scheduler")
            self._task = None

    async def _loop(self) -> None:
        while True:
            try:
                await self.run_due()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("the scheduler's pass failed")
            await asyncio.sleep(self._tick)
