"""The board at 80×24 and the board's words: the intent keeps 30 cells, state
and needs-you stay, `?` and `q` stay in the footer; the counts add up; a
failed row says why; needs-you toasts gather and skip the open session."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets._footer import FooterKey

from corral.supervisor.models import CoderSession, SessionSummary
from corral.supervisor.session.summaries import stored_summary
from corral.supervisor.states import CoderState, NeedsYou, needs_you_label
from corral.tui import rows as R
from corral.tui.app import CorralApp

from .conftest import FIXED_NOW, board_ready, final_frame, seed_board, until

LONG = "Foxtrot makes the word-count report print JSON when --json is given"


def _app(sup, repo: Path) -> CorralApp:  # type: ignore[no-untyped-def]
    async def seed(s):  # type: ignore[no-untyped-def]
        await seed_board(s, repo)
        await s.start(LONG, repo)  # waits at gate 1 with an intent longer than the room

    return CorralApp(sup, default_repo=repo, clock=lambda: FIXED_NOW, on_ready=seed)


def row(sid: str, state: CoderState, **update: object) -> SessionSummary:
    base = stored_summary(CoderSession(id=sid, repo="/r", intent=f"do {sid}", state=state))
    return base.model_copy(update={"live": True, **update})


@pytest.mark.slow
async def test_at_80_columns_the_board_keeps_intent_state_needs_and_help(board_world) -> None:
    sup, repo, _release = board_world()
    app = _app(sup, repo)
    async with app.run_test(size=(80, 24)) as pilot:
        board = await board_ready(app, pilot)
        table = board.table
        keys = table.column_keys
        shown = [k for i, k in enumerate(keys) if i not in table.hidden]
        assert {"state", "needs", "intent"} <= set(shown), shown
        assert table._widths[keys.index("intent")] >= 30
        footer = {k.action: k for k in app.screen.query(FooterKey)}
        for action in ("app.help", "app.quit"):
            assert action in footer, sorted(footer)
            assert footer[action].region.right <= 80, (action, footer[action].region)
        # a wide terminal shows every column again
        await pilot.resize_terminal(200, 40)
        await until(pilot, "every column back", lambda: not table.hidden)


@pytest.mark.slow
def test_board_snapshot_at_80_by_24(snap_compare, board_world) -> None:
    sup, repo, _release = board_world()
    app = _app(sup, repo)

    async def ready(pilot) -> None:  # type: ignore[no-untyped-def]
        await board_ready(app, pilot)
        app.clear_notifications()
        await final_frame(pilot, "the toasts to go", lambda: not app.screen.query("Toast"))

    assert snap_compare(app, terminal_size=(80, 24), run_before=ready)


def test_the_counts_add_up_to_the_total() -> None:
    rows = [
        row("a", CoderState.CONTRACT_PROPOSED, needs_you=NeedsYou.CONTRACT),
        row("b", CoderState.NEEDS_APPROVAL, needs_you=NeedsYou.MERGE),
        row("c", CoderState.RUNNING),
        row("d", CoderState.MERGED),
        row("e", CoderState.FAILED, error="check hello failed"),
    ]
    assert R.counts_line(rows) == (
        "5 sessions:  2 need you  ·  1 in progress  ·  2 finished (1 failed)"
    )
    assert R.counts_line(rows[:1]) == "1 session:  1 need you  ·  0 in progress  ·  0 finished"


def test_a_failed_row_says_why_in_one_line() -> None:
    failed = row("e", CoderState.FAILED, error="contract not satisfied: failing hello\nmore")
    assert R.needs_text(failed).plain == "contract not satisfied: failing hello"


def test_needs_you_announcements_gather_into_one_toast() -> None:
    label = needs_you_label(NeedsYou.CONTRACT)
    rows = [
        row(
            f"s{i}",
            CoderState.CONTRACT_PROPOSED,
            needs_you=NeedsYou.CONTRACT,
            needs_you_label=label,
        )
        for i in range(5)
    ]
    assert R.announcement([]) is None
    title, body = R.announcement(rows[:1]) or ("", "")
    assert title == f"{rows[0].label}: contract awaiting confirmation" and body == "do s0"
    title, body = R.announcement(rows) or ("", "")
    assert title == "5 sessions need you"
    assert body.splitlines()[-1] == "and 2 more" and len(body.splitlines()) == 4


async def test_no_toast_for_the_session_on_screen_and_one_for_a_burst(board_world) -> None:
    from corral.tui.screens.session import SessionScreen

    sup, repo, _release = board_world()
    app = CorralApp(sup, default_repo=repo, clock=lambda: FIXED_NOW)
    async with app.run_test(size=(140, 30)) as pilot:
        board = await board_ready(app, pilot)
        ids = [(await sup.start(f"Echo {n}", repo)).session_id for n in ("one", "two", "three")]
        await until(pilot, "the three on the board", lambda: set(ids) <= set(board.summaries))
        await until(pilot, "the toasts", lambda: board._announce_timer is None)
        app.clear_notifications()
        app.push_screen(SessionScreen(ids[0]))  # the operator looks at the first
        await until(pilot, "its screen", lambda: getattr(app.screen, "session_id", None) == ids[0])
        for sid in ids:  # all three start needing the operator again, together
            board._announce(board.summaries[sid])
        await until(pilot, "the gathered toast", lambda: board._announce_timer is None)
        await pilot.pause()
        toasts = list(app._notifications)
        assert len(toasts) == 1, [(n.title, n.message) for n in toasts]
        assert toasts[0].title == "2 sessions need you"
        assert board.summaries[ids[0]].label not in toasts[0].message
