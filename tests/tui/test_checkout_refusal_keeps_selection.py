"""A checkout delivery where the operator changed a file it writes: the
question names the files it writes and warns, naming it, about the operator's
uncommitted lines; after the refusal the diff review is still there with the
part the operator ticked (nothing re-ticked behind their back)."""

from __future__ import annotations

from pathlib import Path

import pytest

from corral.tui.app import CorralApp
from corral.tui.screens.diff import DiffScreen
from tests.fakes.scripted import Write, contract

from .conftest import (
    asked,
    board_ready,
    make_repo,
    open_from_board,
    scripted_supervisor,
    start_to_approval,
    until,
)


@pytest.mark.slow
async def test_a_refused_checkout_delivery_keeps_the_ticked_part(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    sup = scripted_supervisor(
        tmp_path / "state",
        contract(("wide", "test -f wide.py")),
        [Write("wide.py", "x = 1\n"), Write("notes.md", "a note\n"), Write("more.md", "m\n")],
    )
    app = CorralApp(
        sup, default_repo=repo, on_ready=lambda s: start_to_approval(s, "Write files", repo)
    )
    async with app.run_test(size=(140, 40)) as pilot:
        await board_ready(app, pilot)
        diff = await open_from_board(app, pilot, "D")
        assert isinstance(diff, DiffScreen)
        # the operator's own file where the delivery would write
        (repo / "wide.py").write_text("mine = True\n")
        notes = next(f for f in diff.files if f.path == "notes.md")
        diff._select(notes)
        diff.query_one("#diff-body").focus()
        await pilot.press("space")  # notes.md is left out
        await until(pilot, "notes.md unticked", lambda: "notes.md" not in diff.ticked)
        wanted = dict(diff.ticked)
        await pilot.press("ctrl+o")
        modal = await asked(pilot, then=None)
        assert "wide.py" in modal.question and "more.md" in modal.question
        assert "notes.md" not in modal.question.split("Writes these files", 1)[1]
        # the operator's own lines in a file it writes: named before anything is tried
        assert "you have uncommitted lines in wide.py" in modal.question, modal.question
        assert "more.md" not in modal.question.split("Warning:", 1)[1]
        await pilot.press("ctrl+y")
        await until(
            pilot,
            "the refusal's toast",
            lambda: any("you changed wide.py" in n.message for n in app._notifications),
        )
        for _ in range(5):
            await pilot.pause()
        assert app.screen is diff
        assert diff.ticked == wanted
    assert (repo / "wide.py").read_text() == "mine = True\n"


@pytest.mark.slow
async def test_a_part_that_fails_its_checks_keeps_the_ticked_part(tmp_path: Path) -> None:
    """The part left out is what the check needs: the re-verification refuses
    the delivery, and the review still holds what the operator ticked."""
    repo = make_repo(tmp_path / "repo")
    sup = scripted_supervisor(
        tmp_path / "state",
        contract(("wide", "test -f wide.py")),
        [Write("wide.py", "x = 1\n"), Write("notes.md", "a note\n")],
    )
    app = CorralApp(
        sup, default_repo=repo, on_ready=lambda s: start_to_approval(s, "Write files", repo)
    )
    async with app.run_test(size=(140, 40)) as pilot:
        await board_ready(app, pilot)
        diff = await open_from_board(app, pilot, "D")
        assert isinstance(diff, DiffScreen)
        wide = next(f for f in diff.files if f.path == "wide.py")
        diff._select(wide)
        diff.query_one("#diff-body").focus()
        await pilot.press("space")
        await until(pilot, "wide.py unticked", lambda: "wide.py" not in diff.ticked)
        wanted = dict(diff.ticked)
        await pilot.press("ctrl+o")
        await asked(pilot)
        await until(
            pilot,
            "the refusal's toast",
            lambda: any(n.severity == "error" for n in app._notifications),
        )
        for _ in range(5):
            await pilot.pause()
        assert app.screen is diff, app.screen
        assert diff.ticked == wanted


@pytest.mark.slow
async def test_checkout_clashes_names_only_the_operators_changed_files(tmp_path: Path) -> None:
    """The owner's read-only answer behind the warning: the files the change
    writes where the checkout holds the operator's own lines, and nothing is
    written while reading it."""
    repo = make_repo(tmp_path / "repo")
    sup = scripted_supervisor(
        tmp_path / "state",
        contract(("wide", "test -f wide.py")),
        [Write("wide.py", "x = 1\n"), Write("notes.md", "a note\n")],
    )
    await sup.open()
    try:
        sid = await start_to_approval(sup, "Write files", repo)
        assert await sup.checkout_clashes(sid) == []
        (repo / "wide.py").write_text("mine = True\n")
        (repo / "unrelated.txt").write_text("also mine\n")
        assert await sup.checkout_clashes(sid) == ["wide.py"]
        assert (repo / "wide.py").read_text() == "mine = True\n"
        assert not (repo / "notes.md").exists()
    finally:
        await sup.close()
