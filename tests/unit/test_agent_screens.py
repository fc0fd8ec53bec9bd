"""The Gemini CLI and Aider profiles against their real screens, captured
with `tmux capture-pane -p` from the pinned versions driven against the fake
model server (tests/unit/data/screens; docs/agent-clis.md quotes them). A CLI
update that changes these screens shows up here first."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from corral.supervisor.agents.profiles import GEMINI
from corral.supervisor.panes.manager import menu_keys
from corral.supervisor.status import AgentStatus, classify, clean_lines

SCREENS = Path(__file__).parent / "data" / "screens"


def screen(name: str) -> list[str]:
    return (SCREENS / name).read_text(encoding="utf-8").splitlines()


# --------------------------------------------------------------------------- Gemini CLI


@pytest.mark.parametrize("name", ["gemini-busy.txt", "gemini-busy_tool.txt"])
def test_gemini_thinking_spinner_is_running(name: str) -> None:
    reading = classify(screen(name), GEMINI.markers)
    assert reading.status is AgentStatus.RUNNING
    assert "esc to cancel" in reading.reason


def test_gemini_after_its_turn_is_idle() -> None:
    # "? for shortcuts" and the input line show while busy too: the footer decides
    assert classify(screen("gemini-idle_after.txt"), GEMINI.markers).status is AgentStatus.IDLE


def test_gemini_write_prompt_is_a_question_with_its_options() -> None:
    reading = classify(screen("gemini-write_prompt.txt"), GEMINI.markers)
    assert reading.status is AgentStatus.WAITING
    assert reading.question is not None
    assert reading.question.prompt == "Apply this change?"
    assert reading.question.options == (
        "Allow once",
        "Allow for this session",
        "Modify with external editor",
        "No, suggest changes (esc)",
    )


def test_gemini_shell_prompt_is_a_question() -> None:
    reading = classify(screen("gemini-shell_prompt.txt"), GEMINI.markers)
    assert reading.status is AgentStatus.WAITING
    assert reading.question is not None
    assert reading.question.prompt == "Allow execution of [Shell]?"
    assert reading.question.options[0] == "Allow once"


def test_gemini_answer_moves_from_its_dot_cursor() -> None:
    """The selected option carries `●`: picking it is Enter, the next one Down."""
    lines = clean_lines(screen("gemini-write_prompt.txt"))
    assert menu_keys(lines, re.compile("^Allow once$")) == ["Enter"]
    assert menu_keys(lines, re.compile("^Allow for this session$")) == ["Down", "Enter"]


def test_gemini_auth_dialog_asks_the_operator_and_is_never_answered() -> None:
    """Choosing how to sign in is the operator's call: a question, no dialog."""
    lines = screen("gemini-auth.txt")
    reading = classify(lines, GEMINI.markers)
    assert reading.status is AgentStatus.WAITING
    assert reading.question is not None
    assert "Use Gemini API Key" in reading.question.options
    text = "\n".join(clean_lines(lines))
    assert not any(d.detect.search(text) for d in GEMINI.dialogs)


def test_gemini_trust_dialog_is_answered_by_its_trust_folder_option() -> None:
    lines = clean_lines(screen("gemini-trust.txt"))
    (trust,) = GEMINI.dialogs
    assert trust.detect.search("\n".join(lines))
    assert menu_keys(lines, trust.choose) == ["Enter"]  # ● already on "1. Trust folder"
    assert classify(lines, GEMINI.markers).status is not AgentStatus.IDLE


def test_gemini_is_started_with_the_task_and_session_trust(tmp_path: Path) -> None:
    plan = GEMINI.plan("gemini", prompt="do it", session_dir=tmp_path, hook_cmd="hook")
    assert plan.argv == ["gemini", "--skip-trust", "--prompt-interactive", "do it"]
    assert plan.paste_prompt is None
    assert "GOOGLE_GEMINI_BASE_URL" in plan.env_allow and "GEMINI_API_KEY" in plan.env_allow
