"""The loop guards of messages between sessions: a rate limit per pair and
a hop count, each refusal saying why and when the operator can go on."""

from __future__ import annotations

import pytest

from corral.supervisor.errors import CorralError
from corral.supervisor.session.messages import MAX_HOPS, PAIR_LIMIT, Mailboxes


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_pair_is_rate_limited_and_free_again_after_the_window() -> None:
    clock = Clock()
    box = Mailboxes(clock)
    for i in range(PAIR_LIMIT):
        box.admit("a", "b", f"note {i}")
    with pytest.raises(CorralError, match=r"sent corral-b 5 messages .* try again in \d+ s"):
        box.admit("a", "b", "one more")
    box.admit("c", "b", "another sender is not limited by a's messages")
    box.admit("a", "c", "nor is another target")
    clock.now += 61
    box.admit("a", "b", "later")
    assert [m.text for m in box.take("b")][-1] == "later"
    assert box.take("b") == []  # taken once


def test_a_chain_of_replies_stops_at_the_hop_limit_and_the_operator_restarts_it() -> None:
    box = Mailboxes(Clock())
    sender, target = "a", "b"
    for hop in range(1, MAX_HOPS + 1):
        [message] = [box.admit(sender, target, f"hop {hop}")]
        assert message.hops == hop
        box.take(target)
        box.read(message)  # it reached the agent, which answers
        sender, target = target, sender
    with pytest.raises(CorralError, match=f"hop {MAX_HOPS + 1} of a chain"):
        box.admit(sender, target, "and again")
    from_operator = box.admit("operator", sender, "start over")
    assert from_operator.hops == 0
    box.read(from_operator)
    assert box.admit(sender, target, "fresh").hops == 1


def test_empty_and_self_addressed_messages_are_refused() -> None:
    box = Mailboxes(Clock())
    with pytest.raises(CorralError, match="empty"):
        box.admit("a", "b", "   ")
    with pytest.raises(CorralError, match="to itself"):
        box.admit("a", "a", "hi")
