"""What sessions used, on the board: no Cost column while nothing was
recorded (the board as before), a session over its budget warns in its row
at 80×24 (its needs-you cell, or a mark before its intent when it needs
you, and the header's total), the Cost column shows
when there is room; a price that is not known is never a number."""

from __future__ import annotations

import pytest

from corral.supervisor.models import CoderSession, ModelUse, SessionSummary, TokenUse
from corral.supervisor.session.registry import SessionRegistry
from corral.supervisor.session.summaries import stored_summary
from corral.supervisor.states import CoderState
from corral.tui import rows as R
from corral.tui.app import CorralApp

from .conftest import FIXED_NOW, board_ready, seed_board, until


def _lines(board) -> list[str]:  # type: ignore[no-untyped-def]
    table = board.table
    return [table.render_line(y).text for y in range(min(table.size.height, 12))]


def _overspend(session: CoderSession) -> None:
    session.agent_usage = {"claude-sonnet-4-5": TokenUse(input=400_000, output=300_000)}
    session.agent_cost_usd = 5.70
    session.over_budget = "over budget: $5.70 of $5.00"


@pytest.mark.slow
async def test_an_over_budget_row_warns_at_80_by_24_and_shows_its_cost_when_wide(
    board_world,
) -> None:  # type: ignore[no-untyped-def]
    registries: list[SessionRegistry] = []
    sup, repo, _release = board_world(budget={"per_session_usd": 5.0}, registries=registries)
    [registry] = registries  # what the agents' usage records would set
    ids: dict[str, str] = {}

    async def seed(s):  # type: ignore[no-untyped-def]
        ids.update(await seed_board(s, repo))

    app = CorralApp(sup, default_repo=repo, clock=lambda: FIXED_NOW, on_ready=seed)
    async with app.run_test(size=(80, 24)) as pilot:
        board = await board_ready(app, pilot)
        cost = board.table.column_keys.index("cost")
        header = board.table.render_line(0).text
        assert " $ " not in header, "an empty Cost column took room"
        assert "spent" not in str(board.query_one("#counts").render())

        # the running session (it needs nothing of you) goes over its budget
        registry.amend(ids["Bravo"], _overspend)
        await until(pilot, "the warning in its row", lambda: any(
            # the needs-you cell is cut at 80 columns, with an ellipsis
            "Bravo" in line and "⚠ over budget: $5.70…" in line[:80]
            for line in _lines(board)
        ))  # fmt: skip
        counts = str(board.query_one("#counts").render())
        assert "$5.70 spent · 1 over budget" in counts
        assert all(len(line.rstrip()) <= 80 for line in _lines(board))

        # a row that needs you says so first; its intent carries the mark
        registry.amend(ids["Alpha"], _overspend)
        await until(pilot, "the mark on the row that needs you", lambda: any(
            "diff ready for appro" in line and "⚠ Alpha adds a file" in line
            for line in _lines(board)
        ))  # fmt: skip
        assert "$11.40 spent · 2 over budget" in str(board.query_one("#counts").render())

        await pilot.resize_terminal(200, 40)
        await until(pilot, "the Cost column", lambda: cost not in board.table.hidden and any(
            "⚠$5.70" in line for line in _lines(board)
        ))  # fmt: skip


def _row(**update: object) -> SessionSummary:
    base = stored_summary(CoderSession(id="s1", repo="/r", intent="x", state=CoderState.RUNNING))
    return base.model_copy(update=update)


def test_the_cost_cell_never_makes_up_a_price() -> None:
    assert R.cost_text(_row()).plain == ""
    # tokens with no known price: tokens, not dollars
    unpriced = _row(tokens_in=40_000, tokens_out=2_000, tokens_cache_read=3_100, price_unknown=True)
    assert R.cost_text(unpriced).plain == "45.1k tok"
    # some priced, some not: the known part, marked as a part
    part = _row(tokens_in=10, tokens_out=1, cost_usd=1.5, price_unknown=True)
    assert R.cost_text(part).plain == "$1.50+?"
    assert R.spend_line([part, unpriced]) == "$1.50+? spent"


def test_the_rows_totals_come_from_the_agents_records_and_corrals_models() -> None:
    session = CoderSession(id="s1", repo="/r", intent="x", state=CoderState.RUNNING)
    session.agent_usage = {"m": TokenUse(input=100, output=20, cache_write=5, cache_read=7)}
    session.agent_cost_usd = 0.25
    session.model_use = {"drafter": ModelUse(tokens_in=50, tokens_out=10, cost_usd=0.05)}
    session.cost_usd = 0.05
    row = stored_summary(session)
    assert (row.tokens_in, row.tokens_out, row.tokens_cache_write, row.tokens_cache_read) == (
        150,
        30,
        5,
        7,
    )
    assert row.cost_usd == 0.30 and not row.price_unknown


def test_the_session_screen_names_each_models_tokens_and_an_unknown_price() -> None:
    session = CoderSession(id="s1", repo="/r", intent="x", state=CoderState.RUNNING)
    assert R.agent_usage_line(session) == ""
    session.agent_usage = {
        "claude-sonnet-4-5": TokenUse(input=1200, output=340, cache_write=5000),
        "gpt-fake": TokenUse(input=10, output=5),
    }
    session.unpriced_models = ["gpt-fake"]
    session.agent_cost_usd = 0.0279
    assert R.agent_usage_line(session) == (
        "agent's records: claude-sonnet-4-5 1.2k in / 340 out / cache 5.0k written, 0 read; "
        "gpt-fake 10 in / 5 out (price unknown) — $0.03"
    )
