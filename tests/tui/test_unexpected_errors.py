"""A bug in a supervisor call or a screen worker becomes one notification
naming the log file; the console stays up and the traceback goes to the log."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from corral.tui.app import CorralApp
from corral.tui.guard import log_to_file
from corral.tui.screens.board import BoardScreen
from tests.fakes.scripted import Write, contract

from .conftest import (
    FIXED_NOW,
    board_ready,
    footer_actions,
    make_repo,
    scripted_supervisor,
    start_to_approval,
    until,
)


@pytest.mark.slow
async def test_a_bug_becomes_a_notification_and_a_logged_traceback(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    state = tmp_path / "state"
    log_path = log_to_file(state)
    sup = scripted_supervisor(
        state, contract(("note", "test -f note.txt")), [Write("note.txt", "hi\n")]
    )

    async def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("simulated bug in the supervisor [/b] with [brackets]")

    app = CorralApp(
        sup,
        default_repo=repo,
        clock=lambda: FIXED_NOW,
        on_ready=lambda s: start_to_approval(s, "Write a note", repo),
    )
    try:
        async with app.run_test(size=(150, 40)) as pilot:
            board = await board_ready(app, pilot)
            await until(pilot, "the diff's keys", lambda: "review_diff" in footer_actions(app))
            app.clear_notifications()
            sup.reverify = broken  # type: ignore[method-assign]
            sup.review_files = broken  # type: ignore[method-assign]

            def noted(start: str) -> bool:
                return any(n.message.startswith(start) for n in app._notifications)

            await pilot.press("v")  # a supervisor call
            reverify = "Re-verify failed unexpectedly: RuntimeError: simulated bug"
            await until(pilot, "the re-verify bug's toast", lambda: noted(reverify))
            assert any(
                n.message.startswith(reverify) and str(log_path) in n.message
                for n in app._notifications
            )
            await pilot.press("D")  # a screen worker (the diff loader)
            loading = "Loading the diff failed unexpectedly"
            await until(pilot, "the diff loader's toast", lambda: noted(loading))
            await pilot.press("escape")
            await until(pilot, "the board again", lambda: app.screen is board)
            assert isinstance(app.screen, BoardScreen)  # still up and usable
            assert app.is_running
    finally:
        for handler in list(logging.getLogger().handlers):
            if getattr(handler, "baseFilename", None) == str(log_path):
                logging.getLogger().removeHandler(handler)
                handler.close()
    logged = log_path.read_text(encoding="utf-8")
    assert "Traceback" in logged and "simulated bug in the supervisor" in logged
