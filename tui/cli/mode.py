"""`corral mode SESSION MODE`: switch a running ACP agent's mode (one of the
modes it announced, e.g. `ask`, `code`); a person's call to the owner."""

from __future__ import annotations

import argparse
from typing import Any

from corral.supervisor.states import label

from .client import _client, resolve


def add_parser(sub: Any) -> None:
    mode = sub.add_parser(
        "mode",
        help="switch a running ACP agent's mode (session/set_mode)",
        description="Switch a running ACP agent's mode (e.g. ask, code): a person's call "
        "to the owner of the state dir; an unknown mode is refused with the modes the "
        "agent offers.",
    )
    mode.add_argument("session", help="session id, label or the end of its id")
    mode.add_argument("mode", help="one of the modes the agent announced (shown in its log)")


def run_mode(args: argparse.Namespace) -> int:
    with _client() as client:
        sid = resolve([r.session_id for r in client.list()], args.session)
        result = client.call("set_mode", session_id=sid, mode=args.mode)
    print(f"corral mode: {label(sid)} → {result['mode']}")
    return 0
