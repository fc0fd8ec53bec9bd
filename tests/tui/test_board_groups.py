"""`g` groups the board by repository: a heading per repo with its counts,
the needs-you rows first under each, the cursor stepping over the headings;
`g` again (or the palette) gives one list back. Off at start."""

from __future__ import annotations

from pathlib import Path

import pytest

from corral.supervisor.api import Supervisor
from corral.supervisor.states import CoderState
from corral.tui import grouping
from corral.tui.app import CorralApp

from .conftest import (
    FIXED_NOW,
    board_ready,
    final_frame,
    make_repo,
    seed_board,
    until,
)


def _app(sup: Supervisor, repo: Path, other: Path) -> CorralApp:
    async def seed(s: Supervisor) -> None:
        await seed_board(s, repo)
        # a second repo: a diff waiting, and a contract waiting
        alpha = (await s.start("Alpha again, in atlas", other)).session_id
        await s.confirm(alpha)
        await s.wait_for(alpha, {CoderState.NEEDS_APPROVAL}, timeout=20)
        await s.start("Echo in atlas awaits its contract", other)

    return CorralApp(sup, default_repo=repo, clock=lambda: FIXED_NOW, on_ready=seed)


@pytest.mark.slow
async def test_g_groups_rows_under_a_heading_per_repo(board_world, tmp_path: Path) -> None:
    sup, repo, _release = board_world()
    app = _app(sup, repo, make_repo(tmp_path / "atlas"))
    async with app.run_test(size=(140, 30)) as pilot:
        board = await board_ready(app, pilot)
        table = board.table
        assert not any(grouping.is_heading(k) for k in table.row_keys())  # off by default
        ungrouped = list(board.order)

        await pilot.press("g")
        keys = await until(
            pilot, "the headings", lambda: table.row_keys() if board._titles else None
        )
        headings = [k for k in keys if grouping.is_heading(k)]
        assert len(headings) == 2 and keys[0] == headings[0]
        titles = [board._titles[h].plain for h in headings]
        assert titles[0].startswith("▾ atlas") and "2 sessions:  2 need you" in titles[0]
        assert titles[1].startswith("▾ shop") and "5 sessions:  2 need you" in titles[1]
        split = keys.index(headings[1])
        for group in (keys[1:split], keys[split + 1 :]):
            repos = {board.summaries[k].repo for k in group}
            assert len(repos) == 1
            needs = [board.summaries[k].needs_you is not None for k in group]
            assert needs == sorted(needs, reverse=True)  # needs-you first in each group
            assert group == [k for k in ungrouped if k in group]  # board order kept
        assert sorted(board.order) == sorted(ungrouped)  # the same sessions

        # the cursor never rests on a heading: home lands on the first session,
        # and up from the first row of a group goes to the last of the one above
        await pilot.press("home")
        assert table.cursor_row == 1 and board.selected_id() == keys[1]
        table.move_cursor(row=split + 1)
        await pilot.press("up")
        assert table.cursor_row == split - 1 and board.selected() is not None

        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "Group by repo (g)" in titles
        await pilot.press("g")
        await until(
            pilot,
            "one list again",
            lambda: not any(grouping.is_heading(k) for k in table.row_keys()),
        )
        assert table.row_keys() == ungrouped


@pytest.mark.slow
def test_board_grouped_by_repo_snapshot(snap_compare, board_world, tmp_path: Path) -> None:
    """Two repos, each under its heading and counts, needs-you rows first."""
    sup, repo, _release = board_world()
    app = _app(sup, repo, make_repo(tmp_path / "atlas"))

    async def ready(pilot) -> None:  # type: ignore[no-untyped-def]
        board = await board_ready(app, pilot)
        await pilot.press("g")
        await until(pilot, "the headings", lambda: bool(board._titles))
        app.clear_notifications()
        await final_frame(pilot, "the toasts to go", lambda: not app.screen.query("Toast"))

    assert snap_compare(app, terminal_size=(140, 24), run_before=ready)
