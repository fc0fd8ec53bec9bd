"""What an ACP agent announces it can switch — its modes, its models and its
config options — read into `AgentOffers`, and the operator's choice matched
against it.

Models come one of two ways. Claude Code's adapter and Gemini CLI write
`models: {currentModelId, availableModels: [{modelId, name}]}` in the answer
to `session/new` or `session/load` and serve `session/set_model`; the Python
SDK's schema no longer has either, so they are read from the raw answer and
sent by corral's wire. Codex's adapter announces its model as a config
option of category `model`, set with `session/set_config_option`. Config
options are the protocol's own (`configOptions`, `config_option_update`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from acp.schema import (
    SessionConfigOptionBoolean,
    SessionConfigOptionSelect,
    SessionConfigSelectGroup,
    SessionModeState,
)

from ..errors import CorralError
from ..models import AgentChoice, AgentOffers, AgentSetting

ConfigOption = SessionConfigOptionSelect | SessionConfigOptionBoolean

TRUE_WORDS = ("true", "on", "yes", "1")
FALSE_WORDS = ("false", "off", "no", "0")


def read_modes(offers: AgentOffers, modes: SessionModeState | None) -> None:
    if modes is None:
        return
    offers.modes = [AgentChoice(id=m.id, name=m.name) for m in modes.available_modes]
    offers.mode = modes.current_mode_id


def read_models(offers: AgentOffers, raw: Any) -> None:
    """`models` as the agent sent it; anything malformed is left out."""
    if not isinstance(raw, dict):
        return
    available = raw.get("availableModels")
    if isinstance(available, list):
        offers.models = [
            AgentChoice(id=m["modelId"], name=str(m.get("name") or ""))
            for m in available
            if isinstance(m, dict) and isinstance(m.get("modelId"), str)
        ]
    current = raw.get("currentModelId")
    if isinstance(current, str):
        offers.model = current


def read_options(offers: AgentOffers, options: Iterable[ConfigOption] | None) -> None:
    """The full set of config options (each announcement replaces the last).
    A choice of category `model` is the agent's model (as Codex's adapter
    announces it): its values are the models offered, set through it."""
    if options is None:
        return
    read: list[AgentSetting] = []
    for o in options:
        category = o.category if isinstance(o.category, str) else None
        if isinstance(o, SessionConfigOptionBoolean):
            read.append(
                AgentSetting(
                    id=o.id,
                    name=o.name,
                    kind="boolean",
                    value="true" if o.current_value else "false",
                    category=category,
                )
            )
            continue
        values: list[AgentChoice] = []
        for item in o.options:
            group = item.options if isinstance(item, SessionConfigSelectGroup) else [item]
            values += [AgentChoice(id=v.value, name=v.name) for v in group]
        read.append(
            AgentSetting(
                id=o.id, name=o.name, value=o.current_value, values=values, category=category
            )
        )
        if category == "model":
            offers.models, offers.model, offers.model_option = values, o.current_value, o.id
    offers.options = read


def _find(said: str, choices: list[AgentChoice]) -> AgentChoice | None:
    """A choice by its id, else by its name (case folded)."""
    said = said.strip()
    for choice in choices:
        if choice.id == said:
            return choice
    folded = said.casefold()
    named = [c for c in choices if c.name and c.name.casefold() == folded]
    return named[0] if len(named) == 1 else None


def _listed(choices: list[AgentChoice]) -> str:
    return ", ".join(c.shown() for c in choices)


def choose_mode(offers: AgentOffers, said: str, label: str) -> str:
    if not offers.modes:
        return said.strip()  # an agent that announced none is asked as it is
    found = _find(said, offers.modes)
    if found is None:
        raise CorralError(f"{label} offers no mode {said!r}; it offers: {_listed(offers.modes)}")
    return found.id


def choose_model(offers: AgentOffers, said: str, label: str) -> str:
    """The model id the agent offers for `said`; refused in one sentence
    naming the offered ones."""
    if not offers.models:
        raise CorralError(
            f"{label} offers no models to choose from over ACP, so model {said!r} cannot be "
            "set: start it without a model, or name the model in its own command line"
        )
    found = _find(said, offers.models)
    if found is None:
        raise CorralError(f"{label} offers no model {said!r}; it offers: {_listed(offers.models)}")
    return found.id


def choose_option(offers: AgentOffers, key: str, said: str, label: str) -> tuple[str, str | bool]:
    """(the option's id, the value to send) for `key` = `said`."""
    keys = [AgentChoice(id=o.id, name=o.name) for o in offers.options]
    if not keys:
        raise CorralError(f"{label} announced no config options")
    found = _find(key, keys)
    if found is None:
        raise CorralError(f"{label} has no config option {key!r}; it has: {_listed(keys)}")
    option = next(o for o in offers.options if o.id == found.id)
    word = said.strip().casefold()
    if option.kind == "boolean":
        if word in TRUE_WORDS or word in FALSE_WORDS:
            return option.id, word in TRUE_WORDS
        raise CorralError(f"{label}'s option {option.id!r} is on or off: give true or false")
    value = _find(said, option.values)
    if value is None:
        raise CorralError(
            f"{label}'s option {option.id!r} has no value {said!r}; it offers: "
            f"{_listed(option.values)}"
        )
    return option.id, value.id


def describe(offers: AgentOffers) -> list[tuple[str, str]]:
    """What the conversation shows of the offers: (part, text) lines."""
    lines: list[tuple[str, str]] = []
    if offers.mode or offers.modes:
        shown = ", ".join(c.id for c in offers.modes)
        lines.append(("mode", f"{offers.mode} (offers: {shown})" if shown else f"{offers.mode}"))
    if offers.model or offers.models:
        shown = ", ".join(c.id for c in offers.models)
        lines.append(("model", f"{offers.model} (offers: {shown})" if shown else f"{offers.model}"))
    if offers.options:
        lines.append(("config", settings_text(offers)))
    return lines


def settings_text(offers: AgentOffers) -> str:
    """`id = value` per config option, one a line."""
    return "\n".join(f"{o.id} = {o.value}" for o in offers.options)
