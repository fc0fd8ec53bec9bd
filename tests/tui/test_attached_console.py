"""A second console on a state dir another process owns attaches to that owner
instead of being refused: its board follows the owner's sessions live, its
session view streams their events, and its actions are the owner's calls.

The owner runs on its own thread and event loop (as another process would),
so the console's synchronous reads are real round trips on the socket."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import threading
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar, cast

import pytest

from corral.supervisor.api import Supervisor
from corral.supervisor.discuss import Discussions
from corral.supervisor.remote import AttachedSupervisor, OwnerServices
from corral.supervisor.states import CoderState
from corral.tui.app import CorralApp
from corral.tui.screens.session import SessionScreen
from tests.conftest import fast_config, hello_contract, init_repo
from tests.fakes.scripted import ScriptedDrafter, ScriptedEngine, ScriptedEngines, Write

from .conftest import board_of, until

T = TypeVar("T")


class OwnerThread:
    """An opened supervisor serving its control socket, on its own loop."""

    def __init__(self, sup: Supervisor, discussions: Discussions | None = None) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.sup = sup
        self.services = OwnerServices(self.sup, discussions=discussions, mcp_http=False)
        self.run(self.sup.open())
        self.run(self.services.start())

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    async def call(self, coro: Coroutine[Any, Any, T]) -> T:
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.loop))

    def stop(self) -> None:
        self.run(self.services.close())
        self.run(self.sup.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


@pytest.fixture
def owner() -> Iterator[tuple[OwnerThread, Path]]:
    root = Path(tempfile.mkdtemp(prefix="ca", dir="/tmp"))
    repo = init_repo(root / "repo")
    owner = OwnerThread(
        Supervisor(
            root / "state",
            drafter=ScriptedDrafter([hello_contract()]),
            engines=ScriptedEngines(ScriptedEngine([[Write("hello.txt", "hi\n")]])),
            config=fast_config(),
        )
    )
    yield owner, repo
    owner.stop()
    shutil.rmtree(root, ignore_errors=True)


@pytest.mark.slow
async def test_a_second_console_attaches_and_follows_the_owner(owner) -> None:
    thread, repo = owner
    first = await thread.call(thread.sup.start("say hi", repo))
    attached = AttachedSupervisor(thread.sup.state_dir, config=fast_config())
    app = CorralApp(cast(Supervisor, attached), default_repo=repo, attached=True)
    async with app.run_test(size=(140, 40)) as pilot:
        await app.ready.wait()
        board = await until(pilot, "the board", lambda: board_of(app))
        await until(
            pilot, "the owner's session on the board", lambda: first.session_id in board.summaries
        )
        # a session the owner starts later shows up live
        second = await thread.call(thread.sup.start("say hello", repo))
        await until(
            pilot, "the new session on the board", lambda: second.session_id in board.summaries
        )
        # an action from this console is the owner's call
        await attached.confirm(first.session_id)
        row = await thread.call(thread.sup.wait_for(first.session_id, needs=True, timeout=10))
        assert row.state is CoderState.NEEDS_APPROVAL
        await until(
            pilot,
            "the board to show it waits for approval",
            lambda: board.summaries[first.session_id].state is CoderState.NEEDS_APPROVAL,
        )
        # the session view streams its events from the owner
        app.push_screen(SessionScreen(first.session_id))
        screen = await until(
            pilot,
            "the session view",
            lambda: app.screen if isinstance(app.screen, SessionScreen) else None,
        )
        owner_seqs = [e.seq for e in thread.sup.replay(first.session_id)]
        await until(
            pilot,
            "every event in the session view",
            lambda: [e.seq for e in screen.events] == owner_seqs,
        )
        # the owner stops serving: the attached console says so, once
        await thread.call(thread.services.close())
        await until(pilot, "the owner-gone notice", lambda: app._said_owner_gone, timeout=10)
    assert thread.sup.get(first.session_id).session.state is CoderState.NEEDS_APPROVAL


@pytest.mark.slow
async def test_an_attached_console_sees_and_types_into_the_owners_agent_pane() -> None:
    from corral.supervisor.factory import build_supervisor
    from corral.supervisor.interface import FixedDrafter
    from tests.fakes.scripted import contract

    root = Path(tempfile.mkdtemp(prefix="cp", dir="/tmp"))
    repo = init_repo(root / "repo")
    thread = OwnerThread(
        build_supervisor(
            root / "state",
            FixedDrafter(contract(("noted", "test -f DEMO_NOTES.md"))),
            backend="pty",
            default_engine="external:demo",
            demo_pace=0.05,
            config=fast_config(ask_user_timeout_secs=60),
        )
    )
    attached = AttachedSupervisor(thread.sup.state_dir, config=fast_config())
    try:
        started = await thread.call(thread.sup.start("write notes", repo))
        sid = started.session_id
        await attached.open()
        assert attached.agent_screen(sid) is None and attached.attach_argv(sid) is None
        await attached.confirm(sid)
        row = await attached.wait_for(sid, needs=True, timeout=40)
        assert row.needs_you == "question", row
        # the owner's pane, as the owner sees it, on this side of the socket
        mine = attached.agent_screen(sid)
        for _ in range(100):
            attached.agent_screen_version(sid)
            mine = attached.agent_screen(sid)
            theirs = thread.sup.agent_screen(sid)
            if mine is not None and theirs is not None and mine.lines == theirs.lines:
                break
            await asyncio.sleep(0.05)
        assert mine is not None and any("DEMO_NOTES.md" in line for line in mine.lines)
        # keys typed here reach the agent through the owner: "1" picks "Yes"
        await attached.send_keys_to_agent(sid, ["1"])
        row = await thread.call(
            thread.sup.wait_for(sid, {CoderState.NEEDS_APPROVAL, CoderState.FAILED}, timeout=40)
        )
        assert row.state is CoderState.NEEDS_APPROVAL, row.error
    finally:
        await attached.close()
        thread.stop()
        shutil.rmtree(root, ignore_errors=True)
