"""The console shows the operator the hidden checks a contract holds: gate 1
says how many there are, their names and their verdicts on the untouched
tree; the log's contract line counts them; gate 2 marks them."""

from __future__ import annotations

from corral.supervisor.events import ContractProposedData, parse_event
from corral.supervisor.models import (
    CheckResult,
    CoderSession,
    ContractCheck,
    HiddenCheck,
    HiddenFile,
    OutcomeContract,
)
from corral.tui.event_text import describe
from corral.tui.screens.session import _hidden_line

CONTRACT = OutcomeContract(
    checks=[ContractCheck(name="tests", command="pytest -q")],
    hidden_checks=[
        HiddenCheck(
            name="hidden_more",
            command="pytest -q test_more.py",
            files=[HiddenFile(path="test_more.py", sha256="a" * 64)],
        )
    ],
)


def test_gate_one_counts_and_names_the_hidden_checks_with_their_baseline() -> None:
    session = CoderSession(
        id="s1",
        repo="/r",
        intent="x",
        engine="native",
        contract=CONTRACT,
        baseline=[CheckResult(name="hidden_more", passed=False, hidden=True)],
    )
    shown = _hidden_line(session).plain
    assert "1 hidden check(s), held back from the agent: hidden_more red now" in shown
    assert "/hidden PATH" in shown
    bare = session.model_copy(
        update={"contract": CONTRACT.model_copy(update={"hidden_checks": []})}
    )
    assert _hidden_line(bare).plain == ""


def test_the_contract_line_counts_the_hidden_checks() -> None:
    data = ContractProposedData(contract=CONTRACT).model_dump(mode="json")
    row = {"session_id": "s", "seq": 1, "ts": 1.0, "kind": "contract_proposed", "data": data}
    event = parse_event(row)
    assert "1 check(s) + 1 hidden (held back from the agent)" in describe(event).plain
