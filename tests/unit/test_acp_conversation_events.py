"""What corral's ACP client journals for the conversation view: a thought's
last piece before the message that follows it, a tool call's output (its
raw output and the output of the terminal corral ran for it), and the
permission question's diff when the agent asks with raw input only (as
Claude's adapter does)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from acp import (
    start_tool_call,
    update_agent_message_text,
    update_agent_thought_text,
    update_tool_call,
)
from acp.helpers import tool_diff_content, tool_terminal_ref
from acp.schema import (
    AllowedOutcome,
    PermissionOption,
    RequestPermissionResponse,
    ToolCallUpdate,
)

from corral.supervisor.acp.client import CorralClient, tool_detail
from corral.supervisor.acp.files import WorktreeFiles
from corral.supervisor.acp.terminals import Terminals
from corral.supervisor.events import ConversationData, EventData


def _client(tmp_path: Path) -> tuple[CorralClient, list[EventData], list[ToolCallUpdate]]:
    emitted: list[EventData] = []
    asked: list[ToolCallUpdate] = []

    async def permission(call: ToolCallUpdate, options: list[Any]) -> RequestPermissionResponse:
        asked.append(call)
        return RequestPermissionResponse(
            outcome=AllowedOutcome(option_id="allow", outcome="selected")
        )

    files = WorktreeFiles(tmp_path)
    client = CorralClient(files, Terminals(files), emitted.append, permission)
    return client, emitted, asked


def _parts(emitted: list[EventData]) -> list[tuple[str, str]]:
    return [(e.part, e.text) for e in emitted if isinstance(e, ConversationData)]


async def test_a_thoughts_last_piece_is_journaled_before_the_message_after_it(
    tmp_path: Path,
) -> None:
    """Before: the unfinished last line of a thought waited in the buffer
    while the message's lines went out, and landed after them."""
    client, emitted, _ = _client(tmp_path)
    client.in_turn = True
    for update in (
        update_agent_thought_text("I should read the file\nthen edit"),
        update_agent_thought_text(" it carefully"),
        update_agent_message_text("Done: I edited it.\n"),
        update_agent_message_text("All good"),
        update_agent_thought_text("one more thought"),
    ):
        await client.session_update("s", update)
    client.in_turn = False
    client.flush()
    assert _parts(emitted) == [
        ("thought", "I should read the file"),
        ("thought", "then edit it carefully"),
        ("message", "Done: I edited it."),
        ("message", "All good"),
        ("thought", "one more thought"),
    ]


async def test_a_tool_calls_output_is_journaled_from_its_raw_output_and_its_terminal(
    tmp_path: Path,
) -> None:
    client, emitted, _ = _client(tmp_path)
    await client.session_update(
        "s", start_tool_call("c1", "Run tests", kind="execute", raw_input={"command": "pytest"})
    )
    await client.session_update(
        "s",
        update_tool_call(
            "c1", status="completed", raw_output={"stdout": "3 passed\n", "stderr": ""}
        ),
    )
    tid = await client.terminals.create("sh", ["-c", "echo from-the-terminal"], {}, None, None)
    await asyncio.wait_for(client.terminals.wait(tid), 30)
    await client.session_update(
        "s", update_tool_call("c2", status="completed", content=[tool_terminal_ref(tid)])
    )
    calls = [e for e in emitted if isinstance(e, ConversationData)]
    assert calls[0].text == "$ pytest" and calls[0].output is None
    assert calls[1].output == "3 passed"
    assert calls[2].output == "from-the-terminal"
    await client.terminals.close()


def test_claudes_raw_edit_and_write_inputs_are_shown_as_diffs_not_json() -> None:
    """Claude's adapter asks permission with the tool's raw input
    (`file_path`, `old_string`, `new_string`): before, the question showed
    that JSON."""
    edit = update_tool_call(
        "c1",
        title="Edit a.py",
        raw_input={"file_path": "/w/a.py", "old_string": "x = 1\n", "new_string": "x = 2\n"},
    )
    shown = tool_detail(edit)
    assert "-x = 1" in shown and "+x = 2" in shown and "{" not in shown
    write = update_tool_call(
        "c2", title="Write b.py", raw_input={"file_path": "/w/b.py", "content": "print(1)\n"}
    )
    assert "+print(1)" in tool_detail(write)


async def test_a_permission_without_content_shows_the_diff_its_tool_call_announced(
    tmp_path: Path,
) -> None:
    client, _, asked = _client(tmp_path)
    await client.session_update(
        "s",
        start_tool_call(
            "c1",
            "Edit a.txt",
            kind="edit",
            content=[tool_diff_content("/w/a.txt", "new\n", "old\n")],
        ),
    )
    option = PermissionOption(option_id="allow", name="Allow", kind="allow_once")
    await client.request_permission(
        [option], "s", ToolCallUpdate(tool_call_id="c1", title="Edit a.txt", raw_input={"x": 1})
    )
    shown = tool_detail(asked[0])
    assert "-old" in shown and "+new" in shown
