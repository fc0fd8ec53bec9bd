"""`X` in a console attached to another process's owner: the delete is the
owner's call, and the row leaves the attached board too (its mirror resyncs
without the deleted session)."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import pytest

from corral.supervisor.api import Supervisor
from corral.supervisor.remote import AttachedSupervisor
from corral.tui.app import CorralApp
from tests.conftest import fast_config

from .conftest import asked, board_of, footer_actions, until
from .test_attached_console import owner

__all__ = ["owner"]  # the fixture: an owner serving its socket on its own loop


@pytest.mark.slow
async def test_x_in_an_attached_console_deletes_at_the_owner(owner) -> None:  # type: ignore[no-untyped-def]
    thread, repo = owner
    gone = (await thread.call(thread.sup.start("say hi", repo))).session_id
    kept = (await thread.call(thread.sup.start("say hello", repo))).session_id
    await thread.call(thread.sup.cancel(gone))
    worktree = Path(thread.sup.get(gone).session.worktree or "")
    assert worktree.is_dir()
    attached = AttachedSupervisor(thread.sup.state_dir, config=fast_config())
    app = CorralApp(cast(Supervisor, attached), default_repo=repo, attached=True)
    async with app.run_test(size=(140, 40)) as pilot:
        await app.ready.wait()
        board = await until(pilot, "the board", lambda: board_of(app))
        await until(pilot, "both rows", lambda: {gone, kept} <= set(board.order))
        board.table.move_cursor(row=board.order.index(gone))
        await until(pilot, "the finished row's keys", lambda: "archive" in footer_actions(app))
        await pilot.press("X")
        await asked(pilot)
        await until(pilot, "the row to leave", lambda: gone not in board.summaries, timeout=10)
        assert kept in board.order
    assert all(r.session_id != gone for r in thread.sup.list())
    assert not worktree.exists()
