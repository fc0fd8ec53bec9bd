"""The external engine end to end with the demo agent (a real terminal
program) in real tmux panes on a private socket: status from hooks, a
permission question answered through the API, repair rounds, crash retry,
cancel within 5 s, and re-adoption after the supervisor is recreated."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from corral.supervisor.api import Supervisor
from corral.supervisor.contracts.drafting import FixedDrafter
from corral.supervisor.demo import demo_contract, make_demo_repo
from corral.supervisor.factory import build_supervisor
from corral.supervisor.models import ContractCheck, EventKind, OutcomeContract
from corral.supervisor.states import CoderState as S
from corral.supervisor.status import AgentStatus
from tests.conftest import events_of, eventually, fast_config, kinds_of, plan_texts, row_of

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

SLUG = "Make slugify() fold accents"


@pytest.fixture
def demo_repo(tmp_path: Path) -> Path:
    return make_demo_repo(tmp_path)


async def open_supervisor(
    tmp_path: Path, contract: OutcomeContract, pace: float = 0.05, **cfg
) -> Supervisor:  # type: ignore[no-untyped-def]
    sup = build_supervisor(
        tmp_path / "state",
        FixedDrafter(contract),
        socket_dir=tmp_path / "tmux",
        default_engine="external:demo",
        demo_pace=pace,
        config=fast_config(**cfg),
    )
    await sup.open()
    return sup


def kill_tmux(tmp_path: Path) -> None:
    for sock in (tmp_path / "tmux").glob("*"):
        subprocess.run(["tmux", "-S", str(sock), "kill-server"], capture_output=True)


@pytest.fixture
def cleanup_tmux(tmp_path: Path):  # type: ignore[no-untyped-def]
    yield
    kill_tmux(tmp_path)


@pytest.mark.slow
async def test_a_question_is_answered_through_the_api_and_the_run_reaches_review(
    tmp_path: Path, demo_repo: Path, cleanup_tmux: None
) -> None:
    sup = await open_supervisor(tmp_path, demo_contract(SLUG))
    try:
        sid = (await sup.start(SLUG, demo_repo)).session_id
        await sup.confirm(sid)
        row = await sup.wait_for(sid, needs=True, timeout=30)
        assert row.needs_you == "question"
        assert row.question_prompt == "Do you want to make this edit to textkit/slug.py?"
        assert sup.question_options(sid)[0] == "Yes"
        assert row.agent_status == "waiting"
        await sup.respond(sid, "Yes")
        row = await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=30)
        assert row.state is S.NEEDS_APPROVAL, row.error
        kinds = kinds_of(sup, sid)
        assert EventKind.AGENT_STATUS in kinds and EventKind.CONTRACT_EVALUATED in kinds
        evaluated = [e.data for e in sup.replay(sid) if e.kind is EventKind.CONTRACT_EVALUATED]
        assert evaluated[-1].by == "runtime" and evaluated[-1].passed
        session = sup.get(sid).session
        assert session.engine_ran == "external:demo" and session.requested_engine == "auto"
        assert session.pane and session.pane["state"] == "live"
        result = await sup.approve(sid)
        assert result.state is S.MERGED
        deadline = time.monotonic() + 10
        while sup.agent_pane(sid) is not None:  # the pane is killed
            assert time.monotonic() < deadline, "the pane outlived the merge"
            await asyncio.sleep(0.05)
    finally:
        await sup.close()


async def test_red_checks_go_back_to_the_agent_then_fail_after_the_repair_budget(
    tmp_path: Path, demo_repo: Path, cleanup_tmux: None
) -> None:
    never = OutcomeContract(checks=[ContractCheck(name="never", command="false", timeout_secs=5)])
    sup = await open_supervisor(tmp_path, never, repair_invokes=1)
    os.environ["DEMO_AGENT_YES"] = "1"
    try:
        sid = (await sup.start("write notes", demo_repo)).session_id
        await sup.confirm(sid)
        row = await sup.wait_for(sid, {S.FAILED, S.NEEDS_APPROVAL}, timeout=60)
        assert row.state is S.FAILED
        assert row.failure_kind == "error"
        assert "contract not satisfied" in (row.error or "")
        screen = sup.agent_screen(sid)
        texts = plan_texts(sup, sid)
        assert any("handing them back to the engine" in t for t in texts)
        assert screen is None or isinstance(screen.lines, list)
    finally:
        os.environ.pop("DEMO_AGENT_YES", None)
        await sup.close()


async def test_cancel_mid_turn_kills_the_agent_within_five_seconds(
    tmp_path: Path, demo_repo: Path, cleanup_tmux: None
) -> None:
    sup = await open_supervisor(tmp_path, demo_contract(SLUG))
    try:
        sid = (await sup.start(SLUG, demo_repo)).session_id
        await sup.confirm(sid)
        await sup.wait_for(sid, needs=True, timeout=30)  # parked on its question
        pane = sup.agent_pane(sid)
        assert pane is not None and pane.pid
        pid = pane.pid
        started = time.monotonic()
        result = await sup.cancel(sid)
        assert time.monotonic() - started < 5
        assert result.state is S.ABANDONED
        with pytest.raises(ProcessLookupError):
            for _ in range(50):
                os.kill(pid, 0)
                await asyncio.sleep(0.05)
    finally:
        await sup.close()


@pytest.mark.slow
async def test_a_crashed_agent_is_restarted_once_then_fails_loudly(
    tmp_path: Path, demo_repo: Path, cleanup_tmux: None
) -> None:
    sup = await open_supervisor(tmp_path, demo_contract(SLUG))
    try:
        sid = (await sup.start(SLUG, demo_repo)).session_id
        await sup.confirm(sid)
        await sup.wait_for(sid, needs=True, timeout=30)
        for attempt in range(2):
            pane = sup.agent_pane(sid)
            assert pane is not None
            pid = pane.pid
            assert pid is not None
            os.kill(pid, 9)  # the agent dies
            if attempt == 0:
                for _ in range(300):  # generous: CI machines are busy
                    await asyncio.sleep(0.1)
                    new = sup.agent_pane(sid)  # a live pane: its agent runs
                    if new is not None and new.pid != pid:
                        break
                else:
                    raise AssertionError("the agent was not restarted")
                await sup.wait_for(sid, needs=True, timeout=30)
        row = await sup.wait_for(sid, {S.FAILED}, timeout=30)
        assert "external agent 'demo' failed" in (row.error or "")
        texts = plan_texts(sup, sid)
        assert any("transient retry" in t for t in texts)
    finally:
        await sup.close()


@pytest.mark.slow
async def test_panes_outlive_the_supervisor_and_are_readopted(
    tmp_path: Path, demo_repo: Path, cleanup_tmux: None
) -> None:
    first = await open_supervisor(tmp_path, demo_contract(SLUG))
    sid = (await first.start(SLUG, demo_repo)).session_id
    await first.confirm(sid)
    await first.wait_for(sid, needs=True, timeout=30)
    pid = first.agent_pane(sid).pid  # type: ignore[union-attr]
    await first.close()  # the console goes away; the agent keeps running in tmux
    os.kill(pid, 0)  # still alive

    second = await open_supervisor(tmp_path, demo_contract(SLUG))
    try:
        row = await second.wait_for(sid, needs=True, timeout=30)
        assert row.live and row.state is S.RUNNING
        assert row.needs_you == "question"  # status resumed from the same pane
        await second.respond(sid, "1")
        row = await second.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=30)
        assert row.state is S.NEEDS_APPROVAL, row.error
        texts = plan_texts(second, sid)
        assert any("re-adopted" in t for t in texts)
    finally:
        await second.close()


# --- operator guidance -----------------------------------------------------------------

GUIDANCE = "Keep the public API"


def guidance_of(sup: Supervisor, sid: str) -> list[tuple[str, str, str | None]]:
    return [
        (e.data.text, e.data.status, getattr(e.data, "reason", None))
        for e in events_of(sup, sid)
        if e.kind is EventKind.OPERATOR_GUIDANCE
    ]


@pytest.mark.slow
async def test_guidance_is_pasted_at_the_agents_next_idle_prompt_and_reported_delivered(
    tmp_path: Path, demo_repo: Path, cleanup_tmux: None
) -> None:
    """Sent mid-turn, the guidance waits for the turn to end, is pasted at the
    idle prompt, and the agent acts on it (the check proves it got there)."""
    heard = OutcomeContract(
        checks=[
            ContractCheck(
                # the pattern does not match its own text, which the task prompt
                # (recorded in the notes too) carries
                name="heard",
                command="grep -q 'Keep the public[ ]API' DEMO_NOTES.md",
                timeout_secs=5,
            )
        ]
    )
    sup = await open_supervisor(tmp_path, heard, pace=1.0, repair_invokes=0)
    os.environ["DEMO_AGENT_YES"] = "1"
    try:
        sid = (await sup.start("write notes", demo_repo)).session_id
        await sup.confirm(sid)
        await eventually(
            lambda: (
                row_of(sup, sid).agent_status == "running" and row_of(sup, sid).steering_available
            ),
            timeout=30,
        )
        assert await sup.respond(sid, GUIDANCE, steer=True) == {"ok": True, "queued": True}
        row = await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=60)
        assert row.state is S.NEEDS_APPROVAL, row.error
        assert guidance_of(sup, sid) == [(GUIDANCE, "queued", None), (GUIDANCE, "delivered", None)]
        events = events_of(sup, sid)
        queued, delivered = (e.seq for e in events if e.kind is EventKind.OPERATOR_GUIDANCE)
        between = [
            e.data.status
            for e in events
            if e.kind is EventKind.AGENT_STATUS and queued < e.seq < delivered
        ]
        assert between and between[-1] is AgentStatus.IDLE  # not pasted mid-turn
        notes = (Path(sup.get(sid).session.worktree or "") / "DEMO_NOTES.md").read_text()
        assert GUIDANCE in notes
    finally:
        os.environ.pop("DEMO_AGENT_YES", None)
        await sup.close()


@pytest.mark.slow
async def test_guidance_is_not_pasted_over_a_question_and_is_reported_undelivered_on_cancel(
    tmp_path: Path, demo_repo: Path, cleanup_tmux: None
) -> None:
    sup = await open_supervisor(tmp_path, demo_contract(SLUG), pace=1.0)
    try:
        sid = (await sup.start(SLUG, demo_repo)).session_id
        await sup.confirm(sid)
        await eventually(
            lambda: (
                row_of(sup, sid).agent_status == "running" and row_of(sup, sid).steering_available
            ),
            timeout=30,
        )
        await sup.respond(sid, GUIDANCE, steer=True)
        row = await sup.wait_for(sid, needs=True, timeout=30)
        assert row.needs_you == "question"  # the agent asks instead of going idle
        await asyncio.sleep(3 * 0.5)  # three of the pane sweeps (every 0.5 s) look at it
        assert guidance_of(sup, sid) == [(GUIDANCE, "queued", None)]
        screen = sup.agent_screen(sid)
        assert screen is not None and GUIDANCE not in "\n".join(screen.lines)
        result = await sup.cancel(sid)
        assert result.state is S.ABANDONED
        await eventually(lambda: len(guidance_of(sup, sid)) > 1, timeout=10)
        assert guidance_of(sup, sid) == [
            (GUIDANCE, "queued", None),
            (GUIDANCE, "not_delivered", "the task was cancelled before the agent was ready for it"),
        ]
    finally:
        await sup.close()
