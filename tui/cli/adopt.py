"""`corral adopt [--list] [<pane>]` and `corral release <session>`: agent
panes the user started on their own tmux server, observed and steered by
the owner of the state dir (status, questions, messages, the live terminal;
no contract, no worktree). Releasing one leaves it running untouched."""

from __future__ import annotations

import argparse
from typing import Any

from corral.supervisor.errors import CorralError
from corral.supervisor.states import label

from .client import _client, resolve
from .output import say, say_json


def add_parsers(sub: Any) -> None:
    adopt = sub.add_parser(
        "adopt", help="watch and steer an agent pane you started in tmux (needs an owner)"
    )
    adopt.add_argument("pane", nargs="?", help="the pane: <socket>:%%N, %%N or session:window.pane")
    adopt.add_argument("--list", action="store_true", help="list the agent panes corral can adopt")
    adopt.add_argument(
        "--socket", action="append", help="a tmux socket to look on (default: yours)"
    )
    adopt.add_argument("--json", action="store_true", help="print JSON")
    release = sub.add_parser("release", help="stop watching an adopted pane (it keeps running)")
    release.add_argument("session", help="the adopted session: id, label or the end of its id")


def run_adopt(args: argparse.Namespace) -> int:
    from corral.supervisor.remote import Calls, params

    with _client() as client:
        if args.list or not args.pane:
            panes: list[dict[str, Any]] = client.answer(
                Calls.adoptable, params.AdoptableParams(sockets=args.socket)
            )
            if args.json:
                say_json(panes)
                return 0
            if not panes:
                say("no agent panes to adopt on your tmux servers")
            for p in panes:
                say(f"{p['target']}  {p['where']:<14} {p['agent']:<8} {p['cwd']}")
            return 0
        result = client.answer(Calls.adopt, params.AdoptParams(target=args.pane))
    sid = result["session_id"]
    if args.json:
        say_json(result)
    else:
        say(f"corral adopt: watching {args.pane} as {label(sid)} (corral release {label(sid)})")
    return 0


def run_release(args: argparse.Namespace) -> int:
    from corral.supervisor.remote import Calls, params

    with _client() as client:
        try:
            sid = resolve([r.session_id for r in client.list()], args.session)
        except CorralError:
            sid = args.session  # the owner says why
        client.request(Calls.release, params.SessionParams(session_id=sid))
    say(f"corral release: {label(sid)} released; its pane keeps running untouched")
    return 0
