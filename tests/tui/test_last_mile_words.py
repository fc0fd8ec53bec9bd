"""Last-mile words on the session screen: a check's run after the work is
PASS or FAIL (never "already"), the gate-1 echo says when it was cut, and a
key that cannot act on the session now says why instead of nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Input, Static

from corral.supervisor.api import Supervisor
from corral.tui.app import CorralApp

from .conftest import board_ready, until
from .test_gate_safety import gate_world, open_session, seed_gate


def _app(tmp_path: Path, gate: int) -> tuple[CorralApp, dict[str, str]]:
    sup, repo = gate_world(tmp_path)
    ids: dict[str, str] = {}

    async def seed(s: Supervisor) -> None:
        ids["sid"] = await seed_gate(s, repo, gate)

    return CorralApp(sup, default_repo=repo, on_ready=seed), ids


@pytest.mark.slow
async def test_a_check_red_at_baseline_and_green_after_reads_pass_not_already(
    tmp_path: Path,
) -> None:
    app, ids = _app(tmp_path, 2)
    async with app.run_test(size=(120, 40)) as pilot:
        await board_ready(app, pilot)
        screen = await open_session(app, pilot, ids["sid"])
        detail = screen.query_one("#check-detail", Static)
        text = await until(pilot, "the check's detail", lambda: str(detail.render()))
        assert "baseline: red (proves the work)" in text
        assert "last run: PASS" in text and "passes already" not in text


@pytest.mark.slow
async def test_the_gate_one_echo_cut_at_80_characters_ends_with_an_ellipsis(
    tmp_path: Path,
) -> None:
    app, ids = _app(tmp_path, 1)
    async with app.run_test(size=(120, 40)) as pilot:
        await board_ready(app, pilot)
        screen = await open_session(app, pilot, ids["sid"])
        reply = screen.query_one("#reply", Input)
        await until(pilot, "the revision input", lambda: reply.has_focus)
        long = "make the check stricter " * 6
        reply.value = long
        await pilot.press("enter")
        note = await until(pilot, "the revision's echo", lambda: screen.revision_note)
        assert long.strip()[:79] + "…" in note.plain


@pytest.mark.slow
async def test_a_key_that_cannot_act_now_says_why(tmp_path: Path) -> None:
    app, ids = _app(tmp_path, 1)
    said: list[str] = []
    async with app.run_test(size=(80, 24)) as pilot:
        await board_ready(app, pilot)
        screen = await open_session(app, pilot, ids["sid"])
        original = screen.notify
        screen.notify = lambda message, **kw: (said.append(str(message)), original(message, **kw))  # type: ignore[method-assign]
        table = screen.query_one("#checks")
        await pilot.press("escape")  # in the input ctrl+a is its own (start of line)
        await until(pilot, "the checks table", lambda: table.has_focus)
        await pilot.press("ctrl+a")  # approve at gate 1: nothing waits for approval
        await until(pilot, "the reason", lambda: said)
        assert "nothing waits for approval" in said[0]


@pytest.mark.slow
async def test_a_refused_partial_delivery_keeps_the_diff_review_and_its_ticks(
    tmp_path: Path,
) -> None:
    """The ticked part fails the contract: the refusal is said and the diff
    review stays open with the same files ticked (it closed, and the
    selection was lost)."""
    from textual.widgets import DataTable

    from corral.supervisor.states import CoderState
    from corral.tui.screens.diff import DiffScreen
    from tests.fakes.scripted import Write, contract

    from .conftest import asked, make_repo, open_from_board, scripted_supervisor
    from .test_diff import _at_gate_2

    repo = make_repo(tmp_path / "repo")
    sup = scripted_supervisor(
        tmp_path / "state",
        contract(("both", "test -f a.txt && test -f b.txt")),
        [Write("a.txt", "a\n"), Write("b.txt", "b\n")],
    )
    app = _at_gate_2(sup, repo, "Write two files")
    async with app.run_test(size=(120, 40)) as pilot:
        diff = await open_from_board(app, pilot, "D")
        assert isinstance(diff, DiffScreen)
        files = diff.query_one("#diff-files", DataTable)
        files.focus()
        files.move_cursor(row=[f.path for f in diff.files].index("b.txt"))
        await until(pilot, "b.txt selected", lambda: diff.current and diff.current.path == "b.txt")
        await pilot.press("space")
        await until(pilot, "b.txt left out", lambda: set(diff.ticked) == {"a.txt"})
        await pilot.press("ctrl+o")
        modal = await asked(pilot)
        assert "Writes these files in your checkout:\n  a.txt" in str(modal.question)
        assert "b.txt" not in str(modal.question).split("Writes these files")[1]
        sid = diff.session_id
        await until(
            pilot,
            "the refusal",
            lambda: any("fails the contract" in str(n.message) for n in app._notifications),
        )
        assert app.screen is diff and set(diff.ticked) == {"a.txt"}
        assert sup.get(sid).session.state is CoderState.NEEDS_APPROVAL


@pytest.mark.slow
async def test_keys_typed_with_the_enter_that_opens_a_session_are_typed_there(
    tmp_path: Path,
) -> None:
    """One burst, as a terminal delivers a fast typist or a paste: enter on
    the board, then a revision. Every key lands in the session's input, in
    order; none acts on the board behind it (`c` there asks to confirm)."""
    from textual import events

    from corral.tui.confirm import ConfirmScreen
    from corral.tui.screens.session import SessionScreen

    app, ids = _app(tmp_path, 1)
    async with app.run_test(size=(80, 24)) as pilot:
        board = await board_ready(app, pilot)
        board.table.move_cursor(row=board.order.index(ids["sid"]))
        await pilot.pause()
        text = "check the last page too"
        for key, char in [("enter", "\r"), *((c if c != " " else "space", c) for c in text)]:
            app.post_message(events.Key(key, char))
        screen = await until(
            pilot,
            "the session screen",
            lambda: app.screen if isinstance(app.screen, SessionScreen) else None,
        )
        reply = screen.query_one("#reply", Input)
        await until(pilot, "the whole revision typed", lambda: reply.value == text)
        assert not any(isinstance(s, ConfirmScreen) for s in app.screen_stack)
