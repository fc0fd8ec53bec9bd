"""A discussion's pinned model: a tool-capable configured model, used for
every request of the discussion and no other, kept when it is reopened,
cleared by `auto`, unchangeable while a run it started is unfinished, and
carried into the runs it starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from corral.supervisor.discuss import Discussions
from corral.supervisor.errors import CorralError
from corral.supervisor.llm.base import Turn
from corral.supervisor.llm.catalog import ModelEntry
from corral.supervisor.llm.chain import ModelChain
from corral.supervisor.states import CoderState
from tests.conftest import SupervisorFactory, run_to_gate
from tests.fakes.scripted_llm import ScriptedProvider


def models() -> tuple[ModelChain, dict[str, ScriptedProvider]]:
    served = {
        "fast": ScriptedProvider([Turn("from fast")] * 3, model="fast-id"),
        "deep": ScriptedProvider([Turn("from deep")] * 3, model="deep-id"),
        "plain": ScriptedProvider([Turn("from plain")], model="plain-id"),
    }
    entries = [
        ModelEntry(name="fast", provider="openai", model="fast-id"),
        ModelEntry(name="deep", provider="openai", model="deep-id"),
        ModelEntry(name="plain", provider="openai", model="plain-id", tools=False),
    ]
    return ModelChain(entries, factory=lambda e: served[e.name]), served


async def test_the_pin_survives_reopening_and_auto_clears_it(repo: Path, state_dir: Path) -> None:
    chain, served = models()
    disc = await Discussions(state_dir, chain).start(repo, model="deep")
    await disc.send("what does this repo do?")
    await disc.wait()
    assert len(served["deep"].calls) == 1 and served["fast"].calls == []
    did = disc.id

    again = await Discussions(state_dir, chain).resume(did)
    assert again.model == "deep" and again.summary()["model"] == "deep"
    await again.send("and the tests?")
    await again.wait()
    assert len(served["deep"].calls) == 2 and served["fast"].calls == []

    cleared = await Discussions(state_dir, chain).resume(did, model="auto")
    assert cleared.model is None
    reopened = await Discussions(state_dir, chain).resume(did)
    assert reopened.model is None
    await reopened.send("one more")
    await reopened.wait()
    assert len(served["fast"].calls) == 1  # the default order again


async def test_a_model_that_cannot_call_tools_is_refused_with_how_to_choose(
    repo: Path, state_dir: Path
) -> None:
    chain, _ = models()
    with pytest.raises(CorralError, match=r"'plain' cannot call repository tools.*fast, deep"):
        await Discussions(state_dir, chain).start(repo, model="plain")
    with pytest.raises(CorralError, match="unknown model 'gpt-9'"):
        await Discussions(state_dir, chain).start(repo, model="gpt-9")


async def test_the_pin_cannot_change_while_its_run_is_unfinished(
    make_supervisor: SupervisorFactory, repo: Path, state_dir: Path
) -> None:
    chain, _ = models()
    sup = await make_supervisor()
    disc = await Discussions(state_dir, chain).start(repo, model="deep")
    started = await sup.start("say hi", repo, discussion_id=disc.id)
    # the run carries the discussion's pin
    assert sup.get(started.session_id).session.model == "deep"
    assert sup.get(started.session_id).session.model_pinned

    with pytest.raises(CorralError, match="before changing its model"):
        disc.choose_model("fast")
    with pytest.raises(CorralError, match="before changing its model"):
        await Discussions(state_dir, chain).resume(disc.id, model="auto")
    assert (await Discussions(state_dir, chain).resume(disc.id)).model == "deep"

    row = await run_to_gate(sup, started.session_id)
    assert row.state is CoderState.NEEDS_APPROVAL
    await sup.approve(started.session_id, delivery="branch")
    disc.choose_model("fast")  # finished: the pin may change now
    assert (await Discussions(state_dir, chain).resume(disc.id)).model == "fast"
