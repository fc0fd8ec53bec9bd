"""Two consoles attached to one owner speak in one discussion: each presses
`d`, resumes the repository's saved discussion, and sees the other's turn and
the assistant's reply on its own screen; the saved record keeps both turns.

The owner runs on its own thread and event loop with its control socket (as
another process would). Neither console builds a discussion store of its own
over the owner's state dir: two copies of one discussion, each saving the
file, lose a turn (the last save wins), and neither console would see the
other's. Every discussion call goes through the owner, and the transcript is
the owner's stream."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from textual.widgets import Input, RichLog

from corral.supervisor.api import Supervisor
from corral.supervisor.control import protocol as p
from corral.supervisor.control.client import STALLED
from corral.supervisor.control.surface import Calls
from corral.supervisor.discuss import Discussions, DiscussUserMessageEvent
from corral.supervisor.llm.base import ToolCall, Turn
from corral.supervisor.llm.catalog import ModelEntry
from corral.supervisor.llm.chain import ModelChain
from corral.supervisor.paths import control_socket
from corral.supervisor.remote import AsyncControlClient, AttachedSupervisor, OwnerServices
from corral.tui.app import CorralApp
from corral.tui.screens.discuss import DiscussScreen
from tests.conftest import fast_config, hello_contract, init_repo
from tests.fakes.scripted import ScriptedDrafter, ScriptedEngine, ScriptedEngines
from tests.fakes.scripted_llm import ScriptedProvider
from tests.integration.test_shared_discussion import consoles_said

from .conftest import board_of, until
from .test_attached_console import OwnerThread
from .test_model_fields import refuse_then_pin, start_from_the_form

pytestmark = [pytest.mark.slow]


@pytest.fixture
def site() -> Iterator[tuple[OwnerThread, Discussions, Path]]:
    """An owner serving its sessions and its discussions (a scripted model)."""
    root = Path(tempfile.mkdtemp(prefix="sd", dir="/tmp"))  # a short socket path
    repo = init_repo(root / "repo")
    discussions = Discussions(
        root / "state",
        ScriptedProvider([Turn("an answer to A"), Turn("an answer to B")]),
    )
    owner = OwnerThread(
        Supervisor(
            root / "state",
            drafter=ScriptedDrafter([hello_contract()]),
            engines=ScriptedEngines(ScriptedEngine([])),
            config=fast_config(),
        ),
        discussions=discussions,
    )
    yield owner, discussions, repo
    owner.run(discussions.close_all())
    owner.stop()
    shutil.rmtree(root, ignore_errors=True)


def stores_built(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every discussion store built in this process from now on."""
    built: list[object] = []
    made = Discussions.__init__

    def spy(self: Discussions, *args: Any, **kwargs: Any) -> None:
        built.append(args)
        made(self, *args, **kwargs)

    monkeypatch.setattr(Discussions, "__init__", spy)
    return built


def spent(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {k: n - before.get(k, 0) for k, n in after.items() if n != before.get(k, 0)}


def said(screen: DiscussScreen, text: str) -> bool:
    log = screen.query_one("#discuss-log", RichLog)
    return any(text in line.text for line in log.lines)


async def open_discussion(app: CorralApp, pilot: Any) -> DiscussScreen:
    await until(pilot, "the board, its owner open", lambda: board_of(app) and app.opened.is_set())
    await pilot.press("d")
    return await until(
        pilot,
        "the discussion, open",
        lambda: (
            app.screen
            if isinstance(app.screen, DiscussScreen) and app.screen.discussion is not None
            else None
        ),
    )


async def test_two_attached_consoles_see_each_others_turns_and_lose_none(
    site: tuple[OwnerThread, Discussions, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    owner, discussions, repo = site
    # a discussion of this repository an earlier console saved, open nowhere now
    did = owner.run(discussions.start(repo)).id
    owner.run(discussions.close(did))

    # from here on only the owner holds discussions: a console that builds its
    # own store over the owner's state dir is the bug
    built = stores_built(monkeypatch)

    state = owner.sup.state_dir
    owner_a = AttachedSupervisor(state, config=fast_config())
    a = CorralApp(cast(Supervisor, owner_a), default_repo=repo, attached=True)
    b = CorralApp(
        cast(Supervisor, AttachedSupervisor(state, config=fast_config())),
        default_repo=repo,
        attached=True,
    )
    async with a.run_test(size=(120, 34)) as pa, b.run_test(size=(120, 34)) as pb:
        await until(pa, "A's board", lambda: board_of(a))
        before = owner_a.requests
        on_a = await open_discussion(a, pa)
        await pa.pause(0.3)
        # opening: which discussion is the repository's newest, resume it, follow it
        assert spent(before, owner_a.requests) == {
            "discussions_list": 1,
            "discussion_resume": 1,
            "discussion_subscribe": 1,
        }
        on_b = await open_discussion(b, pb)
        assert on_a.discussion is not None and on_b.discussion is not None
        assert on_a.discussion.id == on_b.discussion.id == did  # both resumed the saved one

        before = owner_a.requests
        await say(pa, "from console A", "an answer to A", on_a, on_b)
        # the turn came back on the stream: one request sent it, none polled for it
        assert spent(before, owner_a.requests) == {"discussion_send": 1}
        await say(pb, "from console B", "an answer to B", on_b, on_a)
        await owner.call(discussions.get(did).wait())

    assert built == [], "an attached console built its own discussion store"
    assert consoles_said(discussions.store_dir / f"{did}.json") == [
        "from console A",
        "from console B",
    ]


async def say(pilot: Any, text: str, answer: str, *screens: DiscussScreen) -> None:
    """Type `text` on the first screen's console, then wait until every
    screen shows it and the assistant's `answer`."""
    await pilot.press(*text, "enter")
    await shown(pilot, screens, text, answer)


async def shown(pilot: Any, screens: tuple[DiscussScreen, ...], *texts: str) -> None:
    """Until every screen's transcript holds every one of `texts`."""
    for screen in screens:
        await until(
            pilot,
            f"{texts!r} on every console",
            lambda s=screen: all(said(s, text) for text in texts),
        )


async def test_a_stalled_owner_is_said_at_once_and_the_discussion_screen_keeps_typing(
    site: tuple[OwnerThread, Discussions, Path],
) -> None:
    """The owner stops answering (its loop held, as SIGSTOP would): the
    console says so, a message sent meanwhile is refused at once with the
    typed sentence (nothing waits on the owner), typing still lands, and once
    the owner answers again the message goes through."""
    owner, _discussions, repo = site
    attached = AttachedSupervisor(owner.sup.state_dir, config=fast_config())
    app = CorralApp(cast(Supervisor, attached), default_repo=repo, attached=True)
    notes: list[str] = []
    async with app.run_test(size=(120, 34)) as pilot:
        screen = await open_discussion(app, pilot)
        app.notify = lambda message, **_kw: notes.append(str(message))  # type: ignore[method-assign]
        field = screen.query_one("#discuss-input", Input)

        owner.loop.call_soon_threadsafe(time.sleep, 4)  # the owner holds its loop
        await until(pilot, "the console to say it is stalled", lambda: attached.owner_stalled)
        began = time.monotonic()
        await pilot.press(*"hello", "enter")
        await until(pilot, "the refusal", lambda: refused(notes), timeout=1)
        assert time.monotonic() - began < 1.0, notes
        await pilot.press(*"again")  # the screen still takes keys while the owner is stopped
        assert field.value == "again"
        assert not said(screen, "hello")

        await until(pilot, "the owner to answer again", lambda: not attached.owner_stalled)
        await pilot.press("enter")
        await until(pilot, "the turn, through the owner", lambda: said(screen, "an answer to A"))
        assert said(screen, "again")


def refused(notes: list[str]) -> bool:
    """A call refused because the owner is stalled (not the app's own notice
    that it is: "… this console shows what it last saw")."""
    return any(n.startswith(STALLED) and "last saw" not in n for n in notes)


async def test_an_attached_console_pins_prepares_and_starts_through_the_owner(
    site: tuple[OwnerThread, Discussions, Path],
) -> None:
    """The model field, the prepared task and the session started from it are
    the owner's: a pin the owner refuses is said with its reason, the one it
    takes is on the owner's discussion, and the session started from the
    prepared task is linked there (the task used up at the owner)."""
    owner, _unused, repo = site
    served = {
        "deep": ScriptedProvider(
            [
                Turn(
                    text="",
                    tool_calls=(
                        ToolCall(
                            "p1",
                            "prepare_coding_task",
                            {"intent": "Alpha adds a file", "constraints": ["keep the API"]},
                        ),
                    ),
                    stop_reason="tool_use",
                ),
                Turn(text="Prepared: Alpha adds a file."),
            ]
        ),
        "plain": ScriptedProvider([]),
    }
    entries = [
        ModelEntry(name="deep", provider="openai", model="deep-id"),
        ModelEntry(name="plain", provider="openai", model="plain-id", tools=False),
    ]
    discussions = Discussions(
        owner.sup.state_dir, ModelChain(entries, factory=lambda e: served[e.name])
    )
    owner.services.control.discussions = discussions  # what the owner serves from now on
    attached = AttachedSupervisor(owner.sup.state_dir, config=fast_config())
    app = CorralApp(cast(Supervisor, attached), default_repo=repo, attached=True)
    async with app.run_test(size=(140, 40)) as pilot:
        screen = await open_discussion(app, pilot)
        assert screen.discussion is not None
        held = discussions.get(screen.discussion.id)  # the owner's one copy
        await refuse_then_pin(app, pilot, screen, lambda: held.model)

        screen.query_one("#discuss-input", Input).focus()
        await pilot.press(*"plan it", "enter")
        await until(pilot, "the prepared task", lambda: screen.discussion.prepared_task)
        assert held.prepared_task is not None
        await start_from_the_form(app, pilot, pinned="deep")
        row = await until(
            pilot,
            "the session, started at the owner from the discussion",
            lambda: next((r for r in owner.sup.list() if r.discussion_id == held.id), None),
        )
        await until(pilot, "the task used up at the owner", lambda: held.prepared_task is None)
        assert row.model == "deep"
    await owner.call(discussions.close_all())


async def test_the_owning_console_and_a_socket_client_share_one_discussion() -> None:
    """The console that owns the state dir reaches its discussions through
    the same surface, over the very store its socket serves: a client on the
    socket and the console's `d` screen see each other's turns."""
    root = Path(tempfile.mkdtemp(prefix="so", dir="/tmp"))  # a short socket path
    try:
        repo = init_repo(root / "repo")
        sup = Supervisor(
            root / "state",
            drafter=ScriptedDrafter([]),
            engines=ScriptedEngines(ScriptedEngine([])),
            config=fast_config(),
        )
        app = CorralApp(sup, default_repo=repo)
        app.owned_discussions = discussions = Discussions(
            root / "state", ScriptedProvider([Turn("an answer to A"), Turn("an answer to B")])
        )
        app.serve_with = lambda: OwnerServices(
            sup, discussions=lambda: app.owned_discussions, mcp_http=False
        )
        async with app.run_test(size=(120, 34)) as pilot:
            screen = await open_discussion(app, pilot)  # none saved: the console starts one
            assert screen.discussion is not None
            did = screen.discussion.id
            await until(
                pilot, "the console's socket", lambda: control_socket(sup.state_dir).exists()
            )
            client = await AsyncControlClient.connect(sup.state_dir)
            try:
                which = p.DiscussionParams(discussion_id=did)
                assert (await client.request(Calls.discussion_resume, which))[
                    "discussion_id"
                ] == did
                stream = await client.subscribe_discussion(did)
                await say(pilot, "from console A", "an answer to A", screen)
                told = p.DiscussionSendParams(discussion_id=did, text="from console B")
                await client.request(Calls.discussion_send, told)
                await shown(pilot, (screen,), "from console B", "an answer to B")
                heard: list[str] = []  # what the socket's stream carried, in order
                while len(heard) < 2:
                    event = await asyncio.wait_for(stream.get(), 10)
                    if isinstance(event, DiscussUserMessageEvent):
                        heard.append(event.data.text)
                assert heard == ["from console A", "from console B"]
                stream.close()
            finally:
                await client.close()
            await discussions.get(did).wait()
        assert consoles_said(discussions.store_dir / f"{did}.json") == [
            "from console A",
            "from console B",
        ]
    finally:
        shutil.rmtree(root, ignore_errors=True)
