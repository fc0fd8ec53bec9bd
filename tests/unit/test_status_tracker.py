"""The status tracker's edge cases at scale and for agents without hooks:
missed busy frames, stale screens from before a prompt, out-of-order
captures, questions that must hold, and the quiet rule. Time is injected."""

from __future__ import annotations

from pathlib import Path

import pytest

from corral.supervisor.agents.profiles import CLAUDE, DEMO, profile_for
from corral.supervisor.status import (
    AgentStatus,
    StatusTracker,
    looks_like_prompt,
    read_screen,
)

BUSY = ["output line", "✻ Working… (esc to interrupt)", "> "]
BETWEEN = ["output line", "more output", "…"]  # a frame drawn without the marker
IDLE = ["Done.", ">"]
QUESTION = ["Do you want to make this edit to a.py?", "❯ 1. Yes", "  2. No"]


def tracker(**kw: float) -> StatusTracker:
    return StatusTracker(markers=DEMO.markers, **kw)


def test_busy_frames_between_marker_less_frames_still_read_running() -> None:
    """When the sweep catches only some busy frames, each of them counts."""
    t = tracker()
    t.on_screen(IDLE, now=0.0)
    t.on_screen(IDLE, now=1.0)
    assert t.current.status is AgentStatus.IDLE
    for i, screen in enumerate([BETWEEN, BUSY, BETWEEN, BUSY]):
        t.on_screen([*screen[:-1], f"tick {i}", screen[-1]], now=2.0 + i)
    assert t.current.status is AgentStatus.RUNNING


def test_idle_needs_the_same_screen_in_captures_the_debounce_apart() -> None:
    t = tracker(idle_debounce=0.5)
    t.on_screen(BUSY, now=0.0)
    assert t.on_screen(IDLE, now=0.6) is False  # first sight of the prompt
    assert t.on_screen(["Done!", ">"], now=1.0) is False  # it changed: starts over
    assert t.on_screen(["Done!", ">"], now=1.4) is False
    assert t.on_screen(["Done!", ">"], now=1.5) is True
    assert t.current.status is AgentStatus.IDLE


def test_a_screen_captured_before_the_prompt_landed_cannot_end_the_turn() -> None:
    """The measured failure: an agent at its prompt gets a task; the sweep is
    behind, and its capture from before the paste comes back after it."""
    t = tracker()
    stale = read_screen(IDLE, DEMO.markers, at=0.0)
    t.on_facts(stale, now=0.0)
    t.on_facts(stale, now=1.0)
    assert t.current.status is AgentStatus.IDLE
    assert t.on_prompt(now=5.0) is True
    assert t.current.status is AgentStatus.RUNNING
    assert t.prompted_turn_ended(since=4.9) is False
    late = read_screen(IDLE, DEMO.markers, at=4.8)  # captured before the paste
    assert t.on_facts(late, now=9.0) is False
    assert t.on_facts(stale, now=30.0) is False  # a re-check of the old screen
    assert t.current.status is AgentStatus.RUNNING
    # the same prompt seen after the paste still has to stay put for the debounce
    assert t.on_facts(read_screen(IDLE, DEMO.markers, at=5.2)) is False
    assert t.on_facts(read_screen(IDLE, DEMO.markers, at=5.8)) is True
    assert t.prompted_turn_ended(since=4.9) is True
    assert t.prompted_turn_ended(since=5.5) is False  # that turn began earlier


def test_captures_are_folded_in_order() -> None:
    t = tracker()
    t.on_facts(read_screen(BUSY, DEMO.markers, at=2.0))
    assert t.on_facts(read_screen(IDLE, DEMO.markers, at=1.0), now=1.0) is False
    assert t.current.status is AgentStatus.RUNNING


def test_a_question_must_hold_and_one_odd_frame_does_not_reset_it() -> None:
    t = tracker(hold=0.5)
    t.on_screen(BUSY, now=0.0)
    assert t.on_screen(QUESTION, now=1.0) is False
    assert t.on_screen(["redrawing"], now=1.2) is False  # unknown: the candidate stays
    assert t.on_screen(QUESTION, now=1.6) is True
    assert t.current.status is AgentStatus.WAITING
    assert t.current.question is not None and t.current.question.options == ("Yes", "No")


def test_a_hook_question_is_not_overridden_by_a_fresh_idle_screen() -> None:
    t = StatusTracker(markers=CLAUDE.markers, idle_debounce=0.5)
    t.on_hook({"hook_event_name": "PermissionRequest", "tool_name": "Bash"}, now=0.0)
    assert t.on_screen(["● Done", ">"], now=0.1) is False
    assert t.current.status is AgentStatus.WAITING
    assert t.on_screen(["● Done", ">"], now=0.7) is True  # the question is gone for good


# --- the quiet rule (agents without hooks) ---------------------------------------------


def test_prompt_like_lines() -> None:
    for line in ("$ ", "user@box:~/repo$", "task> ", "agent ❯", "Enter the task:", "(y) ?"):
        assert looks_like_prompt(line), line
    for line in ("compiling foo.c", "", "x" * 70 + ">", "42"):
        assert not looks_like_prompt(line), line
    assert not looks_like_prompt("Running tests:", cursor_after=False)  # cursor below: output


def test_a_quiet_prompt_reads_idle_after_quiet_secs_only_without_hooks() -> None:
    screen = ["working on it", "step 3 of 3", "ready$ "]
    t = StatusTracker(markers=DEMO.markers, quiet_secs=3.0)
    t.on_prompt(now=0.0)
    assert t.on_facts(read_screen(screen, DEMO.markers, at=0.5, cursor_after=True)) is False
    assert t.on_facts(read_screen(screen, DEMO.markers, at=3.0, cursor_after=True)) is False
    assert t.on_facts(read_screen(screen, DEMO.markers, at=3.6, cursor_after=True)) is True
    assert t.current.status is AgentStatus.IDLE and "quiet" in t.current.reason
    assert t.prompted_turn_ended(since=0.0)
    hooked = StatusTracker(markers=DEMO.markers, quiet_secs=None)
    hooked.on_prompt(now=0.0)
    for at in (0.5, 5.0, 60.0):
        hooked.on_facts(read_screen(screen, DEMO.markers, at=at, cursor_after=True))
    assert hooked.current.status is AgentStatus.RUNNING  # hooks say when its turn ends


def test_output_that_ends_in_a_colon_is_not_a_prompt_when_the_cursor_is_below() -> None:
    screen = ["collecting", "Running tests:"]
    t = StatusTracker(markers=DEMO.markers, quiet_secs=1.0)
    t.on_prompt(now=0.0)
    for at in (0.5, 2.0, 10.0):
        t.on_facts(read_screen(screen, DEMO.markers, at=at, cursor_after=False))
    assert t.current.status is AgentStatus.RUNNING


def test_a_busy_marker_beats_a_quiet_prompt() -> None:
    screen = ["✻ Thinking… (esc to interrupt)", "ready$ "]
    t = StatusTracker(markers=DEMO.markers, quiet_secs=1.0)
    for at in (0.0, 2.0, 10.0):
        t.on_facts(read_screen(screen, DEMO.markers, at=at, cursor_after=True))
    assert t.current.status is AgentStatus.RUNNING


def test_agents_without_hooks_use_the_configured_quiet_time() -> None:
    from corral.supervisor.agents.settings import AgentSettings, with_settings
    from corral.supervisor.panes.manager import tracker_for

    custom = profile_for("custom:my-agent")
    assert tracker_for(custom).quiet_secs == 3.0
    assert tracker_for(CLAUDE).quiet_secs is None  # hooks end its turns
    tuned = with_settings(custom, {"custom": AgentSettings(idle_quiet_secs=1.5)}, quiet_secs=4)
    assert tracker_for(tuned).quiet_secs == 1.5
    assert with_settings(custom, {}, quiet_secs=4).quiet_secs == 4


def test_every_agent_pane_is_told_how_to_report_its_own_turns(tmp_path: Path) -> None:
    for name in ("claude", "codex", "gemini", "aider", "opencode", "demo", "custom:my-agent"):
        plan = profile_for(name).plan(
            "/bin/agent", prompt="do it", session_dir=tmp_path, hook_cmd="HOOK --file f"
        )
        assert plan.env_extra.get("CORRAL_HOOK_CMD") == "HOOK --file f", name


def test_a_busy_frame_left_on_screen_after_a_stop_hook_does_not_restart_the_turn() -> None:
    t = StatusTracker(markers=CLAUDE.markers)
    t.on_screen(BUSY, now=0.0)
    assert t.on_hook({"hook_event_name": "Stop"}, now=1.0)
    assert t.on_facts(read_screen(BUSY, CLAUDE.markers, at=0.9)) is False  # from before the hook
    assert t.on_facts(read_screen(BUSY, CLAUDE.markers, at=1.1)) is False  # a lagging frame
    assert t.current.status is AgentStatus.IDLE and t.turn_ends == 1
    # a busy screen that stays is believed
    assert t.on_facts(read_screen([*BUSY, "more"], CLAUDE.markers, at=1.7)) is True
    assert t.current.status is AgentStatus.RUNNING


def test_the_quiet_time_is_read_from_config_toml(tmp_path: Path) -> None:
    from corral.supervisor.agents.settings import load_agent_settings
    from corral.supervisor.config import load_config
    from corral.supervisor.errors import ConfigError

    path = tmp_path / "config.toml"
    path.write_text("[supervisor]\nidle_quiet_secs = 4\n\n[agents.custom]\nidle_quiet_secs = 1.5\n")
    assert load_config(path).idle_quiet_secs == 4
    assert load_agent_settings(path)["custom"].idle_quiet_secs == 1.5
    assert load_config(tmp_path / "none.toml").idle_quiet_secs == 3.0  # the default: ≤ 5 s
    path.write_text("[agents.aider]\nidle_quiet_secs = 0\n")
    with pytest.raises(ConfigError, match="idle_quiet_secs"):
        load_agent_settings(path)


def test_a_busy_frame_from_before_a_stop_hook_rechecked_by_later_sweeps_stays_old() -> None:
    """A frame left on screen when the turn ended is re-checked by every later
    sweep (no output since); it still says nothing about after the hook, or
    the turn would restart and never end while the frame stays."""
    t = StatusTracker(markers=CLAUDE.markers)
    frame = read_screen(BUSY, CLAUDE.markers, at=0.0)
    t.on_facts(frame)
    assert t.on_hook({"hook_event_name": "Stop"}, now=1.0)
    for now in (1.5, 2.0, 2.5, 3.0):
        assert t.on_facts(frame, now) is False
    assert t.current.status is AgentStatus.IDLE and t.turn_ends == 1


def test_a_session_start_hook_read_late_does_not_end_the_turn() -> None:
    """Seen under load: Claude Code started with its prompt showed its busy
    marker before corral read its SessionStart hook; taking that hook as
    idle ended the turn at once, and the runtime verified an agent that had
    not begun. Claude Code also sends SessionStart after compacting mid-turn."""
    t = StatusTracker(markers=CLAUDE.markers)
    t.on_screen(["✢ Slithering… (esc to interrupt)"], now=1.0)
    assert t.current.status is AgentStatus.RUNNING
    ends = t.turn_ends
    assert t.on_hook({"hook_event_name": "SessionStart", "source": "resume"}, now=1.2) is False
    assert t.on_hook({"hook_event_name": "SessionStart", "source": "compact"}, now=2.0) is False
    assert t.current.status is AgentStatus.RUNNING and t.turn_ends == ends
    # its own turn's end still counts
    assert t.on_hook({"hook_event_name": "Stop"}, now=3.0) is True
    assert t.current.status is AgentStatus.IDLE and t.turn_ends == ends + 1


def test_a_session_start_hook_still_says_a_fresh_agent_is_up() -> None:
    t = StatusTracker(markers=CLAUDE.markers)
    assert t.on_hook({"hook_event_name": "SessionStart", "source": "startup"}, now=0.5) is True
    assert t.current.status is AgentStatus.IDLE


# --- a provider's rate limit or quota, said by the agent -----------------------

CLAUDE_429 = ["> Write hello.txt", "● API Error: Request rejected (429) · rate limited", "❯ "]
CODEX_429 = [
    "› Write hello.txt",
    "■ exceeded retry limit, last status: 429 Too Many Requests",
    "› ",
]
AIDER_429 = ["litellm.RateLimitError: RateLimitError: OpenAIException - quota", "> "]
WRITING_A_LIMITER = [
    "● Added a rate limiter: 429 responses now carry Retry-After.",
    "  Quota checks run per API key; see docs/rate-limits.md",
    "❯ ",
]


@pytest.mark.parametrize(
    ("agent", "screen"), [("claude", CLAUDE_429), ("codex", CODEX_429), ("aider", AIDER_429)]
)
def test_a_rate_limit_on_screen_is_counted_once_until_the_next_turn(
    agent: str, screen: list[str]
) -> None:
    t = StatusTracker(markers=profile_for(agent).markers)
    t.on_screen(BUSY, now=0.0)
    for n in range(5):  # the error line stays on screen, captured again and again
        t.on_screen(screen, now=1.0 + n)
    assert t.limits == 1 and t.limit is not None and t.limit in "\n".join(screen)
    t.on_screen(BUSY, now=10.0)  # the next turn
    t.on_screen(screen, now=11.0)
    assert t.limits == 2


def test_work_on_a_rate_limiter_is_not_a_rate_limit() -> None:
    t = StatusTracker(markers=CLAUDE.markers)
    t.on_screen(BUSY, now=0.0)
    t.on_screen(WRITING_A_LIMITER, now=1.0)
    t.on_screen(WRITING_A_LIMITER, now=2.0)
    assert t.limits == 0


def test_a_stop_failure_rate_limit_hook_and_its_screen_line_are_one_refusal() -> None:
    t = StatusTracker(markers=CLAUDE.markers)
    t.on_screen(BUSY, now=0.0)
    said = "API Error: Request rejected (429) · rate limited"
    hook = {"hook_event_name": "StopFailure", "error": "rate_limit", "last_assistant_message": said}
    t.on_hook(hook, now=1.0)
    assert t.current.status is AgentStatus.IDLE and (t.limits, t.limit) == (1, said)
    t.on_screen(CLAUDE_429, now=1.5)
    t.on_screen(CLAUDE_429, now=2.5)
    assert t.limits == 1
    other = {"hook_event_name": "StopFailure", "error": "server_error"}
    fresh = StatusTracker(markers=CLAUDE.markers)
    fresh.on_hook(other, now=0.0)
    assert fresh.limits == 0
