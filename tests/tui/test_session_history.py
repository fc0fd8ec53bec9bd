"""A session this console is not running (stored by an earlier corral)
opens with its whole journal in the log, not an empty one."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import RichLog, Static

from corral.supervisor.models import ModelUse
from corral.supervisor.states import CoderState
from corral.supervisor.store import Store
from corral.tui.app import CorralApp
from tests.fakes.scripted import Write, contract

from .conftest import make_repo, open_from_board, scripted_supervisor, start_to_approval, until


@pytest.mark.slow
async def test_a_stored_session_shows_its_whole_journal(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    drafted = contract(("hello", "grep -q hi hello.txt"), description="hello.txt says hi")
    first = scripted_supervisor(tmp_path / "state", drafted, [Write("hello.txt", "hi\n")])
    await first.open()
    sid = await start_to_approval(first, "Write hello", repo)
    await first.approve(sid)
    await first.close()

    sup = scripted_supervisor(tmp_path / "state", drafted)
    app = CorralApp(sup, default_repo=repo)
    async with app.run_test(size=(130, 40)) as pilot:
        await until(pilot, "the stored row", lambda: sup.list() and not sup.is_live(sid))
        assert sup.list()[0].state is CoderState.MERGED
        screen = await open_from_board(app, pilot, "enter")
        log = screen.query_one("#log", RichLog)
        await until(pilot, "the journal in the log", lambda: len(log.lines) > 5)
        text = "\n".join(str(line.text) for line in log.lines)
        assert "its journal" in text
        assert "write_file" in text  # what the agent did
        assert "PASS hello" in text  # what verification found
        assert "needs approval → delivered" in text  # how it ended, in the board's word
        header = str(screen.query_one("#session-header", Static).render())
        assert "state delivered" in header and "merged" not in header
        assert "no live event history" not in text


@pytest.mark.slow
async def test_the_session_header_says_what_each_model_used(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    drafted = contract(("hello", "grep -q hi hello.txt"), description="hello.txt says hi")
    first = scripted_supervisor(tmp_path / "state", drafted, [Write("hello.txt", "hi\n")])
    await first.open()
    sid = await start_to_approval(first, "Write hello", repo)
    await first.approve(sid)
    await first.close()
    store = Store(tmp_path / "state")
    stored = store.load_session(sid)
    assert stored is not None
    stored.model_use = {
        "drafter-x": ModelUse(tokens_in=1200, tokens_out=300, cost_usd=0.0042),
        "local-y": ModelUse(tokens_in=50, tokens_out=7),
    }
    store.save_session(stored)
    store.close()

    sup = scripted_supervisor(tmp_path / "state", drafted)
    app = CorralApp(sup, default_repo=repo)
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, "the stored row", lambda: bool(sup.list()))
        screen = await open_from_board(app, pilot, "enter")
        header = screen.query_one("#session-header", Static)
        await until(pilot, "the header", lambda: "models:" in str(header.render()))
        text = str(header.render())
        assert "drafter-x: 1200 in / 300 out tokens, $0.0042" in text
        assert "local-y: 50 in / 7 out tokens, unpriced" in text


@pytest.mark.slow
async def test_the_session_header_shows_the_deliverys_attestation(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    drafted = contract(("hello", "grep -q hi hello.txt"), description="hello.txt says hi")
    first = scripted_supervisor(tmp_path / "state", drafted, [Write("hello.txt", "hi\n")])
    await first.open()
    sid = await start_to_approval(first, "Write hello", repo)
    delivered = await first.approve(sid)
    await first.close()
    assert delivered.commit

    sup = scripted_supervisor(tmp_path / "state", drafted)
    app = CorralApp(sup, default_repo=repo)
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, "the stored row", lambda: bool(sup.list()))
        screen = await open_from_board(app, pilot, "enter")
        header = screen.query_one("#session-header", Static)
        await until(pilot, "the header", lambda: "attested on" in str(header.render()))
        text = str(header.render())
        assert f"attested on {delivered.commit[:12]} in refs/notes/corral" in text
        assert "1 of 1 checks passing, unsigned" in text
