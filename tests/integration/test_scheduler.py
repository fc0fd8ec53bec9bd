"""Scheduled tasks: stored in SQLite (they survive a restart), run when due
through the same calls an operator makes, each run recorded with what it
did or why it could not (the last 200 per task)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from corral.supervisor.errors import CorralError
from corral.supervisor.models import TaskRun
from corral.supervisor.scheduler import new_task, next_run
from corral.supervisor.store import Store
from tests.conftest import SupervisorFactory, eventually, own_store, stored_task_runs


async def test_a_due_start_task_starts_a_session_once_and_is_done(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    sup = await make_supervisor()
    task = await sup.add_task(
        "nightly hello",
        action="start",
        params={"intent": "say hi", "repo": str(repo)},
        at=time.time() - 1,
    )
    await sup.run_due_tasks()  # or its own pass ran it already
    [run] = await eventually(lambda: stored_task_runs(sup.state_dir, task.id))
    assert run.ok and run.detail.startswith("started corral-")
    assert await sup.run_due_tasks() == []  # once means once
    assert [r.intent for r in sup.list()] == ["say hi"]
    [stored] = await sup.tasks()
    assert stored.id == task.id and not stored.enabled and stored.next_run is None
    assert [r.detail for r in await sup.task_runs(task.id)] == [run.detail]


async def test_a_task_that_cannot_act_records_why_and_keeps_its_schedule(
    make_supervisor: SupervisorFactory,
) -> None:
    sup = await make_supervisor()
    task = await sup.add_task(
        "ping", action="send", params={"target": "nope", "text": "hi"}, every=60
    )
    task.next_run = time.time() - 1
    with own_store(sup.state_dir, readonly=False) as store:
        store.save_task(task)
    await sup.run_due_tasks()
    [run] = await eventually(lambda: stored_task_runs(sup.state_dir, task.id))
    assert not run.ok and "no corral session 'nope'" in run.detail
    [again] = await sup.tasks()
    assert again.enabled and again.next_run is not None and again.next_run > time.time() + 50


async def test_tasks_survive_a_restart_and_keep_only_their_last_200_runs(
    make_supervisor: SupervisorFactory, state_dir: Path
) -> None:
    sup = await make_supervisor()
    task = await sup.add_task(
        "weekday", action="revive", params={"session": "x"}, cron="0 9 * * 1-5"
    )
    with own_store(sup.state_dir, readonly=False) as store:
        for i in range(205):
            store.add_task_run(TaskRun(task_id=task.id, at=float(i), ok=True, detail=str(i)))
    await sup.close()
    reader = Store(state_dir, readonly=True)
    try:
        assert [t.name for t in reader.list_tasks()] == ["weekday"]
        runs = reader.task_runs(task.id)
    finally:
        reader.close()
    assert len(runs) == 200 and runs[0].detail == "204" and runs[-1].detail == "5"


def test_schedules_that_could_never_run_are_refused() -> None:
    with pytest.raises(CorralError, match="exactly one schedule"):
        new_task("x", action="revive", params={"session": "s"})
    with pytest.raises(CorralError, match="not a cron expression"):
        new_task("x", action="revive", params={"session": "s"}, cron="every day")
    with pytest.raises(CorralError, match="a send task needs text"):
        new_task("x", action="send", params={"target": "s"}, every=5)
    with pytest.raises(CorralError, match="unknown action"):
        new_task("x", action="delete", params={}, every=5)


def test_a_cron_task_runs_at_its_next_matching_minute() -> None:
    task = new_task("x", action="revive", params={"session": "s"}, cron="*/15 * * * *")
    at = next_run(task, 1_800_000_000.0)  # 2027-01-15 08:00 UTC, a quarter hour
    assert at is not None and at - 1_800_000_000.0 == 15 * 60


async def test_a_scheduled_start_takes_its_contract_and_still_stops_at_gate_1(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    from corral.supervisor.contracts.files import checks_contract
    from corral.supervisor.errors import CorralError
    from corral.supervisor.states import CoderState

    sup = await make_supervisor()
    contract = checks_contract(["grep -q hi hello.txt"])
    params = {"intent": "say hi", "repo": str(repo), "contract": contract.model_dump_json()}
    task = await sup.add_task("with checks", action="start", params=params, at=time.time() - 1)
    await sup.run_due_tasks()
    await eventually(lambda: stored_task_runs(sup.state_dir, task.id))
    [row] = sup.list()
    assert row.state is CoderState.CONTRACT_PROPOSED  # a person still confirms it
    given = sup.get(row.session_id).session.contract
    assert given is not None and [c.command for c in given.checks] == ["grep -q hi hello.txt"]
    with pytest.raises(CorralError, match="the task's contract is not a contract"):
        await sup.add_task("bad", action="start", at=time.time() + 60,
                           params={**params, "contract": '{"checks": 3}'})  # fmt: skip
