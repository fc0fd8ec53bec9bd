"""Once a session is being cancelled, its engine starts no new agent process:
a crash-retry that was under way when the cancel landed must not leave an
agent running for an abandoned session."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from corral.supervisor.agents.profiles import profile_for
from corral.supervisor.engines.base import RunContext
from corral.supervisor.engines.external import ExternalEngine
from tests.conftest import hello_contract


class PanesThatRecordStarts:
    """Stands in for the pane manager: it only notes that a start was asked for."""

    def __init__(self) -> None:
        self.started: list[Any] = []
        self.backend = self
        self.on_untrack: list[Any] = []  # what the engine asks to hear when a pane goes

    async def spawn(self, spec: Any, profile: Any, *, backend: str | None = None) -> Any:
        self.started.append(spec)
        raise AssertionError("a pane was started for a cancelled session")


def context(tmp_path: Path, *, stopping: bool) -> RunContext:
    async def no_answer(_prompt: str, _options: list[str]) -> str:
        return ""

    return RunContext(
        session_id="s1",
        intent="say hi",
        contract=hello_contract(),
        worktree=tmp_path,
        max_iterations=3,
        deadline=None,
        round=2,
        failing_checks=[],
        emit=lambda _event: None,
        ask_user=no_answer,
        take_guidance=list,
        iteration_started=lambda _n: None,
        stopping=lambda: stopping,
    )


async def test_a_cancelled_sessions_engine_starts_no_agent(tmp_path: Path) -> None:
    panes = PanesThatRecordStarts()
    engine = ExternalEngine(
        profile_for("demo"), panes, session_dir=lambda _sid: tmp_path / "session"
    )  # type: ignore[arg-type]
    with pytest.raises(asyncio.CancelledError):
        await engine.spawn(context(tmp_path, stopping=True), "the task")
    assert panes.started == []
