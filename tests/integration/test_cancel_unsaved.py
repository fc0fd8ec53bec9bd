"""A cancellation that cannot be stored says so: the session's work is
stopped, and the operator is told its new state was not saved (never a
silent success that a restart contradicts); a cancel answers in time even
when the work it stops is slow to end."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from corral.supervisor.engines.base import EngineOutcome, RunContext
from corral.supervisor.errors import CorralError
from corral.supervisor.gates.approval import CANCEL_WAIT_SECS
from corral.supervisor.states import CoderState as S
from tests.conftest import fast_config, hello_contract, init_repo, row_of
from tests.fakes.owner import owner_with_registry
from tests.fakes.scripted import ScriptedDrafter, ScriptedEngine


async def test_a_cancel_whose_state_cannot_be_saved_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = init_repo(tmp_path / "repo")
    sup, registry = owner_with_registry(
        tmp_path / "state",
        drafter=ScriptedDrafter([hello_contract()]),
        engine=ScriptedEngine([[]]),
        config=fast_config(),
    )
    await sup.open()
    try:
        sid = (await sup.start("say hi", repo)).session_id
        store = registry.store
        assert store is not None
        real = store.save_session

        def full(session, *a, **k):  # type: ignore[no-untyped-def]
            if session.state is S.ABANDONED:
                raise OSError(28, "No space left on device")
            return real(session, *a, **k)

        monkeypatch.setattr(store, "save_session", full)
        with pytest.raises(
            CorralError, match="was stopped, but its cancellation could not be saved"
        ):
            await sup.cancel(sid)
        monkeypatch.setattr(store, "save_session", real)
        assert (await sup.cancel(sid)).state is S.ABANDONED  # once it can be saved
    finally:
        await sup.close()


class SlowToStopEngine:
    """An engine that goes on for a while after being cancelled (an agent
    that ignores SIGTERM, a thread it cannot interrupt)."""

    label = "slow-to-stop"

    def __init__(self) -> None:
        self.working = asyncio.Event()

    async def run(self, ctx: RunContext) -> EngineOutcome:
        self.working.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            await asyncio.sleep(CANCEL_WAIT_SECS + 1.5)  # until cancelled again (close)
            raise
        return EngineOutcome(iterations=1)


@pytest.mark.slow
async def test_a_cancel_answers_in_time_even_when_the_work_is_slow_to_stop(
    tmp_path: Path,
) -> None:
    repo = init_repo(tmp_path / "repo")
    engine = SlowToStopEngine()
    sup, _registry = owner_with_registry(
        tmp_path / "state",
        drafter=ScriptedDrafter([hello_contract()]),
        engine=engine,
        config=fast_config(),
    )
    await sup.open()
    try:
        sid = (await sup.start("say hi", repo)).session_id
        await sup.confirm(sid)
        await asyncio.wait_for(engine.working.wait(), 10)
        begin = time.monotonic()
        result = await sup.cancel(sid)
        assert time.monotonic() - begin < 5
        assert result.state is S.ABANDONED
        assert row_of(sup, sid).state is S.ABANDONED
    finally:
        await sup.close()
