"""What the models agent CLIs commonly use cost, in USD per million tokens
(list prices), so a session's recorded tokens can be shown as money.

A model is priced only when its name is in the table: the name as the agent
recorded it, without a provider prefix (`anthropic/`) or a date suffix
(`-20250929`). Anything else is "price unknown" — never a guess from a
similar name. `[prices."<model>"]` in the config adds or replaces entries.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ..config import ModelPrice
from ..models import TokenUse


def _price(
    input: float, output: float, cache_write: float | None, cache_read: float | None
) -> ModelPrice:
    return ModelPrice(input=input, output=output, cache_write=cache_write, cache_read=cache_read)


_OPUS_4 = _price(15.0, 75.0, 18.75, 1.50)
_OPUS_45 = _price(5.0, 25.0, 6.25, 0.50)
_SONNET = _price(3.0, 15.0, 3.75, 0.30)
_GPT_5 = _price(1.25, 10.0, None, 0.125)
_GPT_5_MINI = _price(0.25, 2.0, None, 0.025)

LIST_PRICES: dict[str, ModelPrice] = {
    "claude-opus-4-5": _OPUS_45,
    "claude-opus-4-1": _OPUS_4,
    "claude-opus-4-0": _OPUS_4,
    "claude-opus-4": _OPUS_4,
    "claude-sonnet-4-5": _SONNET,
    "claude-sonnet-4-0": _SONNET,
    "claude-sonnet-4": _SONNET,
    "claude-3-7-sonnet": _SONNET,
    "claude-haiku-4-5": _price(1.0, 5.0, 1.25, 0.10),
    "claude-3-5-haiku": _price(0.80, 4.0, 1.0, 0.08),
    "gpt-5": _GPT_5,
    "gpt-5-codex": _GPT_5,
    "gpt-5.1": _GPT_5,
    "gpt-5.1-codex": _GPT_5,
    "gpt-5-mini": _GPT_5_MINI,
    "gpt-5.1-codex-mini": _GPT_5_MINI,
    "gpt-4.1": _price(2.0, 8.0, None, 0.50),
    "o3": _price(2.0, 8.0, None, 0.50),
    "o4-mini": _price(1.10, 4.40, None, 0.275),
    "gemini-2.5-pro": _price(1.25, 10.0, None, 0.125),
    "gemini-2.5-flash": _price(0.30, 2.50, None, 0.03),
}

_DATED = re.compile(r"-\d{8}$")


def price_of(model: str, overrides: Mapping[str, ModelPrice]) -> ModelPrice | None:
    """The model's price: an override, else the list price; None when unknown."""
    for name in (model, _DATED.sub("", model.rsplit("/", 1)[-1])):
        found = overrides.get(name) or LIST_PRICES.get(name)
        if found is not None:
            return found
    return None


def cost_of(use: TokenUse, price: ModelPrice) -> float:
    """USD for `use` at `price` (a cache price left out is the input price)."""
    write = price.input if price.cache_write is None else price.cache_write
    read = price.input if price.cache_read is None else price.cache_read
    return (
        use.input * price.input
        + use.output * price.output
        + use.cache_write * write
        + use.cache_read * read
    ) / 1_000_000


def priced(
    usage: Mapping[str, TokenUse], overrides: Mapping[str, ModelPrice]
) -> tuple[float | None, list[str]]:
    """(USD for the priced models, or None when none is; the models with
    tokens but no known price, sorted)."""
    total: float | None = None
    unknown: list[str] = []
    for model, use in usage.items():
        price = price_of(model, overrides)
        if price is None:
            if use.total:
                unknown.append(model)
            continue
        total = (total or 0.0) + cost_of(use, price)
    return total, sorted(unknown)
