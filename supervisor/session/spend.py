"""A session's tokens and cost in one sum: its agent's own records
(`agent_usage`, priced by the usage watch) plus what corral's models served
(drafting, the built-in engine: `model_use`, `cost_usd`); and whether the
`[budget]` is crossed. Pure: the board row and the watch both read it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..config import BudgetSettings
from ..llm.chain import ModelSpend
from ..models import CoderSession, TokenUse


@dataclass(frozen=True)
class Totals:
    """A session's tokens and cost: its agent's records plus corral's models."""

    tokens: TokenUse
    cost_usd: float | None
    price_unknown: bool
    recorded: bool  # anything was recorded at all


def totals(session: CoderSession, pending: Mapping[str, ModelSpend] | None = None) -> Totals:
    """The session's sums; `pending`: what corral's models served since it
    was last folded into the session (a built-in engine's run in progress)."""
    use = TokenUse()
    for recorded in session.agent_usage.values():
        use = use.plus(recorded)
    unknown = bool(session.unpriced_models)
    for row in session.model_use.values():
        use = use.plus(TokenUse(input=row.tokens_in, output=row.tokens_out))
        if row.cost_usd is None and (row.tokens_in or row.tokens_out):
            unknown = True
    parts = [c for c in (session.cost_usd, session.agent_cost_usd) if c is not None]
    for spend in (pending or {}).values():
        use = use.plus(TokenUse(input=spend.tokens_in, output=spend.tokens_out))
        if spend.cost_usd is not None:
            parts.append(spend.cost_usd)
        elif spend.tokens_in or spend.tokens_out:
            unknown = True
    return Totals(
        tokens=use,
        cost_usd=sum(parts) if parts else None,
        price_unknown=unknown,
        recorded=bool(use.total or parts),
    )


def budget_sentence(spent: Totals, budget: BudgetSettings) -> str | None:
    """What was crossed, said once (None while within the budget)."""
    if (
        budget.per_session_usd is not None
        and spent.cost_usd is not None
        and spent.cost_usd >= budget.per_session_usd
    ):
        return f"over budget: ${spent.cost_usd:.2f} of ${budget.per_session_usd:.2f}"
    if budget.per_session_tokens is not None and spent.tokens.total >= budget.per_session_tokens:
        return f"over budget: {spent.tokens.total:,} of {budget.per_session_tokens:,} tokens"
    return None
