"""What the approval gate says of a pass that needed its re-run, to the
person who must acknowledge it and in what it keeps: the tests of a visible
check are named, a hidden check is only counted (its name and tests are held
back wherever the agent could read them), and the delivered commit carries
one `Corral-Flaky` trailer per visible flaky check."""

from __future__ import annotations

from corral.supervisor.gates.approval import commit_message, flaky_accepted, flaky_sentence
from corral.supervisor.models import CheckResult, CoderSession, ContractCheck, OutcomeContract

VISIBLE = CheckResult(name="tests", passed=True, flaky=["tests.test_calc::test_add"])
HIDDEN = CheckResult(name="secret-exam", passed=True, flaky=["exam::test_hidden"], hidden=True)


def test_a_hidden_checks_flaky_tests_are_counted_never_named() -> None:
    said = flaky_sentence([VISIBLE, HIDDEN])
    assert "tests.test_calc::test_add" in said and "1 test(s) of hidden checks" in said
    assert "secret-exam" not in said and "exam::test_hidden" not in said
    assert said.startswith("checks tests, a hidden check passed only on an immediate re-run")
    kept = flaky_accepted([VISIBLE, HIDDEN], "ana")
    assert kept.startswith("Delivered on the acknowledgement of the operator (ana)")
    assert "secret-exam" not in kept and "exam::test_hidden" not in kept


def test_the_delivered_commit_says_which_check_passed_only_on_its_rerun() -> None:
    contract = OutcomeContract(checks=[ContractCheck(name="tests", command="pytest")])
    session = CoderSession(id="s1", repo="/r", intent="make add faster", contract=contract)
    steady = CheckResult(name="tests", passed=True)
    assert "Corral-Flaky" not in commit_message(session, [steady])
    message = commit_message(session, [VISIBLE, HIDDEN])
    trailers = [line for line in message.splitlines() if line.startswith("Corral-Flaky:")]
    assert trailers == [
        "Corral-Flaky: tests passed on its re-run after tests.test_calc::test_add failed"
    ]
