"""An agent given its task on the command line (Gemini CLI's `-i`) that
takes longer than corral's start grace to draw its first screen — Gemini CLI
on a loaded machine took 22 s — then submits the task: its first idle
screen is not the end of a turn that never began. Counted from the spawn,
the grace had run out by then, the turn ended at once and the session
failed with nothing done (what looked like Gemini "never submitting its
task")."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from corral.supervisor.engines import external
from corral.supervisor.events import ContractEvaluatedData
from corral.supervisor.states import CoderState as S
from tests.integration.test_sandbox_agents import FEATURE, World, open_sup, world

__all__ = ["world"]  # the fixture, shared

pytestmark = pytest.mark.slow

GRACE = 5.0
# Gemini CLI's screens (profiles.GEMINI's markers): its footer when idle, a
# spinner line while it works
SLOW_GEMINI = r"""#!/bin/bash
sleep 8
printf '\n\n  ~/repo   no sandbox   gemini-2.5-pro'
sleep 2
clear; echo '⠧ Thinking... (esc to cancel, 2s)'
sleep 2
echo done > feature.txt
clear; printf '\n\n  ~/repo   no sandbox   gemini-2.5-pro'
sleep 600
"""


async def test_a_task_on_the_command_line_waits_for_the_agents_first_screen(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(external, "TURN_START_GRACE", GRACE)
    bin_dir = world.base / "bin"
    bin_dir.mkdir()
    (bin_dir / "gemini").write_text(SLOW_GEMINI)
    (bin_dir / "gemini").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    sup = await open_sup(world, "external:gemini", FEATURE)
    try:
        started = await sup.start("do the task", world.repo)
        await sup.confirm(started.session_id)
        row = await sup.wait_for(started.session_id, {S.NEEDS_APPROVAL, S.FAILED}, timeout=90)
        assert row.state is S.NEEDS_APPROVAL, row.error
        # one turn, judged once: not an early end, verified red, then a repair round
        judged = [e.data for e in sup.replay(started.session_id)]
        judged = [d for d in judged if isinstance(d, ContractEvaluatedData)]
        assert [d.passed for d in judged] == [True]
        assert (Path(started.worktree or "") / "feature.txt").read_text() == "done\n"
        await sup.cancel(started.session_id)
    finally:
        await sup.close()
