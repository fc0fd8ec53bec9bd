"""Whether a session's pinned model can run on its engine, and what the
engine is given for it.

A pin names a configured model (`[[llm.models]]` name) or, for an external
agent only, a model name that agent knows. The built-in engine needs a
configured, tool-capable model. An agent CLI gets the configured entry's
model id (`claude --model <id>`), or the name as typed when no entry has it;
an agent without a model flag (`custom:`, one-shot commands, the demo) is
refused with a sentence that says how to choose instead. An ACP agent is
asked for the model over the protocol (`session/set_model`) once it has said
which it offers.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..acp.agents import is_acp
from ..agents.base import AgentUnavailable
from ..agents.oneshot import is_oneshot, oneshot_profile
from ..agents.profiles import profile_for
from ..errors import CorralError
from ..llm.catalog import AUTO, ModelEntry
from ..llm.chain import ModelChain


@dataclass(frozen=True)
class Pin:
    name: str  # what the operator chose
    model_id: str  # what an agent CLI is given
    entry: ModelEntry | None  # None: a name only the agent knows


def resolve_pin(name: str | None, engine: str, chain: ModelChain | None) -> Pin | None:
    """The pin for `engine` (a resolved label), or None for no pin / `auto`."""
    name = (name or "").strip()
    if not name or name == AUTO:
        return None
    entry = chain.get(name) if chain is not None else None
    known = ", ".join(chain.names) if chain is not None else "none configured"
    if engine == "native":
        if entry is None:
            raise CorralError(
                f"unknown model {name!r} for the built-in engine: choose one of {known} "
                "([[llm.models]] in the config file; `corral doctor` lists them), or auto"
            )
        if not entry.tools:
            tooled = ", ".join(e.name for e in chain.entries if e.tools) if chain else ""
            raise CorralError(
                f"model {name!r} cannot call tools, which the built-in engine needs: choose a "
                f"tool-capable model ({tooled or 'none configured'}), or auto"
            )
        return Pin(name, entry.model or name, entry)
    spec = engine.removeprefix("external:")
    if is_acp(spec):  # asked of the agent over ACP once it says which models it offers
        return Pin(name, (entry.model if entry is not None else "") or name, entry)
    try:
        profile = oneshot_profile(spec) if is_oneshot(spec) else profile_for(spec)
    except AgentUnavailable as exc:
        raise CorralError(str(exc)) from None
    if profile.model_flag is None:
        raise CorralError(
            f"{profile.label} takes no model from corral: name the model in its own command "
            "line (e.g. custom:my-agent --model x), or choose model auto"
        )
    return Pin(name, (entry.model if entry is not None else "") or name, entry)
