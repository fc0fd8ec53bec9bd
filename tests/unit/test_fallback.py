"""Engine fallback policy through the supervisor: an unavailable agent falls
back to the built-in engine only when the operator did not name it."""

from __future__ import annotations

from pathlib import Path

from corral.supervisor.api import Supervisor
from corral.supervisor.engines.base import EngineOutcome, RunContext
from corral.supervisor.models import EventKind
from corral.supervisor.states import CoderState as S
from corral.supervisor.states import LoopFailure
from tests.conftest import fast_config, hello_contract, kinds_of
from tests.fakes.scripted import ScriptedDrafter, ScriptedEngine, Write


class Missing:
    label = "external:ghost"

    async def run(self, ctx: RunContext) -> EngineOutcome:
        return EngineOutcome(failure=LoopFailure.ENGINE_UNAVAILABLE, error="ghost is not installed")


class Registry:
    def resolve(self, requested: str) -> tuple[str, str]:
        return "external:ghost", "test"

    def create(self, label: str) -> Missing:
        return Missing()

    def native(self) -> ScriptedEngine:
        return ScriptedEngine([[Write("hello.txt", "hi\n")]], label="native")


async def run(tmp_path: Path, repo: Path, requested: str) -> tuple[Supervisor, str]:
    sup = Supervisor(
        tmp_path / "state",
        drafter=ScriptedDrafter([hello_contract()]),
        engines=Registry(),
        config=fast_config(repair_invokes=0),
    )
    await sup.open()
    sid = (await sup.start("say hi", repo, engine=requested)).session_id
    await sup.confirm(sid)
    await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=20)
    return sup, sid


async def test_auto_falls_back_to_the_built_in_engine_and_says_so(
    tmp_path: Path, repo: Path
) -> None:
    sup, sid = await run(tmp_path, repo, "auto")
    try:
        s = sup.get(sid).session
        assert s.state is S.NEEDS_APPROVAL
        assert (s.requested_engine, s.engine, s.engine_ran) == ("auto", "external:ghost", "native")
        fallback = [e for e in sup.replay(sid) if e.kind is EventKind.ENGINE_FALLBACK]
        assert fallback and fallback[0].data.reason == "ghost is not installed"
    finally:
        await sup.close()


async def test_an_explicit_agent_never_falls_back(tmp_path: Path, repo: Path) -> None:
    sup, sid = await run(tmp_path, repo, "external:ghost")
    try:
        s = sup.get(sid).session
        assert s.state is S.FAILED and s.failure_kind == "infrastructure"
        assert "ghost is not installed" in (s.error or "")
        assert EventKind.ENGINE_FALLBACK not in kinds_of(sup, sid)
    finally:
        await sup.close()


async def test_the_fallback_runs_on_the_same_deadline_and_the_same_model_pin(
    tmp_path: Path, repo: Path
) -> None:
    """The built-in engine that takes over gets what is left of the session's
    one wall-clock budget (not a fresh one) and the model the operator pinned."""
    seen: list[RunContext] = []
    native = ScriptedEngine([[Write("hello.txt", "hi\n")]], label="native")

    class Recording(Missing):
        async def run(self, ctx: RunContext) -> EngineOutcome:
            seen.append(ctx)
            return await super().run(ctx)

    class Pinned(Registry):
        def create(self, label: str) -> Missing:
            return Recording()

        def native(self) -> ScriptedEngine:
            return native

    sup = Supervisor(
        tmp_path / "state",
        drafter=ScriptedDrafter([hello_contract()]),
        engines=Pinned(),
        config=fast_config(repair_invokes=0, max_session_wall_secs=900),
    )
    await sup.open()
    try:
        sid = (await sup.start("say hi", repo, engine="auto", model="pinned-model")).session_id
        await sup.confirm(sid)
        await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=20)
        assert sup.get(sid).session.engine_ran == "native"
        [first] = seen
        [second] = native.contexts
        assert first.deadline is not None and second.deadline == first.deadline
        assert (first.model, second.model) == ("pinned-model", "pinned-model")
    finally:
        await sup.close()
