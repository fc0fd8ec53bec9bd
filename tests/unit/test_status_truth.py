"""Status readings that once said what was not happening: an unnumbered menu
read as a free-text question, a signed-out agent read as idle (and repaired),
a trust dialog shown as the question a permission hook asked about."""

from __future__ import annotations

from corral.supervisor.agents.profiles import CLAUDE, CODEX
from corral.supervisor.panes.manager import tracker_for
from corral.supervisor.status import (
    AgentStatus,
    Question,
    classify,
    clean_lines,
    find_menu,
    from_hook,
)

# as Claude Code 2.1.332 draws them (tmux capture-pane -p)
API_KEY = """
────────────────────────────────────────────────────────────────────
  Detected a custom API key in your environment
  ANTHROPIC_API_KEY: sk-ant-...-fake-key-0000000000
  Do you want to use this API key?
    Yes
  ❯ No (recommended)
  Enter to confirm · Esc to cancel
""".splitlines()

TRUST = """
────────────────────────────────────────────────────────────────────
 Accessing workspace:
 /tmp/exp1/repo
 Quick safety check: Is this a project you created or one you trust? (Like your own code, a well-known open source
 project, or work from your team). If not, take a moment to review what's in this folder first.
 Claude Code'll be able to read, edit, and execute files here.
 Security guide
 ❯ No, exit
   Yes, I trust this folder
 Enter to confirm · Esc to cancel
""".splitlines()

# the numbered form of the same dialog (earlier releases draw it this way)
TRUST_NUMBERED = """
 Do you trust the files in this folder?
 Claude Code'll be able to read, edit, and execute files here.
 ❯ 1. Yes, proceed
   2. No, exit
 Enter to confirm · Esc to exit
""".splitlines()

PERMISSION = """
● Write(hello.txt)
────────────────────────────────────────────────────────────────────
 Create file
 hello.txt
  1 hi
 Do you want to create hello.txt?
 ❯ 1. Yes
   2. Yes, and switch to accept edits (auto-approve file edits) for this session (shift+tab)
   3. No
 Esc to cancel · Tab to amend
""".splitlines()

SIGNED_OUT = """
❯ say hi
  ⎿  Not logged in · Please run /login
     ANTHROPIC_API_KEY not used here · turn on "Use custom API key" in /config
                                                                       ◐ medium · /effort
────────────────────────────────────────────────────────────────────
❯ Once fixed, resend your message
────────────────────────────────────────────────────────────────────
  ⏵⏵ auto mode on (shift+tab to cycle) · ← for agents
""".splitlines()

RETRYING_401 = """
❯ Write hello.txt
✻ 401 fake 401 Unauthorized · retrying in 5s · attempt 4/10
────────────────────────────────────────────────────────────────────
❯
────────────────────────────────────────────────────────────────────
  ⏵⏵ auto mode on (shift+tab to cycle) · ← for agents
""".splitlines()


def test_the_api_key_dialog_is_a_question_with_its_two_options() -> None:
    reading = classify(API_KEY, CLAUDE.markers)
    assert reading.status is AgentStatus.WAITING
    assert reading.question == Question(
        "Do you want to use this API key?", ("Yes", "No (recommended)")
    )


def test_the_trust_dialog_is_not_offered_as_a_question() -> None:
    # it is answered by the profile (by its option's text), never asked
    assert find_menu(clean_lines(TRUST)) is None
    assert classify(TRUST, CLAUDE.markers).status is not AgentStatus.WAITING


def test_prose_under_a_question_is_not_read_as_options() -> None:
    lines = ["Shall we?", "I think so", "❯ ok", "Enter to confirm"]
    assert find_menu(lines) is None


def test_a_signed_out_agent_reads_auth_with_its_own_sentence() -> None:
    reading = classify(SIGNED_OUT, CLAUDE.markers)
    assert reading.status is AgentStatus.AUTH
    assert reading.reason == "Not logged in · Please run /login"


def test_an_agent_retrying_on_401_reads_auth_not_busy() -> None:
    assert classify(RETRYING_401, CLAUDE.markers).status is AgentStatus.AUTH


def test_an_old_sign_in_error_far_above_a_working_agent_is_not_auth() -> None:
    screen = ["  ⎿  Not logged in · Please run /login", *[f"● step {i}" for i in range(12)]]
    screen += ["✻ Cogitating… (3s · esc to interrupt)"]
    assert classify(screen, CLAUDE.markers).status is AgentStatus.RUNNING


def test_codex_rejected_key_reads_auth() -> None:
    screen = ["■ unexpected status 401 Unauthorized: Incorrect API key provided: sk-fake", "›"]
    assert classify(screen, CODEX.markers).status is AgentStatus.AUTH


def test_a_stop_failure_hook_for_rejected_credentials_reads_auth() -> None:
    reading = from_hook(
        {
            "hook_event_name": "StopFailure",
            "error": "authentication_failed",
            "last_assistant_message": "Invalid API key · Fix external API key",
        }
    )
    assert reading is not None and reading.status is AgentStatus.AUTH
    assert reading.reason == "Invalid API key · Fix external API key"
    other = from_hook({"hook_event_name": "StopFailure", "error": "server_error"})
    assert other is not None and other.status is AgentStatus.IDLE


def test_a_permission_hook_is_not_paired_with_the_trust_dialog_on_screen() -> None:
    assert classify(TRUST_NUMBERED, CLAUDE.markers).question is not None  # a menu on its own
    tracker = tracker_for(CLAUDE)
    tracker.on_screen(TRUST_NUMBERED, now=0.0)
    tracker.on_hook({"hook_event_name": "PermissionRequest", "tool_name": "Write"}, now=1.0)
    assert tracker.current.status is AgentStatus.WAITING
    assert tracker.current.question is None  # waits for the tool's own prompt
    tracker.on_screen(TRUST_NUMBERED, now=2.0)
    assert tracker.current.question is None
    tracker.on_screen(TRUST_NUMBERED, now=3.0)
    assert tracker.current.question is None
    tracker.on_screen(PERMISSION, now=4.0)
    assert tracker.current.question is not None
    assert tracker.current.question.prompt == "Do you want to create hello.txt?"
    assert tracker.current.question.options[0] == "Yes"


def test_a_permission_hook_takes_the_tools_prompt_already_on_screen() -> None:
    tracker = tracker_for(CLAUDE)
    tracker.on_screen(PERMISSION, now=0.0)
    tracker.on_hook({"hook_event_name": "PermissionRequest", "tool_name": "Write"}, now=0.1)
    assert tracker.current.question is not None
    assert tracker.current.question.prompt == "Do you want to create hello.txt?"


def test_a_question_captured_just_before_its_hook_is_still_paired_with_it() -> None:
    """The sweep captured the question, the hook arrived before that capture
    was folded, and the screen then stayed as it was: the cached capture is
    re-checked (later `now`) and must give the hook's wait its options."""
    from corral.supervisor.agents.profiles import DEMO
    from corral.supervisor.status import read_screen

    tracker = tracker_for(DEMO)
    screen = [
        "● Write(notes.md)",
        " Do you want to make this edit to notes.md?",
        " ❯ 1. Yes",
        "   2. No",
    ]
    facts = read_screen(screen, DEMO.markers, at=1.0)
    tracker.on_hook({"hook_event_name": "PermissionRequest", "tool_name": "Write"}, now=1.1)
    tracker.on_facts(facts)  # folded after the hook: older than it
    assert tracker.current.question is None
    tracker.on_facts(facts, now=1.6)  # the next sweep: no output since the capture
    assert tracker.current.question is not None
    assert tracker.current.question.options == ("Yes", "No")
