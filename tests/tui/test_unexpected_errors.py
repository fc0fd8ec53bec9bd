"""A bug in a supervisor call or a screen worker becomes one notification
naming the log file; the console stays up and the traceback goes to the log."""

from __future__ import annotations

import logging
from pathlib import Path

from corral.tui.app import CorralApp
from corral.tui.guard import log_to_file
from corral.tui.screens.board import BoardScreen
from tests.fakes.scripted import Write, contract

from .conftest import FIXED_NOW, make_repo, scripted_supervisor, start_to_approval


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
            await app.ready.wait()
            await pilot.pause(0.1)
            app.clear_notifications()
            sup.reverify = broken  # type: ignore[method-assign]
            sup.review_files = broken  # type: ignore[method-assign]
            await pilot.press("v")  # a supervisor call
            await pilot.pause(0.2)
            await pilot.press("D")  # a screen worker (the diff loader)
            await pilot.pause(0.3)
            notes = [n.message for n in app._notifications]
            assert any(
                n.startswith("Re-verify failed unexpectedly: RuntimeError: simulated bug")
                and str(log_path) in n
                for n in notes
            ), notes
            assert any(n.startswith("Loading the diff failed unexpectedly") for n in notes)
            await pilot.press("escape")
            await pilot.pause(0.1)
            assert isinstance(app.screen, BoardScreen)  # still up and usable
            assert app.is_running
    finally:
        for handler in list(logging.getLogger().handlers):
            if getattr(handler, "baseFilename", None) == str(log_path):
                logging.getLogger().removeHandler(handler)
                handler.close()
    logged = log_path.read_text(encoding="utf-8")
    assert "Traceback" in logged and "simulated bug in the supervisor" in logged
