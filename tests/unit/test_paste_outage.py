"""What a paste into a pane on a host that stopped answering became, read
from the pane once the host answers again: corral presses Enter, pastes
again, or says it cannot tell — never pastes twice."""

from __future__ import annotations

from corral.supervisor.panes.base import Screen
from corral.supervisor.panes.outage import After, judge

TEXT = "corral re-ran the contract\n\nFix the cause (not the checks), then stop."


def screen(*lines: str, cursor_y: int | None = None) -> Screen:
    rows = list(lines)
    y = len(rows) - 1 if cursor_y is None else cursor_y
    return Screen(lines=rows, ansi=rows, cursor_x=0, cursor_y=y, width=80, height=len(rows))


BEFORE = screen("agent v1", "done", "> ")


def test_an_unchanged_screen_means_nothing_arrived_so_it_is_sent_again() -> None:
    assert judge(TEXT, BEFORE, screen("agent v1", "done", "> ")) is After.RESEND


def test_the_text_on_the_input_line_means_only_enter_is_missing() -> None:
    after = screen(
        "agent v1",
        "done",
        "> corral re-ran the contract",
        "",
        "Fix the cause (not the checks), then stop.",
    )
    assert judge(TEXT, BEFORE, after) is After.PRESS_ENTER


def test_the_text_above_a_working_agent_means_it_was_sent() -> None:
    after = screen(
        "> corral re-ran the contract", "Fix the cause (not the checks), then stop.", "working", ""
    )
    assert judge(TEXT, BEFORE, after) is After.LANDED


def test_a_changed_screen_without_the_text_cannot_tell_and_is_not_pasted_again() -> None:
    after = screen("agent v1", "done", "something else happened", "> ")
    assert judge(TEXT, BEFORE, after) is After.UNKNOWN


def test_a_long_last_line_wrapped_at_the_needle_still_means_only_enter_is_missing() -> None:
    """The tail corral looks for can straddle a wrap of the input line: the
    text still sits on the input line, so Enter is pressed (it was judged
    'sent' and the agent waited forever with the repair on its input line)."""
    last = (
        "If the task cannot be done as specified, say so instead: run the hook, "
        "then stop. The operator then decides."
    )
    text = f"corral re-ran the contract\n\n{last}"
    for cut in range(len(last) - 30, len(last) - 1):
        rows = ["agent v1", "done", "> corral re-ran the contract", "", last[:cut], last[cut:]]
        after = Screen(
            lines=rows, ansi=rows, cursor_x=len(last) - cut, cursor_y=5, width=cut, height=6
        )
        assert judge(text, BEFORE, after) is After.PRESS_ENTER, cut
