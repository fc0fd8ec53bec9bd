"""Serving one request from the configured models: the fallback chain.

Unpinned, a request goes to the first model in the default order that is not
excluded; a timeout, a server failure (5xx, a broken connection, an
unreachable server, rate limiting after the provider's own retries) or a
rejected credential (401/403) sends it to the next one. Every hop is handed to
`on_hop` with its reason, so the session journals it, and the model hopped
away from is left out of the view's later requests (a session does not wait
out the same timeout on every turn). Exclusions are soft: when every model is
excluded, the order is used as it is.

Pinned (strict), the request only ever goes to the pinned model: nothing is
rotated. A rejected credential of a pinned remote model goes to `auth_wait`
(the session shows "sign-in needed" and waits), then the request is tried
again with the key read afresh; without `auth_wait` it is an error.

The chain records which models served and their token use (`ledger`), so a
session can say who wrote its work and what each model cost.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace

from .base import Message, ModelError, ModelProvider, ToolSpec, Turn, Usage
from .catalog import ModelCatalog, ModelEntry, provider_for

# ModelError kind -> the reason label a hop is journaled with
HOP_REASONS: dict[str, str] = {
    "timeout": "timed_out",
    "server": "server_error",
    "unavailable": "unreachable",
    "rate_limit": "rate_limited",
    "auth": "auth_rejected",
}
UNPARSEABLE = "unparseable_json"


@dataclass(frozen=True)
class Hop:
    """A request moved from one model to the next."""

    from_: str
    to: str
    reason: str  # a HOP_REASONS label, or UNPARSEABLE
    detail: str = ""

    @property
    def needs_operator(self) -> bool:
        """Only a rejected credential is the operator's to fix."""
        return self.reason == "auth_rejected"


@dataclass
class ModelSpend:
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float | None = None


@dataclass
class Ledger:
    """Which models served, in first-served order, and what each used."""

    spend: dict[str, ModelSpend] = field(default_factory=dict)
    # models that failed a request this session: its later requests, in every
    # component (drafting, the built-in engine, repairs), go to the others first
    skipped: set[str] = field(default_factory=set)

    def add(self, usage: Usage, name: str) -> None:
        row = self.spend.setdefault(name, ModelSpend())
        row.tokens_in += usage.input_tokens
        row.tokens_out += usage.output_tokens
        if usage.cost_usd is not None:
            row.cost_usd = (row.cost_usd or 0.0) + usage.cost_usd

    @property
    def served(self) -> list[str]:
        return list(self.spend)


AuthWait = Callable[[str, str], Awaitable[None]]  # (model name, message)
Factory = Callable[[ModelEntry], ModelProvider]


def _default_factory(entry: ModelEntry) -> ModelProvider:
    return provider_for(entry, os.environ)


class ModelChain:
    """A `ModelProvider` that serves each request from one of several models."""

    name = "models"

    def __init__(
        self,
        entries: Sequence[ModelEntry],
        *,
        pinned: bool = False,
        factory: Factory = _default_factory,
        on_hop: Callable[[Hop], None] | None = None,
        auth_wait: AuthWait | None = None,
        ledger: Ledger | None = None,
    ) -> None:
        if not entries:
            raise ValueError("a model chain needs at least one model")
        self.entries = tuple(entries)
        self.pinned = pinned
        self.factory = factory
        self.on_hop = on_hop
        self.auth_wait = auth_wait
        self.ledger = ledger if ledger is not None else Ledger()
        self.exclude: set[str] = set()
        self.last_served: str | None = None
        self._providers: dict[str, ModelProvider] = {}
        first = self.entries[0].name
        rest = ", ".join(self.names[1:])
        # what engine choices and drafter names call this chain
        self.model = first if not rest else f"{first} (then {rest})"

    @classmethod
    def from_catalog(cls, catalog: ModelCatalog, factory: Factory | None = None) -> ModelChain:
        return cls(catalog.entries, factory=factory or _default_factory)

    @property
    def strict(self) -> bool:
        """Requests must be served by the pinned model and no other."""
        return self.pinned

    @property
    def names(self) -> list[str]:
        return [e.name for e in self.entries]

    def get(self, name: str) -> ModelEntry | None:
        return next((e for e in self.entries if e.name == name), None)

    def view(
        self,
        *,
        pin: ModelEntry | None = None,
        on_hop: Callable[[Hop], None] | None = None,
        auth_wait: AuthWait | None = None,
        ledger: Ledger | None = None,
    ) -> ModelChain:
        """A chain for one session or discussion: its own exclusions, hooks
        and ledger over the same models (only `pin`, strictly, when given)."""
        chain = ModelChain(
            (pin,) if pin is not None else self.entries,
            pinned=pin is not None,
            factory=self.factory,
            on_hop=on_hop,
            auth_wait=auth_wait,
            ledger=ledger,
        )
        chain._providers = self._providers
        if ledger is not None:
            chain.exclude = ledger.skipped  # shared: the session skips what failed it
        return chain

    def _provider(self, entry: ModelEntry, *, fresh: bool = False) -> ModelProvider:
        if fresh or entry.name not in self._providers:
            self._providers[entry.name] = self.factory(entry)
        return self._providers[entry.name]

    def candidates(self) -> list[ModelEntry]:
        left = [e for e in self.entries if e.name not in self.exclude]
        return left or list(self.entries)

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] = (),
        *,
        max_tokens: int = 4096,
        temperature: float = 0.0,
        on_delta: Callable[[str], None] | None = None,
        timeout: float = 120.0,
    ) -> Turn:
        order = self.candidates()
        fresh = False
        i = 0
        while True:
            entry = order[i]
            try:
                turn = await self._provider(entry, fresh=fresh).complete(
                    messages,
                    tools,
                    max_tokens=max_tokens,
                    temperature=temperature,
                    on_delta=on_delta,
                    timeout=timeout,
                )
            except ModelError as exc:
                fresh = False
                if self.pinned:
                    if exc.kind == "auth" and entry.remote and self.auth_wait is not None:
                        await self.auth_wait(entry.name, str(exc))
                        fresh = True  # the key may have been fixed: read it again
                        continue
                    raise
                reason = HOP_REASONS.get(exc.kind)
                if reason is None or i + 1 >= len(order):
                    raise
                i += 1
                self.exclude.add(entry.name)  # this view's later requests skip it (softly)
                if self.on_hop is not None:
                    self.on_hop(Hop(entry.name, order[i].name, reason, str(exc)))
                continue
            self.last_served = entry.name
            cost = entry.cost(turn.usage)
            usage = turn.usage if cost is None else replace(turn.usage, cost_usd=cost)
            self.ledger.add(usage, entry.name)
            return replace(turn, model=turn.model or entry.model, usage=usage)

    def reroute_after_unparseable(self) -> None:
        """The last model's output could not be parsed: leave it out of the
        next attempt (unpinned only) and journal the hop."""
        served = self.last_served
        if self.pinned or served is None:
            return
        self.exclude.add(served)
        nxt = self.candidates()[0].name
        if nxt != served and self.on_hop is not None:
            detail = "its reply could not be parsed as the JSON asked for"
            self.on_hop(Hop(served, nxt, UNPARSEABLE, detail))


def make_chain(catalog: ModelCatalog) -> ModelChain | None:
    """The configured models as one provider; None when there are none."""
    return ModelChain.from_catalog(catalog) if catalog.entries else None
