"""An answer to an on-screen menu is reported only once it was seen to land.

A real program in a real tmux pane (private server) draws a menu the way
Claude Code draws its API-key dialog — unnumbered options, the cursor on
"No (recommended)", "Enter to confirm" — and then behaves in one of the ways
that once made corral report an answer that never happened: it drops the
keys that arrive before it reads input, it keeps the menu up after Enter,
or it takes the answer and then says it is not signed in."""

from __future__ import annotations

import asyncio
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from corral.supervisor.agents.profiles import CLAUDE
from corral.supervisor.panes.base import PaneSpec
from corral.supervisor.panes.manager import PaneManager, match_option
from corral.supervisor.status import AgentStatus, Question

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

MENU = r"""
import os, sys, termios, time, tty
mode, deaf = sys.argv[1], float(sys.argv[2])
options = ["Yes", "No (recommended)"]
cursor = 1
fd = sys.stdin.fileno()
tty.setraw(fd)
def draw():
    os.write(1, b"\x1b[2J\x1b[H")
    lines = ["  Detected a custom API key in your environment",
             "  Do you want to use this API key?"]
    for i, o in enumerate(options):
        lines.append(("  \u276f " if i == cursor else "    ") + o)
    lines.append("  Enter to confirm \xb7 Esc to cancel")
    os.write(1, ("\r\n".join(lines) + "\r\n").encode())
draw()
end = time.monotonic() + deaf
while time.monotonic() < end:   # not reading keys yet: whatever arrives is lost
    time.sleep(0.02)
    termios.tcflush(fd, termios.TCIFLUSH)
while True:
    data = os.read(fd, 64)
    if data.endswith(b"\x1b[A") or data.endswith(b"\x1bOA"):
        cursor = max(0, cursor - 1); draw()
    elif data.endswith(b"\x1b[B") or data.endswith(b"\x1bOB"):
        cursor = min(1, cursor + 1); draw()
    elif b"\r" in data:
        if mode == "sticky":
            draw(); continue
        os.write(1, b"\x1b[2J\x1b[H")
        chose = options[cursor]
        if mode == "signed-out":
            os.write(1, b"  \xe2\x8e\xbf  Not logged in \xc2\xb7 Please run /login\r\n")
        os.write(1, ("chose: " + chose + "\r\n> ").encode())
        time.sleep(30)
        break
"""

QUESTION = Question("Do you want to use this API key?", ("Yes", "No (recommended)"))


async def _manager(tmp_path: Path, mode: str, deaf: float) -> PaneManager:
    from corral.supervisor.panes.tmux import TmuxBackend

    script = tmp_path / "menu.py"
    script.write_text(MENU, encoding="utf-8")
    manager = PaneManager(TmuxBackend(socket_dir=tmp_path / "tmux"), tmp_path / "hooks")
    spec = PaneSpec(
        session_id="s1",
        incarnation=1,
        name="corral-s1",
        cwd=tmp_path,
        argv=[sys.executable, str(script), mode, str(deaf)],
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8"},
        width=100,
        height=20,
    )
    await manager.spawn(spec, CLAUDE)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        await manager.sweep_once()
        record = manager.record("s1")
        if record and record.status.status is AgentStatus.WAITING and record.status.question:
            assert record.status.question == QUESTION
            return manager
        await asyncio.sleep(0.1)
    raise AssertionError("the menu was never read as a question")


def _screen(manager: PaneManager) -> str:
    handle = manager.records["s1"].handle
    return "\n".join(manager.backend.capture([handle])[handle.owner].lines)


@pytest.mark.slow
async def test_keys_lost_before_the_program_reads_them_are_sent_again(tmp_path: Path) -> None:
    manager = await _manager(tmp_path, "normal", deaf=2.0)
    try:
        landing = await manager.choose("s1", QUESTION, "Yes")
        assert landing.landed, landing.detail
        assert landing.detail == "selected option 1: Yes"
        assert "chose: Yes" in _screen(manager)
    finally:
        manager.backend.close()
        manager.backend.kill_server()  # type: ignore[attr-defined]


@pytest.mark.slow
async def test_a_menu_that_stays_up_after_enter_is_not_reported_answered(tmp_path: Path) -> None:
    manager = await _manager(tmp_path, "sticky", deaf=0.0)
    try:
        landing = await manager.choose("s1", QUESTION, "1")
        assert not landing.landed
        assert "still on the screen" in landing.detail
    finally:
        manager.backend.close()
        manager.backend.kill_server()  # type: ignore[attr-defined]


async def test_an_answer_followed_by_not_signed_in_did_not_land_as_chosen(tmp_path: Path) -> None:
    manager = await _manager(tmp_path, "signed-out", deaf=0.0)
    try:
        landing = await manager.choose("s1", QUESTION, "yes")
        assert not landing.landed
        assert "Not logged in" in landing.detail
    finally:
        manager.backend.close()
        manager.backend.kill_server()  # type: ignore[attr-defined]


async def test_words_that_name_no_option_are_not_typed_into_a_menu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manager = await _manager(tmp_path, "normal", deaf=0.0)
    backend = manager.backend
    sent: list[list[str]] = []
    real = backend._run  # type: ignore[attr-defined]

    def recording(argv: list[str], **kw: Any) -> str:
        sent.append(argv)
        return real(argv, **kw)

    monkeypatch.setattr(backend, "_run", recording)
    try:
        landing = await manager.choose("s1", QUESTION, "sure, go ahead")
        assert not landing.landed
        assert "not one of the options (1. Yes, 2. No (recommended))" in landing.detail
        typed = [
            argv for argv in sent if {"send-keys", "paste-buffer"} & set(" ".join(argv).split())
        ]
        assert typed == []  # nothing went to the pane: no waiting to see whether it shows
        screen = _screen(manager)
        assert "chose:" not in screen and "sure" not in screen
    finally:
        manager.backend.close()
        manager.backend.kill_server()  # type: ignore[attr-defined]


def test_an_answer_names_an_option_by_number_or_text() -> None:
    options = ["Yes", "Yes, and don't ask again", "No"]
    assert match_option(options, "1") == 1
    assert match_option(options, " no ") == 3
    assert match_option(options, "Yes") == 1  # exact text beats a longer option
    assert match_option(options, "yes, and") == 2
    assert match_option(options, "4") is None
    assert match_option(options, "maybe") is None
    assert match_option(options, "") is None
