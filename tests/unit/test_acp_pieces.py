"""The ACP engine's pure pieces: which option an answer names, what
`--on-question approve|deny` picks among an ACP agent's options, the edit a
permission question shows, a confined terminal's output limit, and the
worktree's file boundary (real files, real symlinks)."""

from __future__ import annotations

import asyncio
import json
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


async def test_a_terminal_command_without_args_is_a_shell_line(tmp_path: Path) -> None:
    """Claude Code's adapter sends its Bash tool's whole command line as
    `command` with no `args`: it runs as the shell line it is (it was quoted
    as one program name: "No such file or directory"); with args, the
    program and its words stay quoted."""
    terminals = Terminals(WorktreeFiles(tmp_path))
    tid = await terminals.create("echo a && echo 'b c'", None, {}, None, None)
    assert await asyncio.wait_for(terminals.wait(tid), 30) == (0, None)
    assert terminals.output(tid)[0] == "a\nb c\n"
    tid = await terminals.create("echo", ["a && echo b"], {}, None, None)
    assert await asyncio.wait_for(terminals.wait(tid), 30) == (0, None)
    assert terminals.output(tid)[0] == "a && echo b\n"
    await terminals.close()


def test_an_agents_error_is_said_by_its_reason_never_a_bare_internal_error() -> None:
    """Gemini CLI answers a failed prompt as "Internal error" with its reason
    in `data.details`, or with the model API's error body (as an object or
    as a JSON string): the reason comes out, with the API's code and status."""
    from acp import RequestError

    from corral.supervisor.engines.acp import agent_error, refused_by_provider

    body = {"error": {"code": 400, "message": "Bad field.", "status": "INVALID_ARGUMENT"}}
    shapes = [
        RequestError(-32603, "Internal error", {"details": "No previous sessions found"}),
        RequestError(-32603, "Internal error", body),
        RequestError(-32603, "Internal error", {"details": json.dumps(body)}),
        RequestError(400, json.dumps(body)),
        RequestError(429, "Rate limit exceeded. Try again later."),
    ]
    said = [agent_error(e) for e in shapes]
    assert said == [
        "Internal error: No previous sessions found",
        "Bad field. (400 INVALID_ARGUMENT)",
        "Bad field. (400 INVALID_ARGUMENT)",
        "Bad field. (400 INVALID_ARGUMENT)",
        "Rate limit exceeded. Try again later.",
    ]
    refused = [refused_by_provider(e, s) for e, s in zip(shapes, said, strict=True)]
    assert refused == [False, True, True, True, True]


def test_the_paths_a_shell_command_names_outside_the_worktree(tmp_path: Path) -> None:
    from corral.supervisor.acp.contained import named_paths, read_only_paths

    top = tmp_path / "wt"
    top.mkdir()
    command = (
        f"echo x >/tmp/a.txt; cp {top}/in.txt '/var/tmp/b'; tee ../up.txt < {top}/f; "
        'cat ~/.secret; echo $HOME/d; python3 -c \'open("/etc/e", "w")\''
    )
    assert [str(p) for p in named_paths(command, top, "/home/agent")] == [
        "/tmp/a.txt",
        "/var/tmp/b",
        str(tmp_path / "up.txt"),
        "/home/agent/.secret",
        "/etc/e",
    ]
    out = "sh: 1: cannot create /usr/x: Read-only file system\ntouch: cannot touch '/opt/y': Read-only file system\n"
    assert read_only_paths(out) == ["/usr/x", "/opt/y"]
