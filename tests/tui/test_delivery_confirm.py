"""The confirm question of a delivery says which paths change kind before
anything is written (here: the operator's symlinked directory becomes a real
one), and the refused checkout delivery leaves the link as it was."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from corral.tui.app import CorralApp
from tests.fakes.scripted import Run, contract

from .conftest import (
    asked,
    make_repo,
    open_from_board,
    scripted_supervisor,
    start_to_approval,
    until,
)


async def test_the_confirm_question_names_a_symlink_becoming_a_directory(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    (repo / "real_docs").mkdir()
    (repo / "real_docs" / "a.md").write_text("docs\n")
    os.symlink("real_docs", repo / "docs")
    subprocess.run(
        "git add -A && git -c user.name=t -c user.email=t@t commit -qm docs",
        shell=True, cwd=repo, check=True,
    )  # fmt: skip
    drafted = contract(("done", "test -d docs && test ! -L docs"))
    step = Run("rm docs && mkdir docs && echo new > docs/new.md")
    sup = scripted_supervisor(tmp_path / "state", drafted, [step])
    app = CorralApp(
        sup, default_repo=repo, on_ready=lambda s: start_to_approval(s, "Make docs real", repo)
    )
    async with app.run_test(size=(140, 40)) as pilot:
        await open_from_board(app, pilot, "enter")
        await pilot.press("ctrl+o")  # apply to the checkout
        modal = await asked(pilot, then=None)
        question = modal.question
        assert "docs: a symlink becomes a directory" in question
        await pilot.press("ctrl+y")
        await until(
            pilot,
            "the refusal's toast",
            lambda: any("symlink in your checkout" in n.message for n in app._notifications),
        )
    assert os.readlink(repo / "docs") == "real_docs"
