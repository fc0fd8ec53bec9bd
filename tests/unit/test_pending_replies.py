"""Messages that expect a reply (`Mailboxes`): pending from admission, shown
owed by the target and awaited by the sender, cleared only when the answer is
delivered; a message not delivered leaves none; only the asked session can
answer, and only to the asker."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from corral.supervisor.errors import CorralError
from corral.supervisor.events import MESSAGE_ACCEPTED, MESSAGE_AMBIGUOUS, MESSAGE_REJECTED
from corral.supervisor.session.messages import Mailboxes, message_prompt

A, B, C = "a" * 24, "b" * 24, "c" * 24


def test_a_reply_delivered_clears_the_pending_message() -> None:
    box = Mailboxes()
    asked = box.admit(A, B, "which port?", expects_reply=True)
    assert (box.owed_by(B), box.awaited_by(A)) == (1, 1)
    assert (box.owed_by(A), box.awaited_by(B)) == (0, 0)
    box.ended(asked, MESSAGE_ACCEPTED)  # the question reached B: still owed
    assert box.owed_by(B) == 1
    assert f"--reply-to {asked.id}" in message_prompt([asked])
    answer = box.admit(B, A, "8080", responds_to=asked.id)
    assert answer.responds_to == asked.id
    box.ended(answer, MESSAGE_REJECTED)  # the answer did not reach A: still owed
    assert (box.owed_by(B), box.awaited_by(A)) == (1, 1)
    again = box.admit(B, A, "8080", responds_to=asked.id)
    box.ended(again, MESSAGE_AMBIGUOUS)  # not seen to land: still owed
    assert box.owed_by(B) == 1
    box.ended(again, MESSAGE_ACCEPTED)
    assert (box.owed_by(B), box.awaited_by(A)) == (0, 0)


def test_a_question_not_delivered_leaves_no_pending_reply() -> None:
    box = Mailboxes()
    asked = box.admit(A, B, "which port?", expects_reply=True)
    box.ended(asked, MESSAGE_REJECTED)
    assert (box.owed_by(B), box.awaited_by(A)) == (0, 0)


def test_only_the_asked_session_answers_and_only_to_the_asker() -> None:
    box = Mailboxes()
    asked = box.admit(A, B, "which port?", expects_reply=True)
    with pytest.raises(CorralError, match="waits for no reply"):
        box.admit(C, A, "9999", responds_to=asked.id)  # a third session forging the answer
    with pytest.raises(CorralError, match="waits for no reply"):
        box.admit(B, C, "9999", responds_to=asked.id)  # the answer sent elsewhere
    with pytest.raises(CorralError, match="waits for no reply"):
        box.admit(B, A, "9999", responds_to="0" * 12)  # no such message
    assert box.owed_by(B) == 1


def test_the_operator_asks_no_reply_and_a_finished_session_owes_none() -> None:
    box = Mailboxes()
    with pytest.raises(CorralError, match="expect no reply"):
        box.admit("operator", B, "hi", expects_reply=True)
    box.admit(A, B, "which port?", expects_reply=True)
    box.forget(B)
    assert (box.owed_by(B), box.awaited_by(A)) == (0, 0)


def test_a_delivered_question_is_pending_again_after_a_restart_until_answered(
    tmp_path: Path,
) -> None:
    store = tmp_path / "pending-replies.json"
    box = Mailboxes(store=store)
    asked = box.admit(A, B, "which port?", expects_reply=True)
    box.ended(asked, MESSAGE_ACCEPTED)
    again = Mailboxes(store=store)  # the owner restarted
    again.restore({A, B})
    assert (again.owed_by(B), again.awaited_by(A)) == (1, 1)
    answer = again.admit(B, A, "8080", responds_to=asked.id)  # still answerable
    again.ended(answer, MESSAGE_ACCEPTED)
    third = Mailboxes(store=store)
    third.restore({A, B})
    assert (third.owed_by(B), third.awaited_by(A)) == (0, 0)


def test_a_question_never_delivered_or_rejected_is_not_pending_after_a_restart(
    tmp_path: Path,
) -> None:
    store = tmp_path / "pending-replies.json"
    box = Mailboxes(store=store)
    box.admit(A, B, "still queued when the owner stopped", expects_reply=True)
    refused = box.admit(A, C, "which port?", expects_reply=True)
    box.ended(refused, MESSAGE_REJECTED)
    again = Mailboxes(store=store)
    again.restore({A, B, C})
    assert again.awaiting() == []


def test_a_restart_drops_the_pending_replies_of_finished_sessions_and_foreign_entries(
    tmp_path: Path,
) -> None:
    store = tmp_path / "pending-replies.json"
    box = Mailboxes(store=store)
    asked = box.admit(A, B, "which port?", expects_reply=True)
    box.ended(asked, MESSAGE_AMBIGUOUS)  # it may show there: still owed
    data = json.loads(store.read_text())
    store.write_text(json.dumps([*data, {"id": "x", "evil": 1}, "junk"]))
    again = Mailboxes(store=store)
    again.restore({A})  # B finished while no owner ran
    assert again.awaiting() == []
    assert json.loads(store.read_text()) == []
