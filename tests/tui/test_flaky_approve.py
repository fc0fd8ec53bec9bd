"""In the console, a check that passed only on its immediate re-run is
delivered only after a person was shown it: the board's quick approve opens
the diff review instead of delivering (no call reaches the owner), so does
the session screen's, and the
review's approve asks a question naming the flaky test whose default keeps
the session; only going ahead on that question acknowledges it. On the old
code the board's `a` then ctrl+y delivered it, the question silent."""

from __future__ import annotations

from pathlib import Path

import pytest

from corral.supervisor.api import Supervisor
from corral.supervisor.errors import FlakyPassHeld
from corral.tui.app import CorralApp
from corral.tui.confirm import GO_KEY
from corral.tui.screens.diff import DiffScreen
from tests.conftest import git
from tests.fakes.flaky import FLAKY_TEST, INTENT, calc_contract, calc_project, rigged
from tests.fakes.scripted import Write

from .conftest import asked, board_ready, scripted_supervisor, start_to_approval, until
from .test_board import _cell_text
from .test_gate_safety import Watched, open_session

pytestmark = pytest.mark.usefixtures("interpreter_visible")


def _flaky_console(tmp_path: Path) -> tuple[Supervisor, CorralApp, dict[str, str], Path]:
    """A console whose board gets one session at gate 2 with a flaky pass."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    calc_project(repo)
    sup = scripted_supervisor(tmp_path / "state", calc_contract(), [Write("calc.py", rigged())])
    ids: dict[str, str] = {}

    async def seed(s: Supervisor) -> None:
        ids["flaky"] = await start_to_approval(s, INTENT, repo)

    return sup, CorralApp(sup, default_repo=repo, on_ready=seed), ids, repo


@pytest.mark.slow
async def test_the_boards_quick_approve_of_a_flaky_pass_opens_its_review_first(
    tmp_path: Path,
) -> None:
    sup, app, ids, repo = _flaky_console(tmp_path)
    async with app.run_test(size=(160, 50)) as pilot:
        board = await board_ready(app, pilot)
        sid = ids["flaky"]
        assert [r.flaky for r in sup.get(sid).session.last_check_results] == [[FLAKY_TEST]]
        watched = Watched(sup)
        board.table.move_cursor(row=board.order.index(sid))
        await pilot.press("a")
        review = await until(
            pilot,
            "the diff review",
            lambda: app.screen if isinstance(app.screen, DiffScreen) else None,
        )
        assert watched.calls == []  # nothing was sent to the owner
        # the session screen's approve (ctrl+a) opens the same review
        await pilot.press("escape")
        screen = await open_session(app, pilot, sid)
        await pilot.press("ctrl+a")
        review = await until(
            pilot,
            "the diff review from the session screen",
            lambda: app.screen if isinstance(app.screen, DiffScreen) else None,
        )
        assert app.screen_stack[-2] is screen and watched.calls == []
        await until(pilot, "the review's files", lambda: review.files)
        await pilot.press("ctrl+a")
        question = await asked(pilot, then="enter")  # the default keeps it
        assert FLAKY_TEST in question.question and "passed only on an immediate re-run" in (
            question.question
        )
        assert watched.calls == [] and sup.get(sid).session.state.value == "needs_approval"
        await pilot.press("ctrl+a")
        await asked(pilot, then=GO_KEY)  # the person goes ahead, having been shown it
        await until(pilot, "the delivery", lambda: sup.get(sid).session.state.value == "merged")
        assert watched.calls == ["approve"]
    assert git(repo, "branch", "--list", "corral/*").strip() != ""


@pytest.mark.slow
async def test_a_part_whose_checks_pass_only_on_their_rerun_is_asked_about_again(
    tmp_path: Path,
) -> None:
    """The verified tree carries the marker, so gate 2 shows no flake; the
    part ticked leaves it out, so the checks on that part pass only on their
    re-run. The console puts the gate's sentence to the person as a question
    of its own (enter keeps); only ctrl+y on it delivers. On the old code the
    part was delivered as if its checks had passed at once."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    calc_project(repo)
    writes = [Write("calc.py", rigged()), Write(".warm", "")]
    sup = scripted_supervisor(tmp_path / "state", calc_contract(), writes)
    ids: dict[str, str] = {}

    async def seed(s: Supervisor) -> None:
        ids["part"] = await start_to_approval(s, INTENT, repo)

    app = CorralApp(sup, default_repo=repo, on_ready=seed)
    async with app.run_test(size=(160, 50)) as pilot:
        board = await board_ready(app, pilot)
        sid = ids["part"]
        assert [r.flaky for r in sup.get(sid).session.last_check_results] == [[]]
        board.table.move_cursor(row=board.order.index(sid))
        await pilot.press("D")
        review = await until(
            pilot,
            "the diff review",
            lambda: app.screen if isinstance(app.screen, DiffScreen) else None,
        )
        await until(pilot, "the review's files", lambda: review.files)
        assert review.current is not None and review.current.path == ".warm"
        await pilot.press("space")  # untick the marker: only calc.py is approved
        assert list(review.ticked) == ["calc.py"]
        await pilot.press("ctrl+a")
        await asked(pilot, then=GO_KEY)  # the approve itself names no flake
        again = await asked(pilot, then="enter")  # the part's checks needed a re-run: kept
        assert "Deliver anyway?" in again.question and FLAKY_TEST in again.question
        assert sup.get(sid).session.state.value == "needs_approval"
        assert git(repo, "branch", "--list", "corral/*").strip() == ""
        await pilot.press("ctrl+a")
        await asked(pilot, then=GO_KEY)
        await asked(pilot, then=GO_KEY)  # the person accepts it, having been shown it
        await until(pilot, "the delivery", lambda: sup.get(sid).session.state.value == "merged")
    branch = sup.get(sid).session.result_branch
    assert branch and git(repo, "show", "--name-only", "--format=", branch).split() == ["calc.py"]


@pytest.mark.slow
async def test_the_board_shows_the_gates_hold_as_the_rows_need(tmp_path: Path) -> None:
    """An approve from elsewhere (`corral run --deliver`) that the gate
    refuses leaves the row needing you for the hold, in the gate's words (on
    the old code it still said "diff ready for approval")."""
    sup, app, ids, _repo = _flaky_console(tmp_path)
    async with app.run_test(size=(160, 50)) as pilot:
        board = await board_ready(app, pilot)
        sid = ids["flaky"]
        with pytest.raises(FlakyPassHeld):
            await sup.approve(sid, delivery="branch")

        def need() -> str:
            return _cell_text(board.table, board.order.index(sid), 2)

        await until(pilot, "the hold on the board", lambda: need().startswith("held: "))
        assert "--accept-flaky" in need() and board.summaries[sid].needs_you is not None
