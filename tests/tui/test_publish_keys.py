"""`P` and `O` on a delivered row: push its branch to origin (a real local
bare repo) and open a pull request with gh (a recording stand-in), each
asked once and reported only once done; rows without a delivered branch
offer neither."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from corral.tui.app import CorralApp
from tests.fakes.gh import URL, install_fake_gh, recorded

from .conftest import FIXED_NOW, asked, board_ready, footer_actions, seed_board, until


def _toasts(app: CorralApp) -> list[str]:
    return [str(n.message) for n in app._notifications]


@pytest.mark.slow
async def test_p_pushes_and_o_opens_a_pull_request(
    board_world, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    record = tmp_path / "gh.json"
    install_fake_gh(tmp_path / "bin", record)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    sup, repo, _release = board_world()
    remote = tmp_path / "origin.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    subprocess.run(["git", "-C", str(repo), "remote", "add", "origin", str(remote)], check=True)
    app = CorralApp(
        sup, default_repo=repo, clock=lambda: FIXED_NOW, on_ready=lambda s: seed_board(s, repo)
    )
    async with app.run_test(size=(140, 24)) as pilot:
        board = await board_ready(app, pilot)
        alpha = next(s for s in board.order if board.summaries[s].intent.startswith("Alpha"))
        board.table.move_cursor(row=board.order.index(alpha))  # a diff waiting: not delivered
        await until(pilot, "Alpha's keys", lambda: "approve" in footer_actions(app))
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "Push branch (P)" not in titles and "Open pull request (O)" not in titles
        await pilot.press("P")
        assert app.screen is board  # nothing asked

        delta = next(s for s in board.order if board.summaries[s].intent.startswith("Delta"))
        branch = board.summaries[delta].result_branch
        assert branch
        board.table.move_cursor(row=board.order.index(delta))
        await until(pilot, "the cursor on Delta", lambda: board.selected_id() == delta)
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "Push branch (P)" in titles and "Open pull request (O)" in titles
        app.clear_notifications()
        await pilot.press("P")
        modal = await asked(pilot)
        assert f"Push branch {branch} to origin?" in str(modal.question)
        await until(pilot, "the push toast", lambda: any("pushed to" in t for t in _toasts(app)))
        assert f"Branch {branch} pushed to origin ({remote})." in _toasts(app)
        pushed = subprocess.run(
            ["git", "-C", str(remote), "rev-parse", f"refs/heads/{branch}"],
            capture_output=True,
            text=True,
        )
        assert pushed.stdout.strip() == board.summaries[delta].result_commit

        await pilot.press("O")
        await asked(pilot)
        await until(pilot, "the pull request toast", lambda: any(URL in t for t in _toasts(app)))
        argv = recorded(record)["argv"]
        assert isinstance(argv, list) and argv[argv.index("--title") + 1] == (
            "Delta ships the report"
        )
