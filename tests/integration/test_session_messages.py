"""Messages between sessions with the demo agent in real tmux panes: queued
while the target's agent works, pasted at its next idle prompt (never over a
question), logged in both sessions' journals with how it ended; refused with
a clear sentence when nothing would read it."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from corral.supervisor.api import Supervisor
from corral.supervisor.demo import demo_contract, make_demo_repo
from corral.supervisor.errors import CorralError
from corral.supervisor.models import ContractCheck, EventKind, OutcomeContract
from corral.supervisor.states import CoderState as S
from corral.supervisor.status import AgentStatus
from tests.conftest import events_of, eventually, row_of
from tests.integration.test_external_engine import SLUG, kill_tmux, open_supervisor

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

TEXT = "Keep the public API unchanged, says the other session"


@pytest.fixture
def demo_repo(tmp_path: Path) -> Path:
    return make_demo_repo(tmp_path)


@pytest.fixture
def cleanup_tmux(tmp_path: Path):  # type: ignore[no-untyped-def]
    yield
    kill_tmux(tmp_path)


def messages_of(sup: Supervisor, sid: str) -> list[tuple[str, str, str, str | None]]:
    return [
        (e.data.sender, e.data.target, e.data.status, e.data.reason)
        for e in events_of(sup, sid)
        if e.kind is EventKind.MESSAGE
    ]


async def working(sup: Supervisor, sid: str) -> None:
    await eventually(
        lambda: row_of(sup, sid).agent_status == "running" and row_of(sup, sid).steering_available,
        timeout=30,
    )


@pytest.mark.slow
async def test_a_message_from_another_session_lands_at_the_idle_prompt_and_is_logged_in_both(
    tmp_path: Path, demo_repo: Path, cleanup_tmux: None
) -> None:
    heard = OutcomeContract(
        checks=[
            ContractCheck(
                name="heard",
                command="grep -q 'public API[ ]unchanged' DEMO_NOTES.md",
                timeout_secs=5,
            )
        ]
    )
    sup = await open_supervisor(tmp_path, heard, pace=1.0, repair_invokes=0)
    os.environ["DEMO_AGENT_YES"] = "1"
    try:
        target = (await sup.start("write notes", demo_repo)).session_id
        sender = (await sup.start("another task", demo_repo)).session_id  # at its contract
        await sup.confirm(target)
        await working(sup, target)
        queued = await sup.send(sender, target, TEXT)
        assert queued.status == "queued" and queued.hops == 1
        row = await sup.wait_for(target, {S.NEEDS_APPROVAL, S.FAILED}, timeout=60)
        notes = (Path(sup.get(target).session.worktree or "") / "DEMO_NOTES.md").read_text()
        assert row.state is S.NEEDS_APPROVAL, (row.error, messages_of(sup, target), notes)
        both = [(sender, target, "queued", None), (sender, target, "accepted", None)]
        assert messages_of(sup, target) == both
        assert messages_of(sup, sender) == both
        events = events_of(sup, target)
        sent, landed = (e.seq for e in events if e.kind is EventKind.MESSAGE)
        between = [
            e.data.status
            for e in events
            if e.kind is EventKind.AGENT_STATUS and sent < e.seq < landed
        ]
        assert between and between[-1] is AgentStatus.IDLE  # not pasted mid-turn
        # the target's agent is done: nothing would read another message
        with pytest.raises(CorralError, match="has no agent working"):
            await sup.send("operator", target, "more")
    finally:
        os.environ.pop("DEMO_AGENT_YES", None)
        await sup.close()


@pytest.mark.slow
async def test_a_message_waits_behind_a_question_and_is_rejected_when_the_run_ends(
    tmp_path: Path, demo_repo: Path, cleanup_tmux: None
) -> None:
    sup = await open_supervisor(tmp_path, demo_contract(SLUG), pace=1.0)
    try:
        sid = (await sup.start(SLUG, demo_repo)).session_id
        await sup.confirm(sid)
        await working(sup, sid)
        await sup.send("operator", sid, TEXT)
        row = await sup.wait_for(sid, needs=True, timeout=30)
        assert row.needs_you == "question"
        screen = sup.agent_screen(sid)
        assert screen is not None and TEXT not in "\n".join(screen.lines)
        await sup.cancel(sid)
        await eventually(lambda: len(messages_of(sup, sid)) > 1, timeout=10)
        assert messages_of(sup, sid) == [
            ("operator", sid, "queued", None),
            (
                "operator",
                sid,
                "rejected",
                "the task was cancelled before the agent was ready for it",
            ),
        ]
        with pytest.raises(CorralError, match="already finished"):
            await sup.send("operator", sid, "hello?")
        with pytest.raises(CorralError, match="no corral session 'nope'"):
            await sup.send("operator", "nope", "hello?")
    finally:
        await sup.close()


@pytest.mark.slow
async def test_a_message_expecting_a_reply_is_pending_on_both_sessions_until_answered(
    tmp_path: Path, demo_repo: Path, cleanup_tmux: None
) -> None:
    """Both rows say so while it waits; the target's agent reads how to
    answer; a failed send leaves no pending reply; a finished target owes
    none any more."""
    heard = OutcomeContract(
        checks=[
            ContractCheck(name="heard", command="grep -q 'reply-to' DEMO_NOTES.md", timeout_secs=5)
        ]
    )
    sup = await open_supervisor(tmp_path, heard, pace=1.0, repair_invokes=0)
    os.environ["DEMO_AGENT_YES"] = "1"
    try:
        target = (await sup.start("write notes", demo_repo)).session_id
        sender = (await sup.start("another task", demo_repo)).session_id  # at its contract
        await sup.confirm(target)
        await working(sup, target)
        asked = await sup.send(sender, target, "Which port does it use?", expects_reply=True)
        assert asked.expects_reply
        assert (row_of(sup, target).replies_owed, row_of(sup, sender).replies_awaited) == (1, 1)
        await eventually(lambda: "accepted" in [m[2] for m in messages_of(sup, target)], timeout=60)
        notes = Path(sup.get(target).session.worktree or "") / "DEMO_NOTES.md"
        # the agent read how to answer (the demo agent writes what it reads to its notes)
        await eventually(lambda: f"--reply-to {asked.message_id}" in notes.read_text(), timeout=30)
        assert row_of(sup, target).replies_owed == 1  # delivered, not yet answered
        # an answer routed anywhere but back to the asker is refused
        with pytest.raises(CorralError, match="waits for no reply"):
            await sup.send("operator", target, "x", responds_to=asked.message_id)
        row = await sup.wait_for(target, {S.NEEDS_APPROVAL, S.FAILED}, timeout=60)
        assert row.state is S.NEEDS_APPROVAL, row.error
        await sup.cancel(target)
        await eventually(lambda: row_of(sup, sender).replies_awaited == 0, timeout=10)
        assert row_of(sup, target).replies_owed == 0
    finally:
        os.environ.pop("DEMO_AGENT_YES", None)
        await sup.close()


@pytest.mark.slow
async def test_a_message_expecting_a_reply_that_is_never_delivered_leaves_none(
    tmp_path: Path, demo_repo: Path, cleanup_tmux: None
) -> None:
    sup = await open_supervisor(tmp_path, demo_contract(SLUG), pace=1.0)
    try:
        sid = (await sup.start(SLUG, demo_repo)).session_id
        sender = (await sup.start("another task", demo_repo)).session_id
        await sup.confirm(sid)
        await working(sup, sid)
        await sup.send(sender, sid, TEXT, expects_reply=True)
        assert row_of(sup, sender).replies_awaited == 1
        row = await sup.wait_for(sid, needs=True, timeout=30)
        assert row.needs_you == "question"  # the message waits behind it
        await sup.cancel(sid)
        await eventually(lambda: "rejected" in [m[2] for m in messages_of(sup, sid)], timeout=10)
        assert row_of(sup, sender).replies_awaited == 0
    finally:
        await sup.close()


@pytest.mark.slow
async def test_a_pending_reply_survives_an_owner_restart_on_both_rows(
    tmp_path: Path, demo_repo: Path, cleanup_tmux: None
) -> None:
    """The question reached the target; the owner restarts (the agent keeps
    running in its pane and is re-adopted): both rows still say a reply is
    owed and awaited, and a finished target owes none any more."""
    heard = OutcomeContract(
        checks=[
            ContractCheck(name="heard", command="grep -q 'reply-to' DEMO_NOTES.md", timeout_secs=5)
        ]
    )
    sup = await open_supervisor(tmp_path, heard, pace=1.0, repair_invokes=0)
    os.environ["DEMO_AGENT_YES"] = "1"
    try:
        target = (await sup.start("write notes", demo_repo)).session_id
        sender = (await sup.start("another task", demo_repo)).session_id  # at its contract
        await sup.confirm(target)
        await working(sup, target)
        asked = await sup.send(sender, target, "Which port does it use?", expects_reply=True)
        await eventually(lambda: "accepted" in [m[2] for m in messages_of(sup, target)], timeout=60)
        await sup.close()
        sup = await open_supervisor(tmp_path, heard, pace=1.0, repair_invokes=0)
        assert (row_of(sup, target).replies_owed, row_of(sup, sender).replies_awaited) == (1, 1)
        # the answer is still routed to the asker only
        with pytest.raises(CorralError, match="waits for no reply"):
            await sup.send("operator", target, "x", responds_to=asked.message_id)
        row = await sup.wait_for(target, {S.NEEDS_APPROVAL, S.FAILED}, timeout=60)
        assert row.state is S.NEEDS_APPROVAL, row.error
        await sup.cancel(target)
        await eventually(lambda: row_of(sup, sender).replies_awaited == 0, timeout=10)
    finally:
        os.environ.pop("DEMO_AGENT_YES", None)
        await sup.close()
