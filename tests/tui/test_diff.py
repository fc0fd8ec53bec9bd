"""Gate 2 in the console: untick a hunk, approve, the branch holds the rest."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from textual.widgets import DataTable

from corral.supervisor.api import Supervisor
from corral.supervisor.config import SupervisorConfig
from corral.supervisor.states import CoderState
from corral.tui.app import CorralApp
from corral.tui.screens.diff import DiffScreen
from corral.tui.screens.new_session import NewSessionScreen
from tests.conftest import plan_texts
from tests.fakes.scripted import (
    ScriptedDrafter,
    ScriptedEngine,
    ScriptedEngines,
    Write,
    contract,
)

from .conftest import (
    FIXED_NOW,
    asked,
    board_ready,
    caught_up,
    final_frame,
    footer_actions,
    make_repo,
    open_from_board,
    scripted_supervisor,
    start_to_approval,
    until,
)


def _at_gate_2(sup: Supervisor, repo: Path, intent: str) -> CorralApp:
    """The console once `intent` has run and its diff waits for approval."""
    return CorralApp(
        sup,
        default_repo=repo,
        clock=lambda: FIXED_NOW,
        on_ready=lambda s: start_to_approval(s, intent, repo),
    )


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, capture_output=True, text=True, check=True
    ).stdout


@pytest.mark.slow
async def test_unticking_a_hunk_delivers_only_the_ticked_ones(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    (repo / "long.txt").write_text("".join(f"{i}\n" for i in range(1, 31)))
    git(repo, "add", "long.txt")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "long")
    lines = [str(i) for i in range(1, 31)]
    lines[1], lines[14], lines[28] = "two", "fifteen", "twentynine"
    sup = scripted_supervisor(
        tmp_path / "state",
        contract(("fifteen", "grep -q fifteen long.txt")),
        [Write("long.txt", "\n".join(lines) + "\n")],
    )
    app = _at_gate_2(sup, repo, "three edits")
    async with app.run_test(size=(160, 40)) as pilot:
        screen = await open_from_board(app, pilot, "D")
        assert isinstance(screen, DiffScreen)
        hunks = screen.query_one("#diff-hunks", DataTable)
        assert hunks.row_count == 3
        hunks.focus()
        hunks.move_cursor(row=0)
        await until(pilot, "the hunk list to take focus", lambda: hunks.has_focus)
        await pilot.press("space")  # untick the first hunk
        await until(pilot, "the hunk unticked", lambda: screen.ticked == {"long.txt": {1, 2}})
        await pilot.press("ctrl+a")
        await asked(pilot)
        sid = sup.list()[0].session_id
        row = await sup.wait_for(sid, {CoderState.MERGED}, timeout=20)
    branch = row.result_branch or ""
    delivered = git(repo, "show", f"{branch}:long.txt").splitlines()
    assert delivered[1] == "2"  # the unticked hunk stayed out
    assert delivered[14] == "fifteen" and delivered[28] == "twentynine"
    assert "Corral-Scope: partial" in git(repo, "log", "-1", "--format=%B", branch)


@pytest.mark.slow
def test_diff_review_snapshot(snap_compare, tmp_path: Path) -> None:
    """Files with counts and change kind, hunks with ticks, the verification
    results, and the selected file's diff; one hunk of long.txt is unticked,
    so the file shows ◩, the hunk ☐ and the header a partial approval."""
    repo = make_repo(tmp_path / "repo")
    (repo / "long.txt").write_text("".join(f"{i}\n" for i in range(1, 31)))
    git(repo, "add", "long.txt")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "long")
    lines = [str(i) for i in range(1, 31)]
    lines[1], lines[14] = "two", "fifteen"
    sup = scripted_supervisor(
        tmp_path / "state",
        contract(("fifteen", "grep -q fifteen long.txt")),
        [Write("long.txt", "\n".join(lines) + "\n"), Write("notes.md", "# notes\n")],
    )
    app = _at_gate_2(sup, repo, "Two edits and a note")

    async def ready(pilot) -> None:  # type: ignore[no-untyped-def]
        screen = await open_from_board(app, pilot, "D")
        assert isinstance(screen, DiffScreen)
        hunks = screen.query_one("#diff-hunks", DataTable)
        assert hunks.row_count == 2
        hunks.focus()
        hunks.move_cursor(row=0)
        await until(pilot, "the hunk list to take focus", lambda: hunks.has_focus)
        await pilot.press("space")  # untick the first hunk of long.txt
        await final_frame(
            pilot,
            "the hunk unticked",
            lambda: screen.ticked == {"long.txt": {1}, "notes.md": None},
        )

    assert snap_compare(app, terminal_size=(150, 30), run_before=ready)


@pytest.mark.slow
async def test_the_whole_flow_through_keys(tmp_path: Path) -> None:
    """n → intent → enter → c → the engine works → D → untick one of three
    hunks → a: the branch holds exactly the two approved hunks."""
    repo = make_repo(tmp_path / "repo")
    (repo / "long.txt").write_text("".join(f"{i}\n" for i in range(1, 31)))
    git(repo, "add", "long.txt")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "long")
    lines = [str(i) for i in range(1, 31)]
    lines[1], lines[14], lines[28] = "two", "fifteen", "twentynine"
    sup = Supervisor(
        tmp_path / "state",
        drafter=ScriptedDrafter([contract(("fifteen", "grep -q fifteen long.txt"))]),
        engines=ScriptedEngines(ScriptedEngine([[Write("long.txt", "\n".join(lines) + "\n")]])),
        config=SupervisorConfig(repair_invokes=0),
    )
    app = CorralApp(sup, default_repo=repo, clock=lambda: FIXED_NOW)
    async with app.run_test(size=(160, 40)) as pilot:
        await board_ready(app, pilot)
        await pilot.press("n")
        await until(pilot, "the new-session form", lambda: isinstance(app.screen, NewSessionScreen))
        await pilot.press(*"Name three numbers", "enter")
        rows = await until(
            pilot,
            "the contract to be proposed",
            lambda: [r for r in sup.list() if r.state is CoderState.CONTRACT_PROPOSED],
        )
        sid = rows[0].session_id
        await until(pilot, "the board to offer Confirm", lambda: "confirm" in footer_actions(app))
        await pilot.press("c")
        await asked(pilot)
        await sup.wait_for(sid, {CoderState.NEEDS_APPROVAL}, timeout=20)
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
        )
        hunks = screen.query_one("#diff-hunks", DataTable)
        hunks.focus()
        hunks.move_cursor(row=2)
        await until(pilot, "the hunk list to take focus", lambda: hunks.has_focus)
        await pilot.press("space")
        await until(pilot, "the hunk unticked", lambda: screen.ticked == {"long.txt": {0, 1}})
        await pilot.press("ctrl+a")
        await asked(pilot)
        row = await sup.wait_for(sid, {CoderState.MERGED}, timeout=20)
    delivered = git(repo, "show", f"{row.result_branch}:long.txt").splitlines()
    assert (delivered[1], delivered[14], delivered[28]) == ("two", "fifteen", "29")


@pytest.mark.slow
async def test_reject_from_the_diff_asks_for_a_comment_and_escape_keeps_reviewing(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path / "repo")
    sup = scripted_supervisor(
        tmp_path / "state", contract(("note", "test -f note.txt")), [Write("note.txt", "hello\n")]
    )
    app = _at_gate_2(sup, repo, "Write a note")
    async with app.run_test(size=(150, 40)) as pilot:
        diff = await open_from_board(app, pilot, "D")
        assert isinstance(diff, DiffScreen)
        sid = diff.session_id
        await pilot.press("ctrl+r")
        await asked(pilot, "escape")  # changed my mind: still reviewing, nothing sent
        await until(pilot, "the diff again", lambda: app.screen is diff)
        assert sup.get(sid).session.state is CoderState.NEEDS_APPROVAL
        await pilot.press("ctrl+r")
        await asked(pilot, None)
        await pilot.press(*"too broad", "enter")  # enter types, never rejects
        assert sup.get(sid).session.state is CoderState.NEEDS_APPROVAL
        await pilot.press("ctrl+y")
        row = await sup.wait_for(sid, {CoderState.ABANDONED}, timeout=10)
        assert not isinstance(app.screen, DiffScreen)
        texts = plan_texts(sup, sid)
    assert row.state is CoderState.ABANDONED
    assert "Rejected: too broad" in texts


@pytest.mark.slow
async def test_a_judge_change_is_listed_at_gate_2_and_approved_only_there(tmp_path: Path) -> None:
    """The agent edited the script its check runs: the diff screen lists that
    first, and `a` there (a person who saw it) delivers; no other approve can."""
    from textual.widgets import Static

    from corral.supervisor.errors import CorralError

    repo = make_repo(tmp_path / "repo")
    (repo / "check.sh").write_text("grep -q fifteen long.txt\n")
    (repo / "long.txt").write_text("1\n")
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "check")
    sup = scripted_supervisor(
        tmp_path / "state",
        contract(("fifteen", "bash check.sh")),
        [Write("long.txt", "fifteen\n"), Write("check.sh", "true\n")],
    )
    app = _at_gate_2(sup, repo, "write fifteen")
    async with app.run_test(size=(160, 40)) as pilot:
        waiting = await until(
            pilot,
            "gate 2",
            lambda: [r for r in sup.list() if r.state is CoderState.NEEDS_APPROVAL],
            timeout=60,
        )
        sid = waiting[0].session_id
        with pytest.raises(CorralError, match=r"changed how it is judged: check\.sh"):
            await sup.approve(sid, delivery="branch")  # the board's quick approve
        screen = await open_from_board(app, pilot, "D")
        assert isinstance(screen, DiffScreen)
        shown = screen.query_one("#diff-verification", Static)
        await until(pilot, "the judge change listed", lambda: "check.sh" in str(shown.render()))
        text = str(shown.render())
        assert "The work changed how it is judged" in text and "check.sh (edited" in text
        await pilot.press("ctrl+a")
        await asked(pilot)
        row = await sup.wait_for(sid, {CoderState.MERGED}, timeout=20)
    assert git(repo, "show", f"{row.result_branch}:check.sh") == "true\n"


@pytest.mark.slow
async def test_the_agent_version_results_say_the_hidden_checks_ran_on_the_exam_only(
    tmp_path: Path,
) -> None:
    """A judge change beside a hidden check: the agent-version results listed
    at gate 2 are the visible checks', and the screen says so."""
    from textual.widgets import Static

    from corral.supervisor.models import HiddenCheck, HiddenFile

    repo = make_repo(tmp_path / "repo")
    (repo / "check.sh").write_text("grep -q fifteen long.txt\n")
    (repo / "long.txt").write_text("1\n")
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "check")
    held = HiddenCheck(
        name="hidden_count",
        command="sh held.sh",
        files=[HiddenFile(path="held.sh", content="grep -q fifteen long.txt\n")],
    )
    drafted = contract(("fifteen", "bash check.sh")).model_copy(update={"hidden_checks": [held]})
    sup = scripted_supervisor(
        tmp_path / "state", drafted, [Write("long.txt", "fifteen\n"), Write("check.sh", "true\n")]
    )
    app = _at_gate_2(sup, repo, "write fifteen")
    async with app.run_test(size=(160, 40)) as pilot:
        await until(
            pilot,
            "gate 2",
            lambda: [r for r in sup.list() if r.state is CoderState.NEEDS_APPROVAL],
            timeout=60,
        )
        screen = await open_from_board(app, pilot, "D")
        assert isinstance(screen, DiffScreen)
        shown = screen.query_one("#diff-verification", Static)
        await until(pilot, "the judge change listed", lambda: "check.sh" in str(shown.render()))
        text = str(shown.render())
    assert "With the agent's versions (visible checks only: the hidden checks ran on the exam" in (
        " ".join(text.split())
    )


def test_gate_two_says_a_flaky_test_and_what_an_already_failing_test_hides() -> None:
    """Under each verified check: tests that failed then passed on the
    immediate re-run (flaky, never passed silently), and tests already failing
    at gate 1, in which no regression can be seen. Test names are the
    project's text: shown as written, never as markup."""
    from corral.tui.screens.diff import _verification_notes

    flaky, already = _verification_notes(
        ["tests.test_io::test_timing[red]x[/red]"], ["tests.test_tz::test_zone"]
    )
    assert "flaky: failed, then passed on an immediate re-run" in flaky.plain
    assert "test_timing[red]x[/red]" in flaky.plain
    assert (
        "already failing at gate 1: tests.test_tz::test_zone (this test was already failing: "
        "a regression in it cannot be seen)" in already.plain
    )
    assert _verification_notes([], []) == []
    # where the untouched tree's runner said where it fails, gate 2 says a
    # regression that changes that is seen
    [placed] = _verification_notes([], ["tests.test_tz::test_zone"], 1)
    assert "a regression in it is seen only if it changes where or how it fails" in placed.plain
