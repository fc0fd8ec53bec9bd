"""Gate 2 in the console: untick a hunk, approve, the branch holds the rest."""

from __future__ import annotations

import subprocess
from pathlib import Path

from textual.widgets import DataTable

from corral.supervisor.api import Supervisor
from corral.supervisor.config import SupervisorConfig
from corral.supervisor.states import CoderState
from corral.tui.app import CorralApp
from corral.tui.screens.diff import DiffScreen
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
    make_repo,
    open_from_board,
    scripted_supervisor,
    start_to_approval,
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
        screen = await open_from_board(app, pilot, "D", settle=0.5)
        assert isinstance(screen, DiffScreen)
        hunks = screen.query_one("#diff-hunks", DataTable)
        assert hunks.row_count == 3
        hunks.focus()
        hunks.move_cursor(row=0)
        await pilot.pause(0.1)
        await pilot.press("space")  # untick the first hunk
        await pilot.pause(0.1)
        assert screen.ticked == {"long.txt": {1, 2}}
        await pilot.press("a")
        sid = sup.list()[0].session_id
        row = await sup.wait_for(sid, {CoderState.MERGED}, timeout=20)
    branch = row.result_branch or ""
    delivered = git(repo, "show", f"{branch}:long.txt").splitlines()
    assert delivered[1] == "2"  # the unticked hunk stayed out
    assert delivered[14] == "fifteen" and delivered[28] == "twentynine"
    assert "Corral-Scope: partial" in git(repo, "log", "-1", "--format=%B", branch)


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
        screen = await open_from_board(app, pilot, "D", settle=0.6)
        assert isinstance(screen, DiffScreen)
        hunks = screen.query_one("#diff-hunks", DataTable)
        assert hunks.row_count == 2
        hunks.focus()
        hunks.move_cursor(row=0)
        await pilot.pause(0.1)
        await pilot.press("space")  # untick the first hunk of long.txt
        await pilot.pause(0.2)
        assert screen.ticked == {"long.txt": {1}, "notes.md": None}

    assert snap_compare(app, terminal_size=(150, 30), run_before=ready)


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
        await pilot.pause(0.2)
        await pilot.press("n")
        await pilot.pause(0.2)
        await pilot.press(*"Name three numbers", "enter")
        for _ in range(100):
            await pilot.pause(0.1)
            rows = sup.list()
            if rows and rows[0].state is CoderState.CONTRACT_PROPOSED:
                break
        sid = rows[0].session_id
        await pilot.press("c")
        await sup.wait_for(sid, {CoderState.NEEDS_APPROVAL}, timeout=20)
        await pilot.pause(0.2)
        await pilot.press("D")
        await pilot.pause(0.5)
        screen = app.screen
        assert isinstance(screen, DiffScreen)
        hunks = screen.query_one("#diff-hunks", DataTable)
        hunks.focus()
        hunks.move_cursor(row=2)
        await pilot.press("space")
        await pilot.press("a")
        row = await sup.wait_for(sid, {CoderState.MERGED}, timeout=20)
    delivered = git(repo, "show", f"{row.result_branch}:long.txt").splitlines()
    assert (delivered[1], delivered[14], delivered[28]) == ("two", "fifteen", "29")


async def test_reject_from_the_diff_asks_for_a_comment_and_escape_keeps_reviewing(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path / "repo")
    sup = scripted_supervisor(
        tmp_path / "state", contract(("note", "test -f note.txt")), [Write("note.txt", "hello\n")]
    )
    app = _at_gate_2(sup, repo, "Write a note")
    async with app.run_test(size=(150, 40)) as pilot:
        await open_from_board(app, pilot, "D", settle=0.5)
        assert isinstance(app.screen, DiffScreen)
        sid = app.screen.session_id
        await pilot.press("r")
        await pilot.pause(0.1)
        await pilot.press("escape")  # changed my mind: still reviewing, nothing sent
        await pilot.pause(0.1)
        assert isinstance(app.screen, DiffScreen)
        assert sup.get(sid).session.state is CoderState.NEEDS_APPROVAL
        await pilot.press("r")
        await pilot.pause(0.1)
        await pilot.press(*"too broad", "enter")
        row = await sup.wait_for(sid, {CoderState.ABANDONED}, timeout=10)
        assert not isinstance(app.screen, DiffScreen)
        texts = plan_texts(sup, sid)
    assert row.state is CoderState.ABANDONED
    assert "Rejected: too broad" in texts
