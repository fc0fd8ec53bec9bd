"""With [[hosts]] configured, the new-session form offers a Host field and
the board a Host column; a host that does not answer refuses the start in
the form, with the host named, and nothing is started."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from textual.widgets import Select, Static

from corral.supervisor.api import Supervisor
from corral.supervisor.contracts.drafting import FixedDrafter
from corral.supervisor.factory import build_supervisor
from corral.supervisor.hosts.settings import HostSettings
from corral.tui.app import CorralApp
from corral.tui.screens.new_session import NewSessionScreen
from tests.conftest import fast_config, hello_contract
from tests.tui.conftest import FIXED_NOW, board_ready, make_repo, until

pytestmark = pytest.mark.skipif(
    shutil.which("tmux") is None or shutil.which("ssh") is None,
    reason="tmux and the OpenSSH client are needed",
)


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[tuple[Supervisor, Path]]:
    # nothing listens on port 1 of 127.0.0.1: ssh is refused at once
    gpu = HostSettings(
        name="gpu1",
        destination="127.0.0.1",
        state_dir=str(tmp_path / "remote"),
        ssh_options=["-o", "Port=1", "-F", "/dev/null"],
    )
    sup = build_supervisor(
        tmp_path / "state",
        FixedDrafter(hello_contract()),
        socket_dir=tmp_path / "tmux",
        default_engine="external:demo",
        config=fast_config(hosts=[gpu]),
    )
    yield sup, make_repo(tmp_path / "repo")


@pytest.mark.slow
async def test_the_form_offers_the_hosts_and_an_unreachable_one_refuses_in_a_sentence(
    world,  # type: ignore[no-untyped-def]
) -> None:
    sup, repo = world
    app = CorralApp(sup, default_repo=repo, clock=lambda: FIXED_NOW)
    async with app.run_test(size=(150, 44)) as pilot:
        board = await board_ready(app, pilot)
        await pilot.press("n")
        form = await until(
            pilot,
            "the new-session form",
            lambda: app.screen if isinstance(app.screen, NewSessionScreen) else None,
        )
        hosts = form.query_one("#host", Select)
        assert [str(label) for label, _ in hosts._options] == ["this machine", "gpu1"]
        hosts.value = "gpu1"
        form.query_one("#intent").focus()
        await pilot.press(*"say hi", "enter")
        refusal = form.query_one("#refusal", Static)
        text = await until(
            pilot,
            "the refusal",
            lambda: str(refusal.render()) if refusal.display else None,
            timeout=30,
        )
        assert "host gpu1 (127.0.0.1) refused the connection" in text
        assert isinstance(app.screen, NewSessionScreen)  # the form stays, with the intent
        assert sup.list() == []
        await pilot.press("escape")
        await sup.start("say hi here", repo)  # on this machine
        await until(pilot, "the row", lambda: board.table.row_count == 1)
        await until(pilot, "the Host column", lambda: "Host" in board.table.render_line(0).text)
        assert "local" in board.table.render_line(1).text
