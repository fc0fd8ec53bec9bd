"""`corral msg <session> "text"`: a message to a session's agent, through
the owner of the state dir. The owner decides who sends it: run inside an
agent's pane (through its agent socket, `CORRAL_AGENT_SOCKET`, or from any
process under the pane) it is from that agent's session, else from the
operator; what this process says of itself (`CORRAL_SESSION_ID`) is passed
along for older owners and not believed. The owner queues it and pastes it
at the target agent's next idle prompt; refusals (an unknown or finished
session, the rate and hop guards) are printed and exit 1."""

from __future__ import annotations

import argparse
import os
from typing import Any

from corral.supervisor.errors import CorralError
from corral.supervisor.states import label

from .client import _client, resolve
from .output import say, say_json

SESSION_ENV = "CORRAL_SESSION_ID"


def add_parser(sub: Any) -> None:
    msg = sub.add_parser("msg", help="send a message to a session's agent (needs an owner)")
    msg.add_argument("session", help="the session it is for: id, label or the end of its id")
    msg.add_argument("text", help="the message")
    msg.add_argument("--json", action="store_true", help="print the owner's answer as JSON")
    msg.add_argument(
        "--expect-reply",
        action="store_true",
        help="wait for the target's answer: shown pending on both sessions until it arrives",
    )
    msg.add_argument(
        "--reply-to", metavar="MESSAGE_ID", help="this answers that message (its id)", default=None
    )


def send(args: argparse.Namespace) -> int:
    sender = os.environ.get(SESSION_ENV, "").strip() or "operator"
    from corral.supervisor.remote import Calls, params

    with _client() as client:
        try:
            target = resolve([r.session_id for r in client.list()], args.session)
        except CorralError:
            target = args.session  # the owner says why it cannot go there
        message = params.SendParams(sender=sender, target=target, text=args.text)
        if args.expect_reply:
            message.expects_reply = True
        if args.reply_to:
            message.responds_to = args.reply_to
        result = client.answer(Calls.send, message)
    if args.json:
        say_json(result)
    else:
        say(f"corral msg: queued for {label(target)} (message {result['message_id']})")
    return 0
