"""An answer in words is reported only once its question left the screen.

Real programs in real tmux panes (private servers) ask a question that takes
text, the way agents ask for a note or a correction: one reads the line and
goes on (the question leaves the screen), the other never reads its input
(the terminal echoes the words, the question stays). The second must not be
reported answered: the log says the answer did not land and the question is
asked again."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from corral.supervisor.agents.profiles import profile_for
from corral.supervisor.api import Supervisor
from corral.supervisor.contracts.drafting import FixedDrafter
from corral.supervisor.events import PaneAnswerData
from corral.supervisor.factory import build_supervisor
from corral.supervisor.models import ContractCheck, EventKind, OutcomeContract
from corral.supervisor.panes.base import PaneSpec
from corral.supervisor.panes.manager import PaneManager
from corral.supervisor.panes.tmux import TmuxBackend
from corral.supervisor.states import CoderState as S
from corral.supervisor.status import AgentStatus, Question
from tests.conftest import events_of, eventually, fast_config, git, plan_texts, row_of

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

ASK = "Would you like to add a note for the reviewer?"

# argv: mode ("listens" | "ignores"), then "--task" when it first takes a task
# by paste at a `> ` prompt (as a custom: agent does) before asking.
WORDS = r"""
import os, select, sys, time
mode, task = sys.argv[1], "--task" in sys.argv
def read_paste():
    data = os.read(0, 65536)
    while select.select([0], [], [], 0.5)[0]:
        data += os.read(0, 65536)
    return data.decode(errors="replace").strip()
if task:
    sys.stdout.write("words agent v1\n> "); sys.stdout.flush()
    read_paste()
    for i in range(3):
        print(f"working on the task, step {i + 1}", flush=True)
        time.sleep(0.3)
    open("done.txt", "w").write("ok\n")
sys.stdout.write("\x1b[2J\x1b[H" + "ASK\n> "); sys.stdout.flush()
if mode == "ignores":
    time.sleep(3600)   # never reads: the terminal echoes what is typed, nothing more
note = read_paste()
sys.stdout.write("\x1b[2J\x1b[H" + f"noted: {note}\n> "); sys.stdout.flush()
time.sleep(3600)
""".replace("ASK", ASK)


async def words_pane(tmp_path: Path, mode: str) -> PaneManager:
    script = tmp_path / "words.py"
    script.write_text(WORDS, encoding="utf-8")
    manager = PaneManager(TmuxBackend(socket_dir=tmp_path / "tmux"), tmp_path / "hooks")
    spec = PaneSpec(
        session_id="s1",
        incarnation=1,
        name="corral-s1",
        cwd=tmp_path,
        argv=[sys.executable, str(script), mode],
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8"},
        width=100,
        height=20,
    )
    await manager.spawn(spec, profile_for(f"custom:{sys.executable} words.py"))
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        await manager.sweep_once()
        record = manager.record("s1")
        if record and record.status.status is AgentStatus.WAITING and record.status.question:
            assert record.status.question == Question(ASK)
            return manager
        await asyncio.sleep(0.1)
    raise AssertionError("the free-text question was never read as a question")


def screen_of(manager: PaneManager) -> str:
    handle = manager.records["s1"].handle
    return "\n".join(manager.backend.capture([handle])[handle.owner].lines)


async def test_words_taken_by_the_agent_are_reported_once_the_question_left(
    tmp_path: Path,
) -> None:
    manager = await words_pane(tmp_path, "listens")
    try:
        landing = await manager.choose("s1", Question(ASK), "ship it on Friday")
        assert landing.landed, landing.detail
        assert landing.detail == "answered in words"
        screen = screen_of(manager)
        assert "noted: ship it on Friday" in screen and ASK not in screen
    finally:
        manager.backend.close()
        manager.backend.kill_server()  # type: ignore[attr-defined]


@pytest.mark.slow
async def test_words_the_agent_never_reads_are_not_reported_answered(tmp_path: Path) -> None:
    manager = await words_pane(tmp_path, "ignores")
    try:
        landing = await manager.choose("s1", Question(ASK), "ship it on Friday")
        assert not landing.landed
        assert landing.detail == "the words were sent, but the question is still on the screen"
        screen = screen_of(manager)
        assert "ship it on Friday" in screen and ASK in screen  # echoed, never taken
    finally:
        manager.backend.close()
        manager.backend.kill_server()  # type: ignore[attr-defined]


@pytest.mark.slow
async def test_an_agent_that_ignores_the_words_is_asked_again_and_the_log_says_why(
    tmp_path: Path,
) -> None:
    """Through the supervisor: the operator's words go to a custom: agent that
    never reads them; no answer is logged as given, the log says it did not
    land, and the question is put to the operator again."""
    script = tmp_path / "words.py"
    script.write_text(WORDS, encoding="utf-8")
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "README.md").write_text("words\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "init")
    done = OutcomeContract(
        checks=[ContractCheck(name="done", command="test -f done.txt", timeout_secs=10)]
    )
    sup: Supervisor = build_supervisor(
        tmp_path / "state",
        FixedDrafter(done),
        socket_dir=tmp_path / "tmux",
        default_engine=f"custom:{sys.executable} {script} ignores --task",
        config=fast_config(ask_user_timeout_secs=60),
    )
    await sup.open()
    try:
        sid = (await sup.start("write done.txt", repo)).session_id
        await sup.wait_for(sid, needs=True, timeout=30)
        await sup.confirm(sid)
        row = await sup.wait_for(sid, needs=True, timeout=60)
        assert row.needs_you == "question" and row.question_prompt == ASK

        def asked() -> int:
            return sum(e.kind is EventKind.USER_INPUT_REQUESTED for e in events_of(sup, sid))

        before = asked()
        await sup.respond(sid, "ship it on Friday")
        not_landed = (
            "The answer 'ship it on Friday' did not land: the words were sent, but the "
            "question is still on the screen."
        )
        await eventually(lambda: not_landed in plan_texts(sup, sid), timeout=30)
        await eventually(lambda: asked() > before, timeout=15)
        row = await sup.wait_for(sid, needs=True, timeout=15)
        assert row.needs_you == "question" and row.question_prompt == ASK
        assert row_of(sup, sid).state is not S.NEEDS_APPROVAL
        answered = [e.data for e in events_of(sup, sid) if isinstance(e.data, PaneAnswerData)]
        assert answered == []  # never logged as answered
    finally:
        await sup.close()
        for sock in (tmp_path / "tmux").glob("*"):
            subprocess.run(["tmux", "-S", str(sock), "kill-server"], capture_output=True)
