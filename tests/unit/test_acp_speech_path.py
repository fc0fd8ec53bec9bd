"""Pieces of speech past the SDK (`acp.wire.spoken`, `StdioWire.on_chunk`):
only the exact shape of a text chunk takes the short path, everything else
goes through the SDK as before, and the order of what the agent sent holds
across both paths."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from acp.client.connection import ClientSideConnection

from corral.supervisor.acp.client import CorralClient
from corral.supervisor.acp.files import WorktreeFiles
from corral.supervisor.acp.terminals import Terminals
from corral.supervisor.acp.wire import StdioWire, spoken
from corral.supervisor.events import ConversationData


def update(body: Any, **params: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": "s1", "update": body, **params},
    }


def chunk(text: Any, kind: str = "agent_message_chunk", ctype: str = "text") -> dict[str, Any]:
    return update({"sessionUpdate": kind, "content": {"type": ctype, "text": text}})


def test_only_a_text_chunk_takes_the_short_path() -> None:
    assert spoken(chunk("hi")) == ("message", "hi")
    assert spoken(chunk("hm", "agent_thought_chunk")) == ("thought", "hm")
    # anything else is the SDK's to validate and route
    assert spoken(chunk(5)) is None
    assert spoken(chunk("x", ctype="image")) is None
    assert spoken(chunk("x", "user_message_chunk")) is None
    assert spoken({**chunk("x"), "id": 3}) is None  # a request, not a notification
    assert spoken({**chunk("x"), "method": "session/other"}) is None
    assert spoken(update("not a dict")) is None
    assert spoken({"jsonrpc": "2.0", "method": "session/update", "params": ["x"]}) is None
    bad_sid = chunk("x")
    bad_sid["params"]["sessionId"] = 7
    assert spoken(bad_sid) is None


async def test_speech_and_other_updates_keep_the_agents_order(tmp_path: Path) -> None:
    messages = [
        chunk("one, "),
        chunk("two\n"),
        update(
            {"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "Edit", "status": "pending"}
        ),
        chunk("three\n"),
        chunk("deep", "agent_thought_chunk"),
        chunk(5),  # refused by the SDK's validation: dropped, nothing breaks
        update(
            {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "image", "data": "AAAA", "mimeType": "image/png"},
            }
        ),
        chunk("four\n"),
    ]
    reader = asyncio.StreamReader()
    reader.feed_data(("\n".join(json.dumps(m) for m in messages) + "\n").encode())
    reader.feed_eof()
    said: list[Any] = []
    files = WorktreeFiles(tmp_path)

    async def never(*_: Any) -> Any:
        raise AssertionError("no permission is asked")

    client = CorralClient(files, Terminals(files), said.append, never)
    client.in_turn = True
    wire = StdioWire(reader, None, on_malformed=lambda _l: None, on_sent=lambda *_: None)  # type: ignore[arg-type]
    wire.on_chunk = client.chunk
    conn = ClientSideConnection(client, wire)  # type: ignore[arg-type]
    for _ in range(200):
        await asyncio.sleep(0)
    client.flush()
    await conn.close()
    shown = [(d.part, d.text) for d in said if isinstance(d, ConversationData)]
    assert shown == [
        ("message", "one, two"),
        ("tool_call", ""),
        ("message", "three"),
        ("thought", "deep"),
        ("message", "[image]four"),
    ]
