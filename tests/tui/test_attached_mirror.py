"""An attached console never blocks on its owner: it draws from a local mirror
fed by the streams it subscribes to, so opening a session screen costs at
most two requests, a key press or a repaint none, and an owner that stops
answering (SIGSTOP on a real `corral serve`) leaves the console repainting
and saying "the owner is not answering" within a second. A stopped or killed
owner is a typed error (`OwnerStalled`, `OwnerGone`), never a bare OSError."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import statistics
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from textual.widgets import DataTable

from corral.supervisor.api import Supervisor
from corral.supervisor.remote import (
    AsyncControlClient,
    AttachedSupervisor,
    ControlClient,
    NoOwner,
    OwnerGone,
    OwnerStalled,
)
from corral.tui.app import CorralApp
from corral.tui.screens.session import SessionScreen
from tests.conftest import fast_config, init_repo
from tests.integration.test_control_cli import corral, env_for, serve

from .conftest import board_of, until

pytestmark = [pytest.mark.slow]

CONTRACT = {
    "description": "notes",
    "checks": [
        {"name": "noted", "command": "test -f DEMO_NOTES.md", "timeout_secs": 10},
        {"name": "second", "command": "test -f NOTES2.md", "timeout_secs": 10},
        {"name": "third", "command": "test -f NOTES2.md", "timeout_secs": 10},
    ],
}


@pytest.fixture
def owner(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], Path, str]]:
    """A real `corral serve` process with one session waiting at gate 1."""
    site = tmp_path
    repo = init_repo(site / "repo")
    contract = site / "c.json"
    contract.write_text(json.dumps(CONTRACT))
    proc = serve(site)
    try:
        out = corral(
            site, "run", "--repo", str(repo), "--intent", "write notes", "--contract",
            str(contract), "--engine", "external:demo", "--json",
        )  # fmt: skip
        assert out.returncode == 3, out.stdout + out.stderr  # stops at gate 1, with the owner
        sid = json.loads(out.stdout.splitlines()[-1])["session_id"]
        yield proc, site / "home", sid
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
            proc.kill()
        proc.communicate(timeout=30)
        for sock in (site / "tmux").glob("*"):
            subprocess.run(["tmux", "-S", str(sock), "kill-server"], capture_output=True)


def _within(secs: float) -> float:
    """`secs`, or more on a machine loaded past twice its cores (the console's
    own timers run late there; the budget is for a machine that is not)."""
    cores = os.cpu_count() or 1
    return secs * max(1.0, min(3.0, os.getloadavg()[0] / (2 * cores)))


async def _moves(pilot: Any, table: DataTable[Any], secs: float) -> list[float]:
    """Seconds from each key press to the frame where the cursor moved."""
    took: list[float] = []
    start = time.monotonic()
    while time.monotonic() - start < secs:
        row = table.cursor_row
        t0 = time.monotonic()
        await pilot.press("down" if row == 0 else "up")
        await pilot.pause()
        took.append(time.monotonic() - t0)
        assert table.cursor_row != row, "a key press did not move the cursor"
    return took


def _spent(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {m: n - before.get(m, 0) for m, n in after.items() if n != before.get(m, 0)}


async def test_the_console_reads_its_mirror_and_says_when_the_owner_stalls_or_goes(
    owner: tuple[subprocess.Popen[str], Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    proc, home, sid = owner
    for name, value in env_for(home.parent).items():
        monkeypatch.setenv(name, value)
    attached = AttachedSupervisor(home, config=fast_config())
    app = CorralApp(cast(Supervisor, attached), attached=True)
    async with app.run_test(size=(140, 40)) as pilot:
        board = await until(pilot, "the board", lambda: board_of(app))
        await until(pilot, "the owner's session", lambda: sid in board.summaries)
        await pilot.pause(0.3)

        # opening a session screen: its detail and its event stream, nothing else
        before = attached.requests
        app.push_screen(SessionScreen(sid))
        screen = await until(
            pilot,
            "the session screen, loaded",
            lambda: (
                app.screen if isinstance(app.screen, SessionScreen) and app.screen.loaded else None
            ),
        )
        await until(pilot, "its events", lambda: bool(screen.events))
        await pilot.pause(0.5)
        opened = _spent(before, attached.requests)
        assert sum(opened.values()) <= 2 and set(opened) <= {"get", "subscribe"}, opened

        # keys and repaints read the mirror: no round trip
        before = attached.requests
        await pilot.press("escape")  # out of the gate-1 input, to the checks table
        table = screen.query_one("#checks", DataTable)
        await until(pilot, "the checks table focused", lambda: table.has_focus)
        for key in ("down", "down", "up", "question_mark", "escape"):
            await pilot.press(key)
        screen.refresh_view()
        screen.refresh_bindings()
        app.refresh()
        await pilot.pause(0.3)
        assert _spent(before, attached.requests) == {}
        await until(pilot, "the session screen again", lambda: app.screen is screen)
        table.focus()
        await pilot.pause()
        answering = await _moves(pilot, table, 1.5)  # the same keys, the owner answering

        # the owner stops answering: the console keeps repainting and says so
        os.kill(proc.pid, signal.SIGSTOP)
        stopped = time.monotonic()
        moves = await _moves(pilot, table, 3)
        assert "the owner is not answering" in (app.owner_stalled_said or "")
        said_after = app.owner_stalled_since - stopped
        assert 0 < said_after <= _within(1.0), said_after
        # no key waited on the stopped owner (a blocking call waits 5 to 30 s)
        assert max(moves) < 2.0, moves
        assert statistics.median(moves) < 3 * statistics.median(answering) + 0.1, (
            moves,
            answering,
        )
        # what the console still asks fails at once, typed
        t0 = time.monotonic()
        with pytest.raises(OwnerStalled, match="not answering"):
            attached.rename(sid, "renamed while stopped")
        assert time.monotonic() - t0 < 0.2
        with pytest.raises(OwnerStalled, match="not answering"):
            ControlClient(home, timeout=0.5)
        with pytest.raises(OwnerStalled, match="not answering"):
            await AsyncControlClient.connect(home, timeout=0.5)

        # it answers again: the console says so
        os.kill(proc.pid, signal.SIGCONT)
        await until(pilot, "the owner answering again", lambda: app.owner_stalled_said is None)
        assert attached.rename(sid, "renamed").name == "renamed"

        # killed: gone, typed, and said
        client = ControlClient(home, timeout=5)
        proc.kill()
        proc.wait(10)
        await until(pilot, "the owner-gone notice", lambda: app._said_owner_gone)
        with pytest.raises(OwnerGone):
            client.list()
        with pytest.raises(OwnerGone):
            attached.rename(sid, "after the owner died")
        with pytest.raises(NoOwner):
            ControlClient(home, timeout=0.5)
        await pilot.press("down")  # still drawing what it mirrored
        assert screen.query_one("#session-header").visual is not None
    await asyncio.sleep(0)
