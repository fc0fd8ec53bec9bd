"""Messages between sessions, or from the operator to a session.

A message is admitted only to a session whose agent can read it (a running
agent CLI in a pane), is queued for that target and pasted at the agent's
idle prompt — never mid-turn, never over a question — by the same confirmed
paste as the operator's guidance. Each message ends `accepted` (the paste
was seen in the pane and Enter pressed), `rejected` (the pane was gone) or
`ambiguous` (the paste was not confirmed: it may show unsent), and every
step is logged in the target's journal and in the sender's.

A message may expect a reply (`expects_reply`, from a session): it is kept
pending, shown on both sessions' rows (owed by the target, awaited by the
sender), until the target's answer (`responds_to` its id) is delivered to the
sender; a message that was not delivered (`rejected`) leaves none, and an
answer that was not delivered leaves it pending. Once the question reached
the target (`accepted`, or `ambiguous`: it may show there), its pending reply
is stored in the state dir (`pending-replies.json`) and a restarted owner
shows it again on both rows; one still queued when the owner stopped was
never delivered, so it is not kept (the queue lives in memory).

Two guards keep agents from talking in circles: a rate limit per
(sender, target) pair, and a hop count — a message an agent sends counts
one hop more than the last message it received, and a chain stops at
`MAX_HOPS`. A message from the operator starts a chain at 0.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import tempfile
import time
from collections import deque
from collections.abc import Callable, Collection
from dataclasses import asdict, dataclass
from pathlib import Path

from ..errors import CorralError
from ..events import (
    MESSAGE_ACCEPTED,
    MESSAGE_AMBIGUOUS,
    MESSAGE_QUEUED,
    MESSAGE_REJECTED,
    OPERATOR,
    MessageData,
)
from ..models import CoderSession
from ..states import CoderState, label
from .identity import is_dormant

MAX_HOPS = 4
PAIR_LIMIT = 5  # messages per (sender, target) pair …
PAIR_WINDOW = 60.0  # … within this many seconds
MAX_TEXT = 8000
PENDING_FILE = "pending-replies.json"

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Message:
    id: str
    sender: str  # a session id, or "operator"
    target: str
    text: str
    hops: int
    expects_reply: bool = False
    responds_to: str | None = None

    def data(self, status: str = MESSAGE_QUEUED, reason: str | None = None) -> MessageData:
        return MessageData(
            message_id=self.id,
            sender=self.sender,
            target=self.target,
            text=self.text,
            status=status,
            reason=reason,
            hops=self.hops,
            expects_reply=self.expects_reply,
            responds_to=self.responds_to,
        )


def message_prompt(messages: list[Message]) -> str:
    """What the agent reads: who sent each message, and how to answer."""
    parts = []
    for m in messages:
        who = "the operator" if m.sender == OPERATOR else f"corral session {label(m.sender)}"
        said = f"Message from {who}:\n{m.text.strip()}"
        if m.responds_to is not None:
            said += f"\n(This answers your message {m.responds_to}.)"
        if m.expects_reply:
            said += (
                f"\n(It waits for your reply: corral msg {label(m.sender)} --reply-to {m.id} "
                '"your answer")'
            )
        parts.append(said)
    parts.append(
        '(Sent through corral. To answer another session, run: corral msg <session> "text")'
    )
    return "\n\n".join(parts)


def refusal(
    target: CoderSession | None, name: str, *, live: bool, speaks_acp: bool = False
) -> str | None:
    """Why a message cannot go to `target` (None: it can). An agent CLI in a
    pane reads it at its next idle prompt; an ACP agent (`speaks_acp`, said
    by the caller that knows the engines) gets it as its next turn's prompt."""
    if target is None:
        return f"no corral session '{name}': messages go to a session `corral sessions` lists"
    who = label(target.id)
    if target.state.is_terminal:
        return (
            f"{who} already finished (state: {target.state.value}): a message needs a session "
            "whose agent is working"
        )
    if is_dormant(target):
        return f"{who} is dormant: revive it (R) before sending it a message"
    if not speaks_acp and not target.engine.startswith(("external:", "adopted:")):
        return f"{who} runs no agent CLI (engine {target.engine}): nothing would read a message"
    if not live:
        return f"{who} is not running in this corral, so nothing would deliver the message"
    if target.state is not CoderState.RUNNING:
        return (
            f"{who} has no agent working (state: {target.state.value}): messages reach an "
            "agent while its session runs"
        )
    return None


class Mailboxes:
    """The queued messages of every target, and the guards."""

    def __init__(
        self, clock: Callable[[], float] = time.monotonic, store: Path | None = None
    ) -> None:
        self._clock = clock
        self._queues: dict[str, list[Message]] = {}
        self._sent: dict[tuple[str, str], deque[float]] = {}
        self._hops: dict[str, int] = {}  # the hop count of the last message each session read
        self._awaiting: dict[str, Message] = {}  # messages that expect a reply, by id
        self._store = store  # where delivered ones are kept across restarts
        self._delivered: set[str] = set()  # ids of awaiting messages that reached the target

    def restore(self, sessions: Collection[str]) -> None:
        """Take back the pending replies a previous owner stored, between
        `sessions` (those not finished) only."""
        if self._store is None:
            return
        try:
            raw = json.loads(self._store.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return
        except (OSError, ValueError) as exc:
            log.warning("pending replies in %s not read: %s", self._store, exc)
            return
        for item in raw if isinstance(raw, list) else []:
            try:
                message = Message(**item)
            except TypeError:
                continue  # not a message this corral wrote
            if message.expects_reply and {message.sender, message.target} <= set(sessions):
                self._awaiting[message.id] = message
                self._delivered.add(message.id)
        self._save()

    def _save(self) -> None:
        """Store the delivered pending replies (replaced whole, by rename)."""
        if self._store is None:
            return
        kept = [asdict(m) for mid, m in self._awaiting.items() if mid in self._delivered]
        try:
            self._store.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self._store.parent, prefix=".pending-")
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(kept, out)
            os.replace(tmp, self._store)
        except OSError as exc:  # kept in memory; a restart would not show it
            log.warning("pending replies not stored in %s: %s", self._store, exc)

    def awaiting(self) -> list[Message]:
        """Every message still waiting for its reply, oldest first."""
        return list(self._awaiting.values())

    def owed_by(self, session_id: str) -> int:
        return sum(m.target == session_id for m in self._awaiting.values())

    def awaited_by(self, session_id: str) -> int:
        return sum(m.sender == session_id for m in self._awaiting.values())

    def _answered(self, sender: str, target: str, responds_to: str) -> Message:
        """The pending message `sender` answers by sending to `target`."""
        asked = self._awaiting.get(responds_to)
        if asked is None or asked.target != sender or asked.sender != target:
            raise CorralError(
                f"{label(target)} waits for no reply from {label(sender)} to message "
                f"{responds_to}: `corral sessions` shows the replies each session owes"
            )
        return asked

    def ended(self, message: Message, status: str) -> None:
        """How a message ended settles its pending reply: a question not
        delivered leaves none; an answer delivered clears it."""
        changed = False
        if message.expects_reply and status == MESSAGE_REJECTED:
            changed = self._drop(message.id)
        reached = status in (MESSAGE_ACCEPTED, MESSAGE_AMBIGUOUS)  # it may show there
        if reached and message.id in self._awaiting and message.id not in self._delivered:
            self._delivered.add(message.id)
            changed = True
        if message.responds_to is not None and status == MESSAGE_ACCEPTED:
            changed = self._drop(message.responds_to) or changed
        if changed:
            self._save()

    def _drop(self, message_id: str) -> bool:
        self._delivered.discard(message_id)
        return self._awaiting.pop(message_id, None) is not None

    def forget(self, session_id: str) -> None:
        """A finished session owes and awaits nothing any more."""
        dropped = [mid for mid, m in self._awaiting.items() if session_id in (m.sender, m.target)]
        for mid in dropped:
            self._drop(mid)
        if dropped:
            self._save()

    def admit(
        self,
        sender: str,
        target: str,
        text: str,
        *,
        expects_reply: bool = False,
        responds_to: str | None = None,
    ) -> Message:
        """Queue a message; refuses an empty one, one to itself, and one the
        guards stop (the sentence says which)."""
        if expects_reply and sender == OPERATOR:
            raise CorralError(
                "the operator's messages expect no reply through corral: the agent answers on "
                "its screen"
            )
        if responds_to is not None:
            self._answered(sender, target, responds_to)
        text = text.strip()
        if not text:
            raise CorralError("an empty message was not sent")
        if len(text) > MAX_TEXT:
            raise CorralError(
                f"a message is at most {MAX_TEXT} characters (this one has {len(text)})"
            )
        if sender == target:
            raise CorralError(f"{label(target)} cannot send a message to itself")
        hops = 0 if sender == OPERATOR else self._hops.get(sender, 0) + 1
        if hops > MAX_HOPS:
            raise CorralError(
                f"refused: this message would be hop {hops} of a chain between sessions (at most "
                f"{MAX_HOPS}); the operator's next message starts a new chain"
            )
        now = self._clock()
        sent = self._sent.setdefault((sender, target), deque())
        while sent and now - sent[0] > PAIR_WINDOW:
            sent.popleft()
        if len(sent) >= PAIR_LIMIT:
            wait = int(PAIR_WINDOW - (now - sent[0])) + 1
            who = "the operator" if sender == OPERATOR else label(sender)
            raise CorralError(
                f"refused: {who} sent {label(target)} {PAIR_LIMIT} messages in the last "
                f"{int(PAIR_WINDOW)} s; try again in {wait} s"
            )
        sent.append(now)
        message = Message(
            secrets.token_hex(6), sender, target, text, hops, expects_reply, responds_to
        )
        if expects_reply:
            self._awaiting[message.id] = message
        self._queues.setdefault(target, []).append(message)
        return message

    def take(self, target: str) -> list[Message]:
        """The target's queued messages, oldest first (the queue empties)."""
        return self._queues.pop(target, [])

    def pending(self, target: str) -> int:
        return len(self._queues.get(target, []))

    def read(self, message: Message) -> None:
        """`message` reached its target's agent: what it sends next counts from here."""
        self._hops[message.target] = message.hops
