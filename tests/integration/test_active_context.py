"""The fresh-context notice: after `context_refresh_after_active_secs` of an
agent's active work, its session says once, at the next idle prompt, that a
fresh start is due (never mid-turn, never over a question), and its row
carries `context_refresh_due`; the count is stored with the session."""

from __future__ import annotations

import asyncio
from pathlib import Path

from corral.supervisor.models import CoderSession, EventKind
from corral.supervisor.session.active_context import ActiveContext
from corral.supervisor.status import AgentStatus, StatusReading
from tests.conftest import Clock, eventually, plan_texts, proposed, row_of, stored_session
from tests.fakes.scripted import ScriptedEngine, Wait
from tests.integration.conftest import OwnerFactory

HOUR = 3600.0


def reading(status: AgentStatus) -> StatusReading:
    return StatusReading(status=status, reason="read from its screen")


def notices(texts: list[str]) -> list[str]:
    return [t for t in texts if "of active time in one context" in t]


async def test_the_notice_comes_once_at_the_idle_prompt_after_the_active_time(
    make_owner: OwnerFactory, repo: Path
) -> None:
    clock = Clock()
    release = asyncio.Event()
    sup, registry = await make_owner(
        engine=ScriptedEngine([[Wait(release)]]),
        clock=clock,
        context_refresh_after_active_secs=HOUR,
    )
    sid = await proposed(sup, repo)
    await sup.confirm(sid)
    await eventually(lambda: row_of(sup, sid).steering_available)

    def step(status: AgentStatus, then: float = 0) -> None:
        registry.note_agent_status(sid, reading(status))
        clock.advance(then)

    step(AgentStatus.RUNNING, 50 * 60)
    step(AgentStatus.IDLE, 5 * 3600)  # idle time never counts
    step(AgentStatus.RUNNING, 9 * 60)
    step(AgentStatus.WAITING)  # 59 min worked: not yet
    assert notices(plan_texts(sup, sid)) == []
    step(AgentStatus.RUNNING, 2 * 60)  # 61 min, but mid-turn: not now
    assert notices(plan_texts(sup, sid)) == [] and not row_of(sup, sid).context_refresh_due
    step(AgentStatus.WAITING)  # a question is no safe boundary either
    assert notices(plan_texts(sup, sid)) == []
    step(AgentStatus.IDLE)  # the turn ended at its prompt: said now, once
    [said] = notices(plan_texts(sup, sid))
    assert "1 h 01 min" in said and f"corral retry --keep-edits {sid}" in said
    assert row_of(sup, sid).context_refresh_due is True
    for status in (AgentStatus.RUNNING, AgentStatus.IDLE, AgentStatus.RUNNING, AgentStatus.IDLE):
        step(status, HOUR)
    assert len(notices(plan_texts(sup, sid))) == 1
    stored = stored_session(sup.state_dir, sid)
    assert stored is not None and stored.context_refresh_due is True
    assert stored.active_context_secs >= 61 * 60
    # the session's own state is untouched: nothing was stopped
    assert row_of(sup, sid).state.value == "running"
    assert EventKind.PLAN_TEXT in {e.kind for e in sup.replay(sid)}
    release.set()


async def test_without_a_limit_no_notice_is_ever_given(
    make_owner: OwnerFactory, repo: Path
) -> None:
    clock = Clock()
    release = asyncio.Event()
    sup, registry = await make_owner(engine=ScriptedEngine([[Wait(release)]]), clock=clock)
    sid = await proposed(sup, repo)
    await sup.confirm(sid)
    await eventually(lambda: row_of(sup, sid).steering_available)
    for status in (AgentStatus.RUNNING, AgentStatus.IDLE) * 3:
        registry.note_agent_status(sid, reading(status))
        clock.advance(10 * HOUR)
    assert notices(plan_texts(sup, sid)) == [] and not row_of(sup, sid).context_refresh_due
    assert sup.get(sid).session.active_context_secs >= 30 * HOUR  # counted all the same
    release.set()


def test_a_count_carried_over_a_restart_continues_from_where_it_was() -> None:
    session = CoderSession(id="0123456789abcdef", repo="/r", intent="x")
    session.active_context_secs = 50 * 60  # stored before corral restarted
    fresh = ActiveContext()  # a new live session after the restart
    assert not fresh.observe(session, AgentStatus.RUNNING, 1000.0, HOUR)
    assert not fresh.observe(session, AgentStatus.IDLE, 1000.0 + 5 * 60, HOUR)
    assert fresh.observe(session, AgentStatus.RUNNING, 2000.0, HOUR) is False
    assert fresh.observe(session, AgentStatus.IDLE, 2000.0 + 6 * 60, HOUR) is True
