"""`w` / `E`: a session's worktree in a new window of the operator's own tmux
(a real tmux server on a private socket stands for it, named by $TMUX as tmux
names it for every program inside), with a shell or with $EDITOR; outside
tmux the toast says the exact `cd` command."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral.tui.app import CorralApp
from corral.tui.screens.board import BoardScreen
from corral.tui.screens.session import SessionScreen

from .conftest import FIXED_NOW, board_ready, seed_board, until

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


@pytest.fixture
def operator_tmux(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The operator's tmux: a server of its own, and $TMUX pointing at it."""
    root = Path(tempfile.mkdtemp(prefix="c3w", dir="/tmp"))  # short: a socket path
    sock = root / "op"
    base = ["tmux", "-S", str(sock), "-f", "/dev/null"]
    subprocess.run([*base, "new-session", "-d", "-s", "op", "-x", "80", "-y", "24"], check=True)
    pid = subprocess.run(
        [*base, "display-message", "-p", "#{pid}"], capture_output=True, text=True, check=True
    ).stdout.strip()
    monkeypatch.setenv("TMUX", f"{sock},{pid},0")
    monkeypatch.setenv("SHELL", "/bin/sh")
    try:
        yield sock
    finally:
        subprocess.run([*base, "kill-server"], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


def _windows(sock: Path) -> list[tuple[str, str]]:
    out = subprocess.run(
        ["tmux", "-S", str(sock), "list-windows", "-t", "op", "-F",
         "#{window_name}\t#{pane_current_path}"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return [tuple(line.split("\t", 1)) for line in out.splitlines()]  # type: ignore[misc]


def _toasts(app: CorralApp) -> list[str]:
    return [str(n.message) for n in app._notifications]


def _select(board: BoardScreen, word: str) -> str:
    sid = next(s for s in board.order if board.summaries[s].intent.startswith(word))
    board.table.move_cursor(row=board.order.index(sid))
    return sid


@pytest.mark.slow
async def test_w_opens_a_shell_window_in_the_worktree(
    board_world, operator_tmux: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sup, repo, _release = board_world()
    app = CorralApp(
        sup, default_repo=repo, clock=lambda: FIXED_NOW, on_ready=lambda s: seed_board(s, repo)
    )
    async with app.run_test(size=(140, 30)) as pilot:
        board = await board_ready(app, pilot)
        sid = _select(board, "Alpha")
        worktree = sup.get(sid).session.worktree
        assert worktree is not None and os.path.isdir(worktree)
        name = board.summaries[sid].label

        await pilot.press("w")
        await until(
            pilot, "the window's toast", lambda: any("tmux window @" in t for t in _toasts(app))
        )
        assert (name, os.path.realpath(worktree)) in [
            (n, os.path.realpath(p)) for n, p in _windows(operator_tmux)
        ]

        # E on the session screen: $EDITOR runs in the worktree, in its own window
        monkeypatch.setenv("EDITOR", "touch opened-by-editor")
        await pilot.press("enter")
        await until(pilot, "the session screen", lambda: isinstance(app.screen, SessionScreen))
        await pilot.press("E")
        await until(
            pilot, "the editor to run", lambda: (Path(worktree) / "opened-by-editor").exists()
        )
        assert any("(touch)" in t for t in _toasts(app))

        # outside tmux there is no window to open: the exact cd command instead
        monkeypatch.delenv("TMUX")
        app.clear_notifications()
        windows = len(_windows(operator_tmux))
        await pilot.press("w")
        await until(pilot, "the cd toast", lambda: _toasts(app))
        assert f"cd {shlex.quote(worktree)}" in _toasts(app)[0]
        assert len(_windows(operator_tmux)) == windows
