"""Status detection from screens and hooks: busy before waiting, questions
parsed with their options, debounce and hold, never a false "waiting"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from corral.supervisor.agents.base import AgentUnavailable, check_recursion, hook_command
from corral.supervisor.agents.profiles import CLAUDE, CODEX, DEMO, profile_for
from corral.supervisor.status import (
    AgentStatus,
    StatusTracker,
    classify,
    clean_lines,
    find_question,
    from_hook,
)

CLAUDE_BUSY = """
● I'll fix the slug function.

✻ Cogitating… (12s · ↑ 1.2k tokens · esc to interrupt)

╭──────────────────────────────────────────────╮
│ >                                            │
╰──────────────────────────────────────────────╯
  ? for shortcuts
""".splitlines()

CLAUDE_PERMISSION = """
● Write(textkit/slug.py)

╭──────────────────────────────────────────────╮
│ Edit file                                    │
│ textkit/slug.py                              │
│                                              │
│ Do you want to make this edit to slug.py?    │
│ ❯ 1. Yes                                     │
│   2. Yes, allow all edits during this session│
│   3. No, and tell Claude what to do differently (esc) │
╰──────────────────────────────────────────────╯
""".splitlines()

CLAUDE_IDLE = """
● Done: slugify() now folds accents.

╭──────────────────────────────────────────────╮
│ >                                            │
╰──────────────────────────────────────────────╯
  ? for shortcuts
""".splitlines()

DEMO_WAITING = """
corral demo agent (scripted — not a model)
> Make slugify() fold accents
Reading textkit/slug.py
Do you want to make this edit to textkit/slug.py?
❯ 1. Yes
  2. Yes, and don't ask again this session
  3. No, and tell the demo agent what to do differently (esc)
""".splitlines()


def test_busy_markers_win_over_everything_else() -> None:
    reading = classify(CLAUDE_BUSY, CLAUDE.markers)
    assert reading.status is AgentStatus.RUNNING
    assert "esc to interrupt" in reading.reason


def test_a_permission_prompt_is_waiting_with_its_question_and_options() -> None:
    reading = classify(CLAUDE_PERMISSION, CLAUDE.markers)
    assert reading.status is AgentStatus.WAITING
    assert reading.question is not None
    assert reading.question.prompt == "Do you want to make this edit to slug.py?"
    assert reading.question.options[0] == "Yes"
    assert reading.question.options[2].startswith("No, and tell Claude")
    demo = classify(DEMO_WAITING, DEMO.markers)
    assert demo.status is AgentStatus.WAITING
    assert demo.question is not None and len(demo.question.options) == 3


def test_idle_at_the_prompt_and_unknown_otherwise() -> None:
    assert classify(CLAUDE_IDLE, CLAUDE.markers).status is AgentStatus.IDLE
    assert classify(["compiling foo.c", "linking"], CLAUDE.markers).status is AgentStatus.UNKNOWN
    assert classify([], CLAUDE.markers).status is AgentStatus.UNKNOWN


def test_a_numbered_list_in_prose_is_not_a_question() -> None:
    lines = ["Plan:", "1. read the file", "2. fix the bug", "> "]
    reading = classify(lines, CODEX.markers)
    assert reading.status is not AgentStatus.WAITING


def test_only_the_last_thirty_lines_count() -> None:
    old_question = CLAUDE_PERMISSION
    later = [f"output line {i}" for i in range(40)]
    assert classify(old_question + later, CLAUDE.markers).status is not AgentStatus.WAITING


def test_ansi_and_nbsp_are_cleaned() -> None:
    lines = ["\x1b[1m\x1b[33m✻ Working…\x1b[0m (esc\xa0to interrupt)"]
    assert clean_lines(lines) == ["✻ Working… (esc to interrupt)"]
    assert classify(lines).status is AgentStatus.RUNNING


def test_find_question_requires_consecutive_options_from_one() -> None:
    assert find_question(["Pick?", "2. b", "3. c"]) is None
    q = find_question(["Continue?", "1. Yes", "2. No"])
    assert q is not None and q.options == ("Yes", "No")


def test_hooks_map_to_exact_edges() -> None:
    assert from_hook({"hook_event_name": "UserPromptSubmit"}).status is AgentStatus.RUNNING  # type: ignore[union-attr]
    assert from_hook({"hook_event_name": "Stop"}).status is AgentStatus.IDLE  # type: ignore[union-attr]
    note = from_hook(
        {"hook_event_name": "Notification", "message": "Claude needs your permission to use Bash"}
    )
    assert note is not None and note.status is AgentStatus.WAITING
    idle = from_hook(
        {"hook_event_name": "Notification", "message": "Claude is waiting for your input"}
    )
    assert idle is not None and idle.status is AgentStatus.IDLE
    assert from_hook({"type": "agent-turn-complete"}).status is AgentStatus.IDLE  # type: ignore[union-attr]
    assert from_hook({"hook_event_name": "PreCompact"}) is None


def test_the_tracker_takes_busy_at_once_and_debounces_idle() -> None:
    t = StatusTracker(markers=CLAUDE.markers, hold=0.5, idle_debounce=1.5)
    assert t.on_screen(CLAUDE_BUSY, now=0.0) is True  # a busy marker is never shown idle
    assert t.current.status is AgentStatus.RUNNING
    assert t.on_screen(CLAUDE_IDLE, now=1.0) is False  # idle needs an unchanged screen
    assert t.on_screen(CLAUDE_IDLE, now=2.0) is False  # …for 1.5 s
    assert t.on_screen(CLAUDE_IDLE, now=2.6) is True  # the debounce is its hold
    assert t.current.status is AgentStatus.IDLE
    assert t.turn_ends == 1


def test_a_hook_edge_applies_at_once_and_exit_sticks() -> None:
    t = StatusTracker(markers=CLAUDE.markers)
    t.on_screen(CLAUDE_PERMISSION, now=0.0)
    assert t.on_hook(
        {"hook_event_name": "Notification", "message": "Claude needs your permission"}, now=0.1
    )
    assert t.current.status is AgentStatus.WAITING
    assert t.current.question is not None  # the screen's question text is kept
    assert t.on_hook({"hook_event_name": "Stop"}, now=0.2)
    assert t.current.status is AgentStatus.IDLE and t.current.source == "hook"
    assert t.on_exit(1, now=0.3)
    assert t.current.status is AgentStatus.ERROR
    assert t.on_hook({"hook_event_name": "UserPromptSubmit"}, now=0.4) is False


def test_claude_gets_a_settings_file_with_every_hook(tmp_path: Path) -> None:
    plan = CLAUDE.plan(
        "/bin/claude",
        prompt="do it",
        session_dir=tmp_path,
        hook_cmd="py -m corral.tui.cli hook --file /x/hooks.jsonl",
    )
    assert plan.argv[:2] == ["/bin/claude", "--settings"]
    assert plan.argv[-1] == "do it"
    settings = json.loads(Path(plan.argv[2]).read_text())
    for event in (
        "SessionStart",
        "UserPromptSubmit",
        "PreToolUse",
        "PermissionRequest",
        "Notification",
        "Stop",
        "SessionEnd",
    ):
        command = settings["hooks"][event][0]["hooks"][0]["command"]
        assert command.endswith(f"hook --file /x/hooks.jsonl {event}")
    assert "ANTHROPIC_API_KEY" in plan.env_allow


def test_codex_gets_notify_as_a_one_run_override(tmp_path: Path) -> None:
    plan = CODEX.plan(
        "/bin/codex",
        prompt="do it",
        session_dir=tmp_path,
        hook_cmd="py -m corral.tui.cli hook --file /x/h.jsonl",
    )
    assert plan.argv[1] == "--no-daemon"  # no detached app-server left behind
    assert plan.argv[2] == "-c" and plan.argv[3].startswith("notify=[")
    assert '"--argv-payload"' in plan.argv[3]


def test_the_recursion_guard_refuses_an_agent_already_in_the_chain() -> None:
    chain = check_recursion("claude", {})
    assert chain == "corral>agent:claude"
    with pytest.raises(AgentUnavailable, match="already runs inside a claude session"):
        check_recursion("claude", {"CORRAL_INVOKED_BY": chain})
    assert check_recursion("codex", {"CORRAL_INVOKED_BY": chain}).endswith("agent:codex")


def test_profiles_and_custom_commands() -> None:
    assert profile_for("demo").find() is not None
    custom = profile_for("custom:bash -l")
    assert custom.find() is not None and not custom.prompt_in_argv
    with pytest.raises(AgentUnavailable, match="unknown agent"):
        profile_for("nope")
    assert "hook --file" in hook_command("/usr/bin/python3", Path("/tmp/h.jsonl"))


def test_clean_lines_keeps_the_last_meaningful_lines_in_order() -> None:
    lines = ["a", "╭───╮", "│ > │", "", "b", "───", "", "  "]
    assert clean_lines(lines) == ["a", ">", "", "b"]
    assert clean_lines([f"l{i}" for i in range(50)] + [""], n=3) == ["l47", "l48", "l49"]
    assert clean_lines(["", "  "]) == []
