"""Sessions as the registry serves them through the `Supervisor` facade:
unknown ids are named, and an event subscription replays the history and
then streams live without a gap or a duplicate."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from corral.supervisor.errors import CorralError
from corral.supervisor.events import CoderEvent
from corral.supervisor.models import EventKind
from corral.supervisor.states import CoderState
from tests.conftest import (
    SupervisorFactory,
    proposed,
)
from tests.fakes.scripted import (
    ScriptedEngine,
    Wait,
    Write,
)
from tests.integration.conftest import OwnerFactory

S = CoderState


# --- reading sessions ----------------------------------------------------------------------


async def test_unknown_session_ids_are_named(make_supervisor: SupervisorFactory) -> None:
    sup = await make_supervisor()
    for call in (
        sup.confirm("nope"),
        sup.approve("nope"),
        sup.cancel("nope"),
        sup.revise("nope", "x"),
        sup.respond("nope", "x"),
    ):
        with pytest.raises(CorralError, match="'nope'"):
            await call
    with pytest.raises(CorralError, match="'nope'"):
        sup.get("nope")
    with pytest.raises(CorralError, match="'nope'"):
        sup.subscribe("nope")


async def test_subscribe_replays_the_history_then_streams_live(
    make_owner: OwnerFactory, repo: Path
) -> None:
    release = asyncio.Event()
    sup, registry = await make_owner(
        engine=ScriptedEngine([[Wait(release), Write("hello.txt", "hi")]])
    )
    sid = await proposed(sup, repo)
    result, sub = sup.subscribe(sid, 0)
    assert sub is not None
    assert (result.state, result.live, result.replay_available) == (S.CONTRACT_PROPOSED, True, True)
    assert result.events_skipped == 0
    assert result.events_replayed == sup.get(sid).next_seq
    history = sub.get_nowait()
    assert [e.seq for e in history] == list(range(result.events_replayed))
    assert history[0].kind is EventKind.ENGINE_SELECTED

    await sup.confirm(sid)
    release.set()
    seen: list[CoderEvent] = []
    async with asyncio.timeout(10):
        async for event in sub:
            seen.append(event)
            if event.kind is EventKind.STATE_CHANGED and event.data.to is CoderState.NEEDS_APPROVAL:
                break
    assert [e.seq for e in seen] == list(range(history[-1].seq + 1, seen[-1].seq + 1))
    assert EventKind.DIFF_READY in [e.kind for e in seen]
    sup.unsubscribe(sub)
    assert registry.live(sid).log.subscriber_count == 0

    # a cursor from the middle resumes exactly there
    result, again = sup.subscribe(sid, 3)
    assert again is not None and again.get_nowait()[0].seq == 3
    assert result.events_replayed == sup.get(sid).next_seq - 3
