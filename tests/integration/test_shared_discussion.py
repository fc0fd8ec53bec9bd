"""The owner holds each discussion once: two real clients on one owner resume
the same saved discussion, each speaks in it, each sees the other's turn and
the assistant's replies on its stream, and the saved record keeps both turns.

(Two processes that each load the discussion from the state dir and save it
back lose one of the turns: the last save wins. Through the owner there is one
copy and one writer.)"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from corral.supervisor.control import protocol as p
from corral.supervisor.control.surface import Calls
from corral.supervisor.discuss import Discussions
from corral.supervisor.discuss.discussion_events import DiscussEvent
from corral.supervisor.errors import CorralError
from corral.supervisor.llm.base import Turn
from corral.supervisor.remote import AsyncControlClient, OwnerServices
from corral.supervisor.session.journal import Subscription
from tests.conftest import SupervisorFactory
from tests.fakes.scripted_llm import ScriptedProvider
from tests.integration.test_mcp import short_state as short_state  # the fixture


async def _until(sub: Subscription[DiscussEvent], seen: list[DiscussEvent], turns: int) -> None:
    """Read `sub` into `seen` until it holds `turns` completed turns."""
    while sum(e.type == "turn_complete" for e in seen) < turns:
        seen.append(await asyncio.wait_for(sub.get(), 15))


def _said(seen: list[DiscussEvent]) -> list[str]:
    return [str(getattr(e.data, "text", "")) for e in seen if e.type == "user_message"]


async def test_two_clients_on_one_discussion_see_each_others_turns_and_keep_both(
    make_supervisor: SupervisorFactory, short_state: Path, repo: Path
) -> None:
    sup = await make_supervisor(state=short_state)
    provider = ScriptedProvider([Turn("an answer to A"), Turn("an answer to B")])
    discussions = Discussions(short_state, provider)
    services = OwnerServices(sup, discussions=discussions, mcp_http=False)
    await services.start()
    # a discussion an earlier console saved, no longer open anywhere
    did = (await discussions.start(repo)).id
    await discussions.close(did)
    a = await AsyncControlClient.connect(sup.state_dir)
    b = await AsyncControlClient.connect(sup.state_dir)
    try:
        which = p.DiscussionParams(discussion_id=did)
        for client in (a, b):
            resumed = await client.request(Calls.discussion_resume, which)
            assert resumed["discussion_id"] == did
        sub_a = await a.subscribe_discussion(did)
        sub_b = await b.subscribe_discussion(did)
        seen_a: list[DiscussEvent] = []
        seen_b: list[DiscussEvent] = []

        said = p.DiscussionSendParams(discussion_id=did, text="from console A")
        await a.request(Calls.discussion_send, said)
        await asyncio.gather(_until(sub_a, seen_a, 1), _until(sub_b, seen_b, 1))
        said = p.DiscussionSendParams(discussion_id=did, text="from console B")
        await b.request(Calls.discussion_send, said)
        await asyncio.gather(_until(sub_a, seen_a, 2), _until(sub_b, seen_b, 2))

        for seen in (seen_a, seen_b):  # each sees both turns, in the order they were said
            assert _said(seen) == ["from console A", "from console B"]
            replies = [e.data.text for e in seen if e.type == "assistant_message"]
            assert replies == ["an answer to A", "an answer to B"]
        sub_a.close()
        sub_b.close()
    finally:
        await a.close()
        await b.close()
        await services.close()
        await discussions.close_all()
    assert consoles_said(discussions.store_dir / f"{did}.json") == [
        "from console A",
        "from console B",
    ]


def consoles_said(record: Path) -> list[str]:
    """The consoles' turns in a discussion's saved record, in order (none
    while the owner has not saved it)."""
    try:
        saved = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    users = [str(m["content"]) for m in saved["messages"] if m["role"] == "user"]
    return [u for u in users if u.startswith("from console")]


async def test_a_prepared_task_is_used_up_only_by_a_session_started_from_it(
    make_supervisor: SupervisorFactory, short_state: Path, repo: Path
) -> None:
    """`discussion_link` says a session was started from the discussion's
    prepared task: the owner checks that it was before it drops the task."""
    sup = await make_supervisor(state=short_state)
    discussions = Discussions(short_state, ScriptedProvider([]))
    services = OwnerServices(sup, discussions=discussions, mcp_http=False)
    await services.start()
    held = await discussions.start(repo)
    held.edit_prepared("Alpha adds a file", ["keep the API"])
    stranger = (await sup.start("another task", repo, wait=False)).session_id
    client = await AsyncControlClient.connect(sup.state_dir)
    try:
        for session_id in (stranger, "nope-0000000000000000000000"):
            with pytest.raises(CorralError):
                await client.request(
                    Calls.discussion_link,
                    p.DiscussionLinkParams(discussion_id=held.id, session_id=session_id),
                )
            assert held.prepared_task is not None  # the task stays
    finally:
        await client.close()
        await services.close()
        await discussions.close_all()
