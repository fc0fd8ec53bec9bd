"""The foreman's placement rule: round robin over this machine and the hosts
with a free slot, a host's slots being its max_sessions less its sessions and
the subtasks placed there; a re-placement goes elsewhere when it can."""

from __future__ import annotations

import asyncio

from corral.supervisor.foreman.places import Places


def places(busy: dict[str, int] | None = None, *, local: bool = True, **limits: int) -> Places:
    counts = busy or {}
    return Places(dict(limits), local=local, busy=lambda name: counts.get(name, 0))


async def test_subtasks_go_round_robin_over_local_and_the_hosts() -> None:
    p = places(one=4, two=4)
    assert [await p.take() for _ in range(5)] == ["local", "one", "two", "local", "one"]


async def test_a_full_host_is_skipped_and_its_own_sessions_count() -> None:
    p = places({"one": 1}, one=2, two=1)
    assert [await p.take() for _ in range(5)] == ["local", "one", "two", "local", "local"]


async def test_a_re_placement_avoids_the_place_that_failed_when_another_has_room() -> None:
    p = places(one=1)
    assert await p.take({"local"}) == "one"
    assert await p.take({"one"}) == "local"
    assert await p.take({"local"}) == "local"  # one is full: anywhere with room


async def test_without_this_machine_a_subtask_waits_for_a_host_slot() -> None:
    p = places(local=False, one=1)
    assert p.names == ["one"]
    assert await p.take() == "one"
    waiting = asyncio.ensure_future(p.take())
    for _ in range(5):  # the event loop goes round: a free slot would have been taken
        await asyncio.sleep(0)
    assert not waiting.done()  # the host is full
    await p.give_back("one")
    assert await asyncio.wait_for(waiting, 2) == "one"


async def test_with_nothing_configured_everything_runs_here() -> None:
    p = places(local=False)
    assert p.names == ["local"] and await p.take() == "local"
