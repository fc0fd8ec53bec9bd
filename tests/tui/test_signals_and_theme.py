"""A needs-you transition rings the bell, toasts, and (when enabled) runs
notify-send; the theme picked in one run is the theme of the next."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from corral.supervisor.states import CoderState
from corral.tui.app import CorralApp

from .conftest import FIXED_NOW, board_ready, until


async def test_needs_you_rings_toasts_and_notifies_the_desktop(
    board_world, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a stand-in notify-send (a real program on PATH) that records its arguments
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = tmp_path / "notified.txt"
    script = bin_dir / "notify-send"
    script.write_text(
        f'#!/bin/sh\n[ "$1" = -- ] && shift\nprintf "%s|%s\\n" "$1" "$2" >> {record}\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("CORRAL_DESKTOP_NOTIFY", "1")

    sup, repo, _release = board_world()
    app = CorralApp(sup, default_repo=repo, clock=lambda: FIXED_NOW)
    bells: list[None] = []
    ring = app.bell
    app.bell = lambda: (bells.append(None), ring())[1]  # type: ignore[method-assign]
    async with app.run_test(size=(140, 24)) as pilot:
        await board_ready(app, pilot)
        sid = (await sup.start("Echo awaits its contract", repo)).session_id
        await sup.wait_for(sid, {CoderState.CONTRACT_PROPOSED}, timeout=10)
        expected = ["corral: contract awaiting confirmation|Echo awaits its contract"]

        def toasted() -> bool:  # a notification is a message: handled after the desktop note
            return any("contract awaiting confirmation" in n.title for n in app._notifications)

        # notify-send runs in its own process: its line lands when it lands
        await until(
            pilot,
            "the toast and notify-send's record",
            lambda: toasted() and record.exists() and record.read_text().splitlines() == expected,
        )
    assert bells, "no bell"


@pytest.mark.slow
async def test_the_theme_is_remembered(board_world) -> None:
    sup, repo, _release = board_world()
    app = CorralApp(sup, default_repo=repo, clock=lambda: FIXED_NOW)
    saved = Path(sup.state_dir) / "ui.json"
    async with app.run_test(size=(120, 24)) as pilot:
        await board_ready(app, pilot)
        app.theme = "textual-light"
        await until(
            pilot, "the theme to be saved", lambda: saved.exists() and "light" in saved.read_text()
        )
    state_dir = Path(sup.state_dir)

    sup2, _repo, _release = board_world()
    assert Path(sup2.state_dir) == state_dir
    again = CorralApp(sup2, default_repo=repo, clock=lambda: FIXED_NOW)
    async with again.run_test(size=(120, 24)) as pilot:
        await board_ready(again, pilot)
        assert again.theme == "textual-light"


async def test_a_theme_kept_elsewhere_outlives_a_temporary_state_dir(
    board_world, tmp_path: Path
) -> None:
    """The demo's state dir is temporary: its theme is kept in the operator's."""
    own = tmp_path / "own-state"
    own.mkdir()
    sup, repo, _release = board_world()
    app = CorralApp(sup, default_repo=repo, clock=lambda: FIXED_NOW, ui_state_dir=own)
    async with app.run_test(size=(120, 24)) as pilot:
        await board_ready(app, pilot)
        app.theme = "textual-light"
        saved = own / "ui.json"
        await until(
            pilot, "the theme saved", lambda: saved.exists() and "light" in saved.read_text()
        )
    assert not (Path(sup.state_dir) / "ui.json").exists()
