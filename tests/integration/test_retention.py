"""When finished sessions leave memory and disk: memory after the retention
window, disk beyond the newest sessions or past the age limit, never while a
session is unfinished, live, unstored or still running a task."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from corral.supervisor.models import CoderSession
from corral.supervisor.states import TERMINAL_STATES, CoderState
from corral.supervisor.store.retention import (
    FINISHED_SESSION_RETENTION_SECS,
    collectable_by_age,
    disk_gc_victims,
)
from tests.conftest import Clock, SupervisorFactory, own_store, stored_session
from tests.fakes.scripted import ScriptedEngine, Wait
from tests.integration.conftest import OwnerFactory

S = CoderState
NOW = 1_700_000_000.0
DAY = 86400.0


# --- collectable_by_age ---------------------------------------------------------------


def test_the_default_window_is_thirty_minutes() -> None:
    assert FINISHED_SESSION_RETENTION_SECS == 1800


@pytest.mark.parametrize(
    "age,collected",
    [(0, False), (1, False), (1799, False), (1799.999, False), (1800, True), (DAY, True)],
)
def test_a_finished_session_is_collected_only_after_retention(age: float, collected: bool) -> None:
    assert collectable_by_age(True, NOW - age, NOW) is collected


def test_a_backwards_clock_does_not_collect() -> None:
    assert not collectable_by_age(True, NOW + 10, NOW)
    assert not collectable_by_age(True, NOW + DAY, NOW)


@pytest.mark.parametrize("age", [0, 1800, DAY, 365 * DAY])
def test_an_unfinished_session_is_never_collected(age: float) -> None:
    assert not collectable_by_age(False, NOW - age, NOW)


def test_a_custom_window() -> None:
    assert collectable_by_age(True, NOW - 5, NOW, retention=5)
    assert not collectable_by_age(True, NOW - 4, NOW, retention=5)
    assert collectable_by_age(True, NOW, NOW, retention=0)


def test_only_the_four_terminal_states_are_collectable() -> None:
    collectable = {s for s in S if collectable_by_age(s.is_terminal, NOW - DAY, NOW)}
    assert collectable == {S.MERGED, S.REPORTED, S.FAILED, S.ABANDONED} == TERMINAL_STATES


# --- leaving the live registry --------------------------------------------------------


async def test_a_stale_finished_session_leaves_memory_on_the_next_start(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    clock = Clock(NOW)
    sup = await make_supervisor(clock=clock)
    old = (await sup.start("first", repo)).session_id
    await sup.cancel(old)
    assert sup.get(old).session.state is S.ABANDONED
    assert sup.get(old).session.updated_at == NOW

    clock.advance(1799)
    second = (await sup.start("second", repo)).session_id
    assert sup.is_live(old), "a fresh failure stays in memory"

    clock.advance(1)  # exactly 1800 s after it finished
    third = (await sup.start("third", repo)).session_id
    assert not sup.is_live(old)
    assert sup.is_live(second) and sup.is_live(third)

    # it is still listed, from the store, as a stored row
    rows = {r.session_id: r for r in sup.list()}
    assert set(rows) == {old, second, third}
    assert rows[old].live is False
    assert rows[old].state is S.ABANDONED
    assert rows[old].needs_you is None and rows[old].next_seq is None
    assert sup.get(old).live is False
    assert stored_session(sup.state_dir, old) is not None
    result = await sup.cancel(old)
    assert result.already_terminal and result.message and "nothing to cancel" in result.message


async def test_an_unfinished_session_is_never_pruned(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    clock = Clock(NOW)
    sup = await make_supervisor(clock=clock)
    waiting = (await sup.start("first", repo)).session_id  # at contract_proposed
    clock.advance(DAY)
    await sup.start("second", repo)
    assert sup.is_live(waiting)


async def test_a_finished_session_with_no_snapshot_is_never_pruned(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    clock = Clock(NOW)
    sup = await make_supervisor(clock=clock)
    old = (await sup.start("first", repo)).session_id
    await sup.cancel(old)
    with own_store(sup.state_dir, readonly=False) as store:
        store.delete_sessions([old])  # the entry is now the only copy
    clock.advance(DAY)
    await sup.start("second", repo)
    assert sup.is_live(old)


async def test_a_finished_session_with_a_running_task_is_never_pruned(
    make_owner: OwnerFactory, repo: Path
) -> None:
    clock = Clock(NOW)
    hold = asyncio.Event()
    sup, registry = await make_owner(clock=clock, engine=ScriptedEngine([[Wait(hold)]]))
    sid = (await sup.start("first", repo)).session_id
    await sup.confirm(sid)
    entry = registry.live(sid)
    # a terminal snapshot whose task has not ended yet (e.g. mid-teardown)
    entry.session.state = S.FAILED
    with own_store(sup.state_dir, readonly=False) as store:
        store.save_session(entry.session)
    clock.advance(DAY)
    await sup.start("second", repo)
    assert sup.is_live(sid)
    hold.set()


# --- disk GC ----------------------------------------------------------------------------


def stored(sid: str, state: CoderState, age: float) -> CoderSession:
    return CoderSession(id=sid, repo="/r", intent="x", state=state, updated_at=NOW - age)


def test_disk_gc_never_picks_live_or_unfinished_sessions() -> None:
    sessions = [
        stored("run", S.RUNNING, 400 * DAY),
        stored("gate", S.NEEDS_APPROVAL, 400 * DAY),
        stored("proposed", S.CONTRACT_PROPOSED, 400 * DAY),
        stored("live-old", S.FAILED, 400 * DAY),
        stored("old", S.MERGED, 400 * DAY),
        stored("new", S.ABANDONED, 1),
    ]
    victims = disk_gc_victims(sessions, {"live-old"}, now=NOW, max_sessions=500, max_age_days=30)
    assert victims == ["old"]
    # even with room for a single session, nothing unfinished or live is chosen
    victims = disk_gc_victims(sessions, {"live-old"}, now=NOW, max_sessions=1, max_age_days=1000)
    assert sorted(victims) == ["new", "old"]


def test_disk_gc_keeps_the_newest_finished_sessions_up_to_the_cap() -> None:
    sessions = [stored(f"t{i}", S.MERGED, i * 60) for i in range(6)]
    sessions.append(stored("open", S.CONTRACT_PROPOSED, 10))
    # the unfinished session counts toward the cap, so 3 finished ones are kept
    victims = disk_gc_victims(sessions, set(), now=NOW, max_sessions=4, max_age_days=30)
    assert sorted(victims) == ["t3", "t4", "t5"]


def test_disk_gc_by_age_and_backwards_clock() -> None:
    sessions = [
        stored("fresh", S.REPORTED, DAY),
        stored("edge", S.FAILED, 30 * DAY),  # exactly at the limit: kept
        stored("stale", S.FAILED, 30 * DAY + 1),
        stored("future", S.FAILED, -DAY),
    ]
    victims = disk_gc_victims(sessions, set(), now=NOW, max_sessions=500, max_age_days=30)
    assert victims == ["stale"]


async def test_the_disk_sweep_forgets_stale_sessions_but_not_live_ones(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    clock = Clock(NOW)
    sup = await make_supervisor(clock=clock, disk_gc_interval_secs=0)  # a disk sweep every start
    old = (await sup.start("first", repo)).session_id
    await sup.cancel(old)
    waiting = (await sup.start("second", repo)).session_id  # live, unfinished
    journal = sup.journal_path(old)
    await asyncio.sleep(0)
    assert journal.exists()

    # a month later the next start prunes `old` from memory, then the disk sweep
    # forgets it; the live session is untouched
    clock.advance(31 * DAY)
    third = (await sup.start("third", repo)).session_id
    assert not sup.is_live(old)
    assert {r.session_id for r in sup.list()} == {waiting, third}
    assert stored_session(sup.state_dir, old) is None
    assert stored_session(sup.state_dir, waiting) is not None
    assert not journal.exists()


async def test_the_disk_sweep_runs_at_most_once_per_interval(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    clock = Clock(NOW)
    sup = await make_supervisor(clock=clock)  # the default interval: an hour of real time
    old = (await sup.start("first", repo)).session_id  # this start swept the disk
    await sup.cancel(old)

    clock.advance(31 * DAY)
    await sup.start("second", repo)
    assert not sup.is_live(old), "leaving memory is not rate-limited"
    assert stored_session(sup.state_dir, old) is not None
    assert old in {r.session_id for r in sup.list()}
