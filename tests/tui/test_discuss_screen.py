"""The discussion screen: a streamed answer, a refusal shown, a prepared task
started as a session that carries the agreed constraints and links back."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import RichLog

from corral.supervisor.discuss import Discussions
from corral.supervisor.llm.base import ToolCall, Turn
from corral.supervisor.states import CoderState
from corral.tui.app import CorralApp
from corral.tui.screens.discuss import DiscussScreen
from corral.tui.screens.new_session import NewSessionScreen
from tests.fakes.scripted_llm import ScriptedProvider

from .conftest import FIXED_NOW, board_ready, final_frame, until


def shows(screen: DiscussScreen, text: str) -> bool:
    """The transcript has a line with `text` (it is written as events arrive)."""
    log = screen.query_one("#discuss-log", RichLog)
    return any(text in line.text for line in log.lines)


async def open_discussion(app: CorralApp, pilot) -> DiscussScreen:  # type: ignore[no-untyped-def]
    """`d` on the board, until the discussion is open and follows its events."""
    board = app.screen
    await pilot.press("d")
    return await until(
        pilot,
        "the discussion to open",
        lambda: (
            app.screen
            if app.screen is not board
            and isinstance(app.screen, DiscussScreen)
            and app.screen.discussion is not None
            else None
        ),
    )


@pytest.mark.slow
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
        await board_ready(app, pilot)
        app.owned_discussions = Discussions(tmp_path / "state", provider)
        screen = await open_discussion(app, pilot)
        discussion = screen.discussion
        assert discussion is not None
        await pilot.press(*"please add the file", "enter")
        task = await until(pilot, "the prepared task", lambda: discussion.prepared_task)
        assert task.constraints == ["keep the public API unchanged"]
        assert not (repo / "x.txt").exists()  # the write was refused
        card = screen.query_one("#discuss-task")
        await until(pilot, "the task card", lambda: "Prepared task" in str(card.render()))
        log = screen.query_one("#discuss-log")
        log.focus()
        await until(pilot, "the transcript to take focus", lambda: log.has_focus)
        await pilot.press("s")
        await until(pilot, "the new-session form", lambda: isinstance(app.screen, NewSessionScreen))
        await pilot.click("#start")
        rows = await until(
            pilot,
            "a session started from the discussion",
            lambda: [
                r
                for r in sup.list()
                if r.discussion_id == discussion.id and r.state is CoderState.CONTRACT_PROPOSED
            ],
        )
        session = sup.get(rows[0].session_id).session
        assert session.discussion_constraints == ["keep the public API unchanged"]
        assert discussion.linked_sessions


@pytest.mark.slow
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
        await board_ready(app, pilot)
        app.owned_discussions = Discussions(tmp_path / "state", provider)
        screen = await open_discussion(app, pilot)
        await pilot.press(*"why is the importer slow?", "enter")
        # the turn's last words are in the transcript: every event before them is too
        # (a model's Markdown is shown as written: its backticks stay, nothing is rendered)
        await final_frame(
            pilot,
            "the whole answer on screen",
            lambda: (
                shows(screen, "Prepared a task: `Read the file once in the importer`.")
                and "Prepared task" in str(screen.query_one("#discuss-task").render())
            ),
        )

    assert snap_compare(app, terminal_size=(120, 30), run_before=ready)


@pytest.mark.slow
async def test_d_resumes_the_repos_saved_discussion(board_world, tmp_path: Path) -> None:
    sup, repo, _release = board_world()
    provider = ScriptedProvider([Turn(text="Hello.")])
    app = CorralApp(sup, default_repo=repo, clock=lambda: FIXED_NOW)
    async with app.run_test(size=(120, 30)) as pilot:
        board = await board_ready(app, pilot)
        app.owned_discussions = Discussions(tmp_path / "state", provider)
        first = await open_discussion(app, pilot)
        assert first.discussion is not None
        await pilot.press(*"hi", "enter")
        await until(pilot, "the answer", lambda: shows(first, "Hello."))
        await app.owned_discussions.get(first.discussion.id).wait()
        first_id = first.discussion.id
        await app.owned_discussions.close(first_id)
        await pilot.press("escape")
        await until(pilot, "the board again", lambda: app.screen is board)
        again = await open_discussion(app, pilot)
        assert again.discussion is not None
        assert again.discussion.id == first_id  # resumed, history replayed
        await pilot.press("ctrl+n")
        fresh = await until(
            pilot,
            "a fresh discussion",
            lambda: (
                app.screen
                if isinstance(app.screen, DiscussScreen)
                and app.screen is not again
                and app.screen.discussion is not None
                else None
            ),
        )
        assert fresh.discussion is not None and fresh.discussion.id != first_id
