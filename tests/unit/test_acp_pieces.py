"""The ACP engine's pure pieces: which option an answer names, what
`--on-question approve|deny` picks among an ACP agent's options, the edit a
permission question shows, a confined terminal's output limit, and the
worktree's file boundary (real files, real symlinks)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from acp.schema import PermissionOption

from corral.supervisor.acp.agents import acp_agent, is_acp
from corral.supervisor.acp.client import tool_detail
from corral.supervisor.acp.files import Refused, WorktreeFiles
from corral.supervisor.acp.terminals import Terminals
from corral.supervisor.agents.base import AgentUnavailable
from corral.supervisor.engines.acp import choose_option, option_text
from corral.tui.cli.run import _answer

OPTIONS = [
    PermissionOption(option_id="a1", name="Allow", kind="allow_once"),
    PermissionOption(option_id="a2", name="Always allow", kind="allow_always"),
    PermissionOption(option_id="r1", name="Reject", kind="reject_once"),
]


def test_an_answer_names_an_option_by_id_text_name_or_kind_and_nothing_else() -> None:
    assert choose_option("a2", OPTIONS) is OPTIONS[1]
    assert choose_option("Reject [reject_once]", OPTIONS) is OPTIONS[2]
    assert choose_option("always allow", OPTIONS) is OPTIONS[1]
    assert choose_option("allow_once", OPTIONS) is OPTIONS[0]
    assert choose_option("yes please", OPTIONS) is None


async def test_on_question_approve_picks_allow_once_and_deny_reject_once() -> None:
    texts = [option_text(o) for o in OPTIONS]
    assert await _answer(texts, "Write a", "approve", as_json=True) == "Allow [allow_once]"
    assert await _answer(texts, "Write a", "deny", as_json=True) == "Reject [reject_once]"


def test_a_permission_question_shows_the_edit_as_a_unified_diff() -> None:
    from acp import update_tool_call
    from acp.helpers import tool_diff_content

    call = update_tool_call(
        "c1", title="Edit", content=[tool_diff_content("/w/a.txt", "new\n", "old\n")]
    )
    shown = tool_detail(call)
    assert "-old" in shown and "+new" in shown and "a/w/a.txt" in shown
    command = update_tool_call("c2", title="Run", raw_input={"command": ["rm", "-rf", "x"]})
    assert tool_detail(command) == "$ rm -rf x"


def test_acp_names_resolve_and_bad_ones_say_what_to_do() -> None:
    assert is_acp("gemini-acp") and is_acp("acp:my-agent --acp") and not is_acp("gemini")
    agent = acp_agent("acp:my-agent --acp --x 'a b'")
    assert (agent.program, agent.args) == ("my-agent", ("--acp", "--x", "a b"))
    with pytest.raises(AgentUnavailable, match="the ACP command is empty"):
        acp_agent("acp:  ")
    with pytest.raises(AgentUnavailable, match="unknown ACP agent 'nope-acp'"):
        acp_agent("nope-acp")


def test_files_stay_inside_the_worktree(tmp_path: Path) -> None:
    worktree = tmp_path / "w"
    (worktree / "sub").mkdir(parents=True)
    (tmp_path / "secret").write_text("key")
    (worktree / "leak").symlink_to(tmp_path / "secret")
    files = WorktreeFiles(worktree)
    files.write(str(worktree / "sub" / "deep" / "a.txt"), "one\ntwo\nthree\n")
    assert files.read(str(worktree / "sub" / "deep" / "a.txt"), line=2, limit=1) == "two\n"
    for bad, why in (
        (str(worktree / "leak"), "outside the session's worktree"),
        (str(worktree / ".." / "secret"), "outside the session's worktree"),
        ("relative.txt", "not an absolute path"),
        (str(worktree / ".git" / "config"), "git metadata"),
    ):
        with pytest.raises(Refused, match=why):
            files.write(bad, "x")
        with pytest.raises(Refused):
            files.read(bad)
    assert (tmp_path / "secret").read_text() == "key"


async def test_a_terminal_keeps_the_tail_of_its_output_within_the_limit(tmp_path: Path) -> None:
    terminals = Terminals(WorktreeFiles(tmp_path))
    tid = await terminals.create("sh", ["-c", "seq 1 2000; exit 7"], {}, None, 100)
    assert await asyncio.wait_for(terminals.wait(tid), 30) == (7, None)
    output, truncated, code, _sig = terminals.output(tid)
    assert truncated and code == 7 and len(output.encode()) <= 100
    assert output.endswith("1999\n2000\n")
    with pytest.raises(Refused, match="outside the session's worktree"):
        await terminals.create("true", [], {}, "/", None)
    await terminals.close()
    with pytest.raises(Refused, match="no terminal"):
        terminals.output(tid)
