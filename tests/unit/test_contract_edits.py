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


async def test_a_check_edit_without_a_name_is_refused_not_baselined_as_a_broken_check(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    """`/check python3 -c ...` once became a check named `python3` running `-c ...`,
    red at baseline with bash's usage text: the operator had left out the name."""
    drafter = ScriptedDrafter([contract(("hello", "grep -q hi hello.txt"))])
    sup = await make_supervisor(drafter=drafter)
    sid = (await sup.start("say hi", repo)).session_id
    with pytest.raises(
        CorralError, match=r"give the check a name first, e\.g\. /check my_check python3 -c"
    ):
        await sup.revise(sid, '/check python3 -c "print(1)"')
    detail = sup.get(sid)
    assert [c.name for c in detail.session.contract.checks] == ["hello"]  # type: ignore[union-attr]
    result = await sup.revise(sid, '/check prints python3 -c "print(1)"')
    assert [c.name for c in result.contract.checks] == ["hello", "prints"]  # type: ignore[union-attr]
