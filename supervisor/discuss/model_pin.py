"""A discussion's pinned model: a configured model that can call tools,
saved with the discussion so it survives reopening, cleared by `auto`, and
not changed while a run started from the discussion is unfinished (that run
was planned with it)."""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError, CorralError
from ..llm.base import ModelProvider
from ..llm.catalog import AUTO
from ..llm.chain import ModelChain
from ..states import label
from .linked_runs import first_unfinished


def normalize(name: str | None) -> str | None:
    """None for no pin (`""` and `auto` included)."""
    name = (name or "").strip()
    return None if not name or name == AUTO else name


def check_model(provider: ModelProvider | None, name: str) -> None:
    """Refuse a name that is not a configured, tool-capable model."""
    chain = provider if isinstance(provider, ModelChain) else None
    entry = chain.get(name) if chain is not None else None
    if entry is None:
        known = ", ".join(chain.names) if chain is not None else "none configured"
        raise ConfigError(
            f"unknown model {name!r}: choose one of {known} (`corral doctor` lists them), or "
            "auto to clear the choice"
        )
    if not entry.tools:
        assert chain is not None
        tooled = ", ".join(e.name for e in chain.entries if e.tools) or "none configured"
        raise ConfigError(
            f"model {name!r} cannot call repository tools, which a discussion needs: choose a "
            f"tool-capable model ({tooled}), or auto to clear the choice"
        )


def check_change(runs: list[dict[str, Any]]) -> None:
    """A pin may not change under a run that is still going."""
    busy = first_unfinished(runs)
    if busy is not None:
        sid = str(busy.get("session_id") or "")
        raise CorralError(
            f"Finish or stop this discussion's active task ({label(sid)}, "
            f"{busy.get('state')}) before changing its model."
        )


def pinned(provider: ModelProvider | None, name: str | None) -> ModelProvider | None:
    """The provider one turn of a discussion uses: its pin only, strictly,
    when set; else the default order with the turn's own exclusions (one
    discussion's failed model is not skipped by the others)."""
    if not isinstance(provider, ModelChain):
        return provider
    entry = provider.get(name) if name is not None else None
    return provider.view(pin=entry)
