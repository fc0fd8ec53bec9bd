"""The whole flow through keys with the real demo agent in a real tmux pane:
n → intent → enter → c → the agent works and asks before editing → the
operator answers from the session screen → D → leave one of three hunks out →
a: the branch holds exactly the two approved hunks, and the contract was
re-run on that part before delivery."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from textual.widgets import DataTable

from corral.supervisor.demo import ASSETS, README_JSON, REPORT_JSON, DemoDrafter, make_demo_repo
from corral.supervisor.factory import build_supervisor
from corral.supervisor.states import CoderState
from corral.tui.app import CorralApp
from corral.tui.screens.diff import DiffScreen
from corral.tui.screens.new_session import NewSessionScreen
from corral.tui.screens.session import SessionScreen
from tests.conftest import fast_config

from .conftest import asked, board_in_sync, board_ready, caught_up, footer_actions, until

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]

INTENT = "Add a --json flag to the word-count report"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, capture_output=True, text=True, check=True
    ).stdout


@pytest.fixture
def tmux_dir(tmp_path: Path):  # type: ignore[no-untyped-def]
    path = tmp_path / "tmux"
    yield path
    for sock in path.glob("*"):
        subprocess.run(["tmux", "-S", str(sock), "kill-server"], capture_output=True)


async def test_the_demo_agent_flow_with_two_of_three_hunks_approved(
    tmp_path: Path, tmux_dir: Path
) -> None:
    repo = make_demo_repo(tmp_path)
    sup = build_supervisor(
        tmp_path / "state",
        DemoDrafter(),
        socket_dir=tmux_dir,
        default_engine="external:demo",
        demo_pace=0.05,
        config=fast_config(ask_user_timeout_secs=60),
    )
    app = CorralApp(sup, default_repo=repo)
    async with app.run_test(size=(160, 45)) as pilot:
        board = await board_ready(app, pilot)
        await pilot.press("n")
        await until(pilot, "the new-session form", lambda: isinstance(app.screen, NewSessionScreen))
        await pilot.press(*INTENT, "enter")
        row = await until(
            pilot,
            "the contract to be proposed",
            lambda: next((r for r in sup.list() if r.state is CoderState.CONTRACT_PROPOSED), None),
            timeout=40,
        )
        sid = row.session_id
        await until(pilot, "the board to offer Confirm", lambda: "confirm" in footer_actions(app))
        await pilot.press("c")
        await asked(pilot)

        # the demo agent asks before its first edit: the board says so
        await until(pilot, "the agent's question", lambda: sup.get(sid).needs_you_label, timeout=40)
        assert sup.list()[0].needs_you == "question"
        await until(pilot, "the question on the board", lambda: board_in_sync(app))
        await pilot.press("enter")
        screen = await until(
            pilot,
            "the session screen",
            lambda: app.screen if isinstance(app.screen, SessionScreen) else None,
        )
        question = screen.query_one("#question")
        edit = "Do you want to make this edit to textkit/report.py?"
        await until(
            pilot, "the question on the session screen", lambda: edit in str(question.render())
        )
        # the answer input has focus: an option's number and enter pick it
        await pilot.press("2", "enter")  # "Yes, and don't ask again this session"
        await pilot.press("escape", "escape")  # leave the input, then the screen
        await until(pilot, "the board again", lambda: app.screen is board)

        await sup.wait_for(sid, {CoderState.NEEDS_APPROVAL}, timeout=60)
        await until(
            pilot, "the board to offer the diff", lambda: "review_diff" in footer_actions(app)
        )
        await pilot.press("D")
        screen = await until(
            pilot,
            "the diff to load",
            lambda: (
                app.screen if isinstance(app.screen, DiffScreen) and caught_up(app.screen) else None
            ),
            timeout=40,
        )
        counts = {f.path: len(f.hunks) for f in screen.files}
        assert counts == {"README.md": 1, "textkit/report.py": 2}  # three hunks, two files
        files = screen.query_one("#diff-files", DataTable)
        files.focus()
        files.move_cursor(row=[f.path for f in screen.files].index("README.md"))
        await until(
            pilot,
            "the README selected",
            lambda: (
                files.has_focus
                and screen.current is not None
                and screen.current.path == "README.md"
            ),
        )
        await pilot.press("space")  # leave the README note out
        await until(
            pilot, "the README unticked", lambda: screen.ticked == {"textkit/report.py": None}
        )
        await pilot.press("ctrl+a")
        await asked(pilot)
        row = await sup.wait_for(sid, {CoderState.MERGED}, timeout=60)

    branch = row.result_branch or ""
    assert git(repo, "show", f"{branch}:textkit/report.py") == REPORT_JSON
    original_readme = (ASSETS / "README.md").read_text(encoding="utf-8")
    assert git(repo, "show", f"{branch}:README.md") == original_readme != README_JSON
    message = git(repo, "log", "-1", "--format=%B", branch)
    assert "Corral-Scope: partial" in message
    # the left-out part is still in the session's worktree, not lost
    worktree = Path(sup.get(sid).session.worktree or "")
    assert (worktree / "README.md").read_text(encoding="utf-8") == README_JSON
