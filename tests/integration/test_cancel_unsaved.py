"""A cancellation that cannot be stored says so: the session's work is
stopped, and the operator is told its new state was not saved (never a
silent success that a restart contradicts)."""

from __future__ import annotations

from pathlib import Path

import pytest

from corral.supervisor.errors import CorralError
from corral.supervisor.states import CoderState as S
from tests.conftest import fast_config, hello_contract, init_repo
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
