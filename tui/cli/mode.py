"""`corral mode SESSION [MODE]`, `corral model SESSION [MODEL]` and `corral
option SESSION [KEY VALUE]`: switch a running ACP agent's mode, model or
config option to one it announced (a person's call to the owner); without
the value, list what the agent offers."""

from __future__ import annotations

import argparse
from typing import Any

from corral.supervisor.errors import CorralError
from corral.supervisor.models import AgentOffers
from corral.supervisor.states import label

from .client import _client, resolve
from .output import say

VERBS = ("mode", "model", "option")


def add_parser(sub: Any) -> None:
    mode = sub.add_parser(
        "mode",
        help="switch a running ACP agent's mode (session/set_mode); alone, list its modes",
        description="Switch a running ACP agent's mode (e.g. ask, code): a person's call "
        "to the owner of the state dir; an unknown mode is refused with the modes the "
        "agent offers. Without MODE, list them.",
    )
    mode.add_argument("session", help="session id, label or the end of its id")
    mode.add_argument("mode", nargs="?", help="one of the modes the agent announced")
    model = sub.add_parser(
        "model",
        help="switch a running ACP agent's model (session/set_model); alone, list its models",
        description="Switch a running ACP agent's model to one it offers (by id or name); "
        "a model it does not offer is refused with those it does. Without MODEL, list them. "
        "To start on a model: corral run --model.",
    )
    model.add_argument("session", help="session id, label or the end of its id")
    model.add_argument("model", nargs="?", help="a model the agent announced (its id or name)")
    option = sub.add_parser(
        "option",
        help="set a running ACP agent's config option (session/set_config_option); "
        "alone, list its options",
        description="Set one of the config options a running ACP agent announced (e.g. "
        "corral option ID reasoning high; an on/off option takes true or false). Without "
        "KEY and VALUE, list the options with their values.",
    )
    option.add_argument("session", help="session id, label or the end of its id")
    option.add_argument("key", nargs="?", help="the option's id (or name)")
    option.add_argument("value", nargs="?", help="one of the values it offers")


def offers_lines(offers: AgentOffers | None, verb: str) -> list[str]:
    """What the agent offers for `verb`, current value first."""
    if offers is None:
        return []
    if verb == "mode" and offers.modes:
        return [f"{'*' if m.id == offers.mode else ' '} {m.shown()}" for m in offers.modes]
    if verb == "model" and offers.models:
        return [f"{'*' if m.id == offers.model else ' '} {m.shown()}" for m in offers.models]
    if verb == "option":
        lines = []
        for o in offers.options:
            values = "true, false" if o.kind == "boolean" else ", ".join(v.id for v in o.values)
            lines.append(f"{o.id} = {o.value}  ({values})")
        return lines
    return []


def run_mode(args: argparse.Namespace) -> int:
    verb = args.command
    wanted = {"mode": "mode", "model": "model"}.get(verb)
    from corral.supervisor.remote import Calls, params

    with _client() as client:
        sid = resolve([r.session_id for r in client.list()], args.session)
        if verb == "option" and (args.key is None) != (args.value is None):
            raise CorralError("give both the option and its value (corral option ID KEY VALUE)")
        value = getattr(args, wanted) if wanted else args.key
        if value is None:
            offers = client.get(sid).session.agent_offers
            lines = offers_lines(offers, verb)
            if not lines:
                raise CorralError(
                    f"{label(sid)}'s agent announced no {verb}s (only ACP agents announce them)"
                )
            say("\n".join(lines))
            return 0
        if verb == "mode":
            result = client.answer(
                Calls.set_mode, params.ModeParams(session_id=sid, mode=args.mode)
            )
            say(f"corral mode: {label(sid)} → {result['mode']}")
        elif verb == "model":
            result = client.answer(
                Calls.set_model, params.ModelParams(session_id=sid, model=args.model)
            )
            say(f"corral model: {label(sid)} → {result['model']}")
        else:
            result = client.answer(
                Calls.set_option,
                params.OptionParams(session_id=sid, key=args.key, value=args.value),
            )
            say(f"corral option: {label(sid)} {result['key']} → {result['value']}")
    return 0
