"""Stopping background tasks never swallows the caller's own cancellation,
and what a stopped task ended with is said in the log."""

from __future__ import annotations

import asyncio
import logging

import pytest

from corral.supervisor.cancelling import cancel_and_wait


async def test_the_tasks_end_and_their_errors_are_logged_not_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def forever() -> None:
        await asyncio.Event().wait()

    async def broken() -> None:
        raise OSError("disk gone")

    failed = asyncio.ensure_future(broken())
    await asyncio.sleep(0)
    loop = asyncio.ensure_future(forever())
    with caplog.at_level(logging.WARNING, logger="corral.supervisor"):
        await cancel_and_wait([loop, failed], what="the sweep")
    assert loop.cancelled()
    assert "the sweep ended with OSError: disk gone" in caplog.text


async def test_the_callers_own_cancellation_goes_on() -> None:
    stopping, may_stop = asyncio.Event(), asyncio.Event()

    async def stubborn() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            stopping.set()
            await may_stop.wait()  # slow to stop: until the test lets it

    inner = asyncio.ensure_future(stubborn())
    await asyncio.sleep(0)
    outer = asyncio.ensure_future(cancel_and_wait([inner]))
    await asyncio.wait_for(stopping.wait(), 5)  # it cancelled the task and waits for it
    outer.cancel()  # the caller is cancelled while it waits
    done, _ = await asyncio.wait([outer], timeout=5)
    assert outer in done, "the caller's cancellation waited for the stubborn task"
    with pytest.raises(asyncio.CancelledError):
        outer.result()
    may_stop.set()
    await asyncio.wait([inner])
