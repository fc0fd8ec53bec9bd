"""The Gemini CLI and Aider profiles against their real screens, captured
with `tmux capture-pane -p` from the pinned versions driven against the fake
model server (tests/unit/data/screens; docs/agent-clis.md quotes them). A CLI
update that changes these screens shows up here first."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from corral.supervisor.agents.profiles import AIDER, GEMINI
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


@pytest.mark.parametrize(
    "footer",
    [
        " ~/src/app                     all tools                      gemini-2.5-pro",
        " ~/src/app · untrusted · Auto",
        " >   Type your message or @path/to/file",
    ],
)
def test_gemini_idle_footer_in_other_sandbox_modes_and_layouts(footer: str) -> None:
    lines = [*screen("gemini-idle_after.txt")[:-1], footer]
    assert classify(lines, GEMINI.markers).status is AgentStatus.IDLE


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
    sid = plan.agent_session
    assert sid is not None and len(sid) == 36  # a UUID corral chose: it resumes by it
    assert plan.argv == [
        "gemini", "--skip-trust", "--session-id", sid, "--prompt-interactive", "do it"
    ]  # fmt: skip
    assert plan.paste_prompt is None
    assert plan.transcript is not None and plan.transcript.endswith(
        f"chats/session-*-{sid[:8]}.json*"
    )
    again = GEMINI.with_resume(plan, sid)
    assert again is not None and again.agent_session == sid
    assert again.argv == [
        "gemini",
        "--resume",
        sid,
        "--skip-trust",
        "--prompt-interactive",
        "do it",
    ]
    assert GEMINI.resumable
    assert "GOOGLE_GEMINI_BASE_URL" in plan.env_allow and "GEMINI_API_KEY" in plan.env_allow


# --------------------------------------------------------------------------- Aider


def test_aider_resumes_its_sessions_own_chat_history(tmp_path: Path) -> None:
    plan = AIDER.plan("aider", prompt="do it", session_dir=tmp_path, hook_cmd="hook")
    history = str(tmp_path / "aider.chat.history.md")
    assert plan.agent_session == plan.transcript == history
    assert "--restore-chat-history" not in plan.argv
    again = AIDER.with_resume(plan, history)
    assert again is not None and again.argv[-1] == "--restore-chat-history"
    assert again.paste_prompt == "do it" and AIDER.resumable


def test_aider_waiting_for_the_model_is_running() -> None:
    reading = classify(screen("aider-busy.txt"), AIDER.markers)
    assert reading.status is AgentStatus.RUNNING
    for frame in (
        "░█        Waiting for openai/gpt",
        "        █░ Waiting for x",
        "  =#   Waiting for x",
    ):
        assert classify([frame], AIDER.markers).status is AgentStatus.RUNNING


@pytest.mark.parametrize(
    "name", ["aider-start.txt", "aider-idle_after.txt", "aider-interrupted.txt"]
)
def test_aider_at_its_prompt_is_idle(name: str) -> None:
    # the `Tokens: … sent` report and an answered `[Yes]: y` stay on screen
    assert classify(screen(name), AIDER.markers).status is AgentStatus.IDLE


def test_aider_prompt_in_other_modes_is_idle() -> None:
    for prompt in ("ask>", "architect>", "multi>"):
        assert classify(["Aider v0.86.2", prompt], AIDER.markers).status is AgentStatus.IDLE


def test_aider_create_file_confirmation_is_a_question_answered_in_words() -> None:
    """`(Y)es/(N)o` takes a typed answer: no numbered options to pick."""
    reading = classify(screen("aider-create.txt"), AIDER.markers)
    assert reading.status is AgentStatus.WAITING
    assert reading.question is not None
    assert reading.question.prompt == "Create new file? (Y)es/(N)o [Yes]:"
    assert reading.question.options == ()


def test_aider_is_given_the_task_by_paste_and_keeps_the_worktree_clean(tmp_path: Path) -> None:
    plan = AIDER.plan("aider", prompt="do it", session_dir=tmp_path / "s", hook_cmd="hook")
    assert plan.paste_prompt == "do it" and "do it" not in plan.argv
    for flag in ("--no-auto-commits", "--no-dirty-commits", "--no-gitignore"):
        assert flag in plan.argv
    history = plan.argv[plan.argv.index("--chat-history-file") + 1]
    assert Path(history).parent == tmp_path / "s"
    assert "OPENAI_API_BASE" in plan.env_allow
