"""A pane agent's typed "blocked" notice: the operator declining what the
agent asked (its own "No" option, answered on the board and seen to land in
its pane) is a `blocked` event by the operator, as it is for an ACP agent."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from pathlib import Path

import pytest

from corral.supervisor.events import BlockedData, PaneAnswerData
from corral.supervisor.factory import build_supervisor
from corral.supervisor.interface import FixedDrafter
from corral.supervisor.states import CoderState as S
from tests.conftest import events_of, eventually, fast_config, hello_contract, init_repo

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


@pytest.mark.slow
async def test_declining_a_pane_agents_question_is_blocked_by_the_operator(
    tmp_path: Path,
) -> None:
    repo = init_repo(tmp_path / "repo")
    sup = build_supervisor(
        tmp_path / "state",
        FixedDrafter(hello_contract()),
        socket_dir=tmp_path / "tmux",
        default_engine="external:demo",
        config=fast_config(repair_invokes=0),
    )
    await sup.open()
    try:
        sid = (await sup.start("say hi in hello.txt", repo)).session_id
        await sup.confirm(sid)
        row = await sup.wait_for(sid, needs=True, timeout=60)
        assert row.needs_you == "question", row.error
        [decline] = [o for o in sup.question_options(sid) if o.startswith("No")]
        await sup.respond(sid, decline)

        def blocked() -> list[BlockedData]:
            return [e.data for e in events_of(sup, sid) if isinstance(e.data, BlockedData)]

        await eventually(lambda: blocked(), timeout=30)
        [said] = blocked()
        assert said.by == "operator" and said.what == row.question_prompt
        assert decline in said.why
        landed = [e.data for e in events_of(sup, sid) if isinstance(e.data, PaneAnswerData)]
        assert [a.answer for a in landed] == [decline]  # said only once it landed
        # declined, the agent may finish without the edit and its checks fail
        # before the cancel lands: either way the session has ended
        if sup.get(sid).session.state not in (S.FAILED, S.ABANDONED):
            await sup.cancel(sid)
        assert sup.get(sid).session.state in (S.ABANDONED, S.FAILED)
    finally:
        await sup.close()
        for sock in (tmp_path / "tmux").glob("*"):
            subprocess.run(["tmux", "-S", str(sock), "kill-server"], capture_output=True)


@pytest.mark.slow
async def test_a_pane_agents_unanswered_question_stays_needs_you_past_the_window(
    tmp_path: Path,
) -> None:
    """The agent's screen still shows its question after `ask_user_timeout_secs`:
    the row keeps needs-you (said again, never dropped), and a late answer
    still lands in its pane and the run goes on."""
    repo = init_repo(tmp_path / "repo")
    sup = build_supervisor(
        tmp_path / "state",
        FixedDrafter(hello_contract()),
        socket_dir=tmp_path / "tmux",
        default_engine="external:demo",
        config=fast_config(repair_invokes=0, ask_user_timeout_secs=0.3),
    )
    await sup.open()
    try:
        sid = (await sup.start("say hi in hello.txt", repo)).session_id
        await sup.confirm(sid)
        row = await sup.wait_for(sid, needs=True, timeout=60)
        assert row.needs_you == "question", row.error
        await asyncio.sleep(1.5)  # five windows with nobody answering
        row = next(r for r in sup.list() if r.session_id == sid)
        assert row.state is S.RUNNING and row.needs_you == "question"
        assert row.question_reminders >= 3
        screen = sup.agent_screen(sid)
        assert screen is not None and "Do you want to make this edit" in "\n".join(screen.lines)
        await sup.respond(sid, "Yes")
        landed = await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=60)
        assert landed.state in (S.NEEDS_APPROVAL, S.FAILED)  # the run went on past it
        answered = [e.data for e in events_of(sup, sid) if isinstance(e.data, PaneAnswerData)]
        assert [a.answer for a in answered] == ["Yes"]
    finally:
        await sup.close()
        for sock in (tmp_path / "tmux").glob("*"):
            subprocess.run(["tmux", "-S", str(sock), "kill-server"], capture_output=True)
