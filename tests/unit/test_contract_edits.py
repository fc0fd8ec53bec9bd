"""Exact contract edits that never call a model: /check and /remove."""

from __future__ import annotations

from pathlib import Path

import pytest

from corral.supervisor.errors import CorralError
from tests.conftest import SupervisorFactory
from tests.fakes.scripted import ScriptedDrafter, contract


async def test_remove_drops_a_check_and_rebaselines(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    drafter = ScriptedDrafter([contract(("hello", "grep -q hi hello.txt"), ("always", "true"))])
    sup = await make_supervisor(drafter=drafter)
    sid = (await sup.start("say hi", repo)).session_id
    calls = len(drafter.calls)
    result = await sup.revise(sid, "/remove always")
    assert result.revised is True
    assert [c.name for c in result.contract.checks] == ["hello"]  # type: ignore[union-attr]
    assert [r.name for r in result.baseline] == ["hello"]
    assert len(drafter.calls) == calls  # no model call
    # removing the last check would leave nothing to verify: a soft rejection
    result = await sup.revise(sid, "/remove hello")
    assert result.revised is False
    assert "at least one check" in (result.message or "")
    with pytest.raises(CorralError, match="Use /remove name with one of: hello"):
        await sup.revise(sid, "/remove nope")
