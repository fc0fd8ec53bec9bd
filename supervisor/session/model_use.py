"""A session's side of the model chain: hops become `model_fallback` events
(every one journaled, only a rejected key shown), a pinned model's rejected
key becomes "sign-in needed" while the request waits, and the chain's ledger
becomes the session's record of which models served and what they cost."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from ..events import AuthRequiredData, EventData, ModelFallbackData
from ..llm.chain import Hop, Ledger
from ..models import CoderSession, ModelUse

# How long a pinned model with a rejected key waits before its request is tried
# again (the key is read afresh each time).
AUTH_RETRY_SECS = 30.0


def hop_event(hop: Hop) -> ModelFallbackData:
    return ModelFallbackData(
        from_=hop.from_,
        to=hop.to,
        reason=hop.reason,
        detail=hop.detail[:300],
        notice=hop.needs_operator,
    )


def auth_waiter(
    emit: Callable[[EventData], None], retry_secs: float | None = None
) -> Callable[[str, str], Awaitable[None]]:
    """Show "sign-in needed" for a pinned model and wait before the retry."""

    async def wait(name: str, message: str) -> None:
        secs = AUTH_RETRY_SECS if retry_secs is None else retry_secs
        emit(
            AuthRequiredData(
                message=(
                    f"{message} — model {name} is pinned for this session, so it waits instead "
                    f"of using another model; corral tries again every {secs:g} s (or cancel, or "
                    "start again with another model)"
                ),
                wait_secs=int(secs),
            )
        )
        await asyncio.sleep(secs)

    return wait


def record_use(session: CoderSession, ledger: Ledger, *, add_cost: bool) -> None:
    """Fold what the ledger saw into the session. `add_cost`: the ledger's cost
    is not counted elsewhere (drafting; the engine reports its own)."""
    for name, spend in ledger.spend.items():
        row = session.model_use.setdefault(name, ModelUse())
        row.tokens_in += spend.tokens_in
        row.tokens_out += spend.tokens_out
        if spend.cost_usd is not None:
            row.cost_usd = (row.cost_usd or 0.0) + spend.cost_usd
            if add_cost:
                session.cost_usd = (session.cost_usd or 0.0) + spend.cost_usd
        if session.model is None:
            session.model = name
    ledger.spend.clear()
