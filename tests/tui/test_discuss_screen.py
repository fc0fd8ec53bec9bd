"""The discussion screen: a streamed answer, a refusal shown, a prepared task
started as a session that carries the agreed constraints and links back."""

from __future__ import annotations

from pathlib import Path

from corral.supervisor.discuss import Discussions
from corral.supervisor.llm.base import ToolCall, Turn
from corral.supervisor.states import CoderState
from corral.tui.app import CorralApp
from corral.tui.screens.discuss import DiscussScreen
from corral.tui.screens.new_session import NewSessionScreen
from tests.fakes.scripted_llm import ScriptedProvider

from .conftest import FIXED_NOW


async def test_a_prepared_task_starts_a_linked_session(board_world, tmp_path: Path) -> None:
    sup, repo, _release = board_world()
    provider = ScriptedProvider(
        [
            Turn(
                text="",
                tool_calls=(ToolCall("w1", "write_file", {"path": "x.txt", "content": "no"}),),
                stop_reason="tool_use",
            ),
            Turn(
                text="I can't write files here. Let me prepare a task instead.",
                tool_calls=(
                    ToolCall(
                        "p1",
                        "prepare_coding_task",
                        {
                            "intent": "Alpha adds a file",
                            "constraints": ["keep the public API unchanged"],
                        },
                    ),
                ),
                stop_reason="tool_use",
            ),
            Turn(text="Prepared: **Alpha adds a file**."),
        ]
    )
    app = CorralApp(sup, default_repo=repo, clock=lambda: FIXED_NOW)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.pause(0.2)
        app.discussions = Discussions(tmp_path / "state", provider)
        await pilot.press("d")
        await pilot.pause(0.3)
        screen = app.screen
        assert isinstance(screen, DiscussScreen)
        await pilot.press(*"please add the file", "enter")
        for _ in range(50):
            await pilot.pause(0.1)
            if screen.discussion is not None and screen.discussion.prepared_task is not None:
                break
        task = screen.discussion.prepared_task
        assert task is not None and task.constraints == ["keep the public API unchanged"]
        assert not (repo / "x.txt").exists()  # the write was refused
        card = str(screen.query_one("#discuss-task").render())
        assert "Prepared task" in card
        screen.query_one("#discuss-log").focus()
        await pilot.press("s")
        await pilot.pause(0.2)
        assert isinstance(app.screen, NewSessionScreen)
        await pilot.click("#start")
        await pilot.pause(0.2)
        for _ in range(100):
            await pilot.pause(0.1)
            rows = [r for r in sup.list() if r.discussion_id == screen.discussion.id]
            if rows and rows[0].state is CoderState.CONTRACT_PROPOSED:
                break
        assert rows, "no session was started from the discussion"
        session = sup.get(rows[0].session_id).session
        assert session.discussion_constraints == ["keep the public API unchanged"]
        assert screen.discussion.linked_sessions


def test_discussion_snapshot(snap_compare, board_world, tmp_path: Path) -> None:
    """Streamed answer rendered as markdown, a refused write, the prepared task."""
    sup, repo, _release = board_world()
    provider = ScriptedProvider(
        [
            Turn(
                text="",
                tool_calls=(ToolCall("w1", "shell", {"command": "rm -rf build"}),),
                stop_reason="tool_use",
            ),
            Turn(
                text="The importer re-reads the **whole file** for every row.",
                tool_calls=(
                    ToolCall(
                        "p1",
                        "prepare_coding_task",
                        {
                            "intent": "Read the file once in the importer",
                            "constraints": ["keep the CSV format"],
                        },
                    ),
                ),
                stop_reason="tool_use",
            ),
            Turn(text="Prepared a task: `Read the file once in the importer`."),
        ]
    )
    app = CorralApp(sup, default_repo=repo, clock=lambda: FIXED_NOW)

    async def ready(pilot) -> None:  # type: ignore[no-untyped-def]
        await pilot.pause(0.2)
        app.discussions = Discussions(tmp_path / "state", provider)
        await pilot.press("d")
        await pilot.pause(0.3)
        await pilot.press(*"why is the importer slow?", "enter")
        for _ in range(50):
            await pilot.pause(0.1)
            if app.screen.discussion and app.screen.discussion.prepared_task:
                break
        await pilot.pause(0.3)

    assert snap_compare(app, terminal_size=(120, 30), run_before=ready)


async def test_d_resumes_the_repos_saved_discussion(board_world, tmp_path: Path) -> None:
    sup, repo, _release = board_world()
    provider = ScriptedProvider([Turn(text="Hello.")])
    app = CorralApp(sup, default_repo=repo, clock=lambda: FIXED_NOW)
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause(0.2)
        app.discussions = Discussions(tmp_path / "state", provider)
        await pilot.press("d")
        await pilot.pause(0.3)
        first = app.screen
        await pilot.press(*"hi", "enter")
        await first.discussion.wait()
        first_id = first.discussion.id
        await app.discussions.close(first_id)
        await pilot.press("escape")
        await pilot.pause(0.2)
        await pilot.press("d")
        await pilot.pause(0.5)
        assert app.screen.discussion.id == first_id  # resumed, history replayed
        await pilot.press("ctrl+n")
        await pilot.pause(0.5)
        assert app.screen.discussion.id != first_id  # a fresh one on request
