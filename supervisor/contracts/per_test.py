"""Judging a test-suite check test by test, against the untouched tree.

On the untouched tree, a suite whose only red is tests that fail there is
not this task's work: the check counts as passing and names them ("already
failing on the untouched tree (N)") — shown at gate 1, never hidden and
never blocking. At verification the check passes when no test that passed
on the untouched tree fails or is skipped now, every test the untouched tree
did not fail (a new test among them) passes, and every test the contract
names (`must_pass`) passes. A test already failing on the untouched tree
fails either way; where the runner said how it failed there (its exception
type and the innermost line in the test's file: `contracts.failure_sites`),
one that now fails differently is the work's (a regression that breaks
something the test asserts earlier moves its failure earlier) and the check
does not pass; the same failure is not counted. One whose failure could not
be read hides any regression in it. Gate 1 and gate 2 say which with
`unseen_regressions`, never leaving the operator to think it guarded.
A suite that collected on the untouched tree and does not now fails: the same environment collected it, so the change
broke it (never *cannot run*). Anything else — no per-test report, a
collection error on the untouched tree, a red exit no failed test explains,
a check with an output or differential assertion — keeps the exit-code
semantics.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..models import ContractCheck, FailureSite, TestReport

SHOWN_NAMES = 10


@dataclass(frozen=True)
class Judgement:
    """A per-test verdict: whether the check passes, and the sentence why."""

    passed: bool
    note: str
    already_failing: tuple[str, ...] = ()
    # tests already failing on the untouched tree that fail differently now,
    # when that is the verdict's only reason (contracts.checks runs the check
    # once more to tell a site that moves by itself from the work's)
    changed_only: tuple[str, ...] = ()


def unseen_regressions(count: int, placed: int = 0) -> str:
    """What a test already failing on the untouched tree costs. Where its
    runner said how it failed (`placed` of the `count`), a regression is
    seen only when it changes that (the exception, or the line in the test
    it fails at); where it did not, a change that breaks it further fails
    it just the same, so no check can see that."""
    placed = max(0, min(placed, count))
    seen_when = (
        "seen only if it changes where or how {} fails (the exception, or the line in the test)"
    )
    if count == 1:
        if placed:
            return "this test was already failing: a regression in it is " + seen_when.format("it")
        return "this test was already failing: a regression in it cannot be seen"
    if placed == count:
        return f"these {count} tests were already failing: a regression in them is " + (
            seen_when.format("one")
        )
    if placed:
        return (
            f"these {count} tests were already failing: a regression in {placed} of them is "
            + seen_when.format("one")
            + f"; in the other {count - placed} (their runner did not say where they fail) "
            "it cannot be seen"
        )
    return f"these {count} tests were already failing: a regression in them cannot be seen"


def placed_count(tests: list[str] | tuple[str, ...], report: TestReport | None) -> int:
    """How many of `tests` the untouched tree's report says where they fail."""
    if report is None:
        return 0
    return sum(1 for t in tests if t in report.failed_at)


def same_failure(before: FailureSite, now: FailureSite) -> bool:
    """The same exception at the same place in the test's file. The place is
    its line, or its source text when the line moved (a test file the work
    extended above the test: the run with the agent's files); two identical
    lines in one test failing in turn are taken for one (a known blind spot)."""
    if before.kind != now.kind or before.path != now.path:
        return False
    if before.line == now.line:
        return not (before.text and now.text and before.text != now.text)
    return bool(before.text) and before.text == now.text


def failing_differently(before: TestReport, now: TestReport, tests: list[str]) -> list[str]:
    """`tests` (failing on both trees) whose failure the untouched tree's
    report placed, and that now fail elsewhere or with another exception
    (or where it cannot be read: the same runner said it there)."""
    changed: list[str] = []
    for test in tests:
        was = before.failed_at.get(test)
        if was is None:
            continue  # never read: cannot be seen (said at both gates)
        is_now = now.failed_at.get(test)
        if is_now is None and not now.failed_at:
            continue  # the runner said no test's site this time (output cut): not compared
        if is_now is None or not same_failure(was, is_now):
            changed.append(test)
    return changed


def _changed_sentence(test: str, was: FailureSite, now: FailureSite | None) -> str:
    where = now.said() if now is not None else "where its runner does not say"
    return (
        f"{test} was already failing at {was.said()}; now fails at {where}: "
        "the work changed what it does"
    )


def names(tests: list[str], limit: int = SHOWN_NAMES) -> str:
    shown = ", ".join(tests[:limit])
    return shown + (f" and {len(tests) - limit} more" if len(tests) > limit else "")


def judged_per_test(check: ContractCheck) -> bool:
    """Only a plain test-suite check (exit status is its whole assertion)."""
    return check.expect_exit_zero and check.output_contains is None and check.differential is None


def _matches(named: str, test_id: str) -> bool:
    """A named test against a runner's id: equal, or the same test written as
    a pytest node id (`tests/test_a.py::TestK::test_m` ~ `tests.test_a.TestK::test_m`)."""
    if named == test_id or test_id.endswith(named):
        return True
    if "::" in named:
        path, _, rest = named.partition("::")
        module = path.removesuffix(".py").replace("/", ".")
        parts = rest.split("::")
        dotted = f"{module}.{'.'.join(parts[:-1])}" if len(parts) > 1 else module
        return test_id in (f"{dotted}::{parts[-1]}", f"{module}::{rest}")
    return False


def on_untouched_tree(
    check: ContractCheck, code: int | None, report: TestReport | None
) -> Judgement | None:
    """The baseline's per-test verdict, or None for the exit-code semantics."""
    if not judged_per_test(check) or report is None or report.collection_errors:
        return None
    if code is None:
        return None
    passing = set(report.passed)
    unmet = [n for n in check.must_pass if not any(_matches(n, t) for t in passing)]
    if unmet:  # the tests the contract names are the work: red until it is done
        return Judgement(False, f"the contract's named test(s) do not pass yet: {names(unmet)}")
    if code == 0 or not report.failed:
        return None
    failing = list(report.failed)
    placed = placed_count(failing, report)
    note = (
        f"already failing on the untouched tree ({len(failing)}): not this task's work: "
        f"{names(failing)} ({unseen_regressions(len(failing), placed)})"
    )
    return Judgement(True, note, tuple(failing))


CANNOT_JUDGE = "cannot judge"


def against_baseline(
    check: ContractCheck, code: int | None, report: TestReport | None, before: TestReport | None
) -> Judgement | None:
    """The verification's per-test verdict against the untouched tree's
    report, or None for the exit-code semantics."""
    if not judged_per_test(check) or code is None:
        return None
    if report is None and (before is not None or check.must_pass):
        why = (
            "it reported per test on the untouched tree"
            if before is not None
            else "the contract names tests that must pass"
        )
        return Judgement(
            False,
            f"{CANNOT_JUDGE}: the test runner produced no per-test report ({why}), so its exit "
            f"code {code} proves nothing",
        )
    if report is None:
        return None
    if before is None:
        passing = set(report.passed)
        unmet = [n for n in check.must_pass if not any(_matches(n, t) for t in passing)]
        if unmet:
            return Judgement(False, f"the contract's named test(s) do not pass: {names(unmet)}")
        return None
    if report.collection_errors:
        if before.collection_errors or not before.passed:
            return None  # it never collected here: the exit-code semantics say why
        # the same environment collected the untouched tree: the change broke it
        return Judgement(
            False,
            "the tests no longer collect (they did on the untouched tree): "
            f"{names(report.collection_errors, 3)}",
        )
    failed_now = set(report.failed)
    skipped_now = set(report.skipped)
    passing_now = set(report.passed)
    regressed = [t for t in before.passed if t in failed_now]
    now_skipped = [t for t in before.passed if t in skipped_now]
    missing = [t for t in before.passed if t not in failed_now | skipped_now | passing_now]
    already = set(before.failed)
    new_failing = [t for t in report.failed if t not in already and t not in before.passed]
    unmet = [n for n in check.must_pass if not any(_matches(n, t) for t in passing_now)]
    still = sorted(failed_now & already)
    changed = failing_differently(before, report, still)
    problems: list[str] = []
    if regressed:
        problems.append(
            f"{len(regressed)} test(s) that passed on the untouched tree fail now: {names(regressed)}"
        )
    if now_skipped:
        problems.append(
            f"{len(now_skipped)} test(s) that passed on the untouched tree are skipped now: "
            f"{names(now_skipped)} (an xfail counts as skipped)"
        )
    if missing:
        problems.append(
            f"{len(missing)} test(s) that passed on the untouched tree were not run now "
            f"(deleted, deselected or renamed): {names(missing)}"
        )
    if new_failing:
        problems.append(f"failing: {names(new_failing)}")
    if changed:
        shown = [
            _changed_sentence(t, before.failed_at[t], report.failed_at.get(t)) for t in changed[:3]
        ]
        more = f" (and {len(changed) - 3} more)" if len(changed) > 3 else ""
        problems.append(
            f"{len(changed)} test(s) already failing on the untouched tree fail differently now: "
            + "; ".join(shown)
            + more
        )
    if unmet:
        problems.append(f"the contract's named test(s) do not pass: {names(unmet)}")
    if problems:
        alone = tuple(changed) if len(problems) == 1 and changed else ()
        return Judgement(False, "; ".join(problems), changed_only=alone)
    if code == 0:
        return None
    if not report.failed:  # a red exit no failed test explains
        return None
    placed = placed_count(still, before)
    same = ", each failing as it did there" if placed == len(still) else ""
    return Judgement(
        True,
        f"passes apart from {len(still)} test(s) already failing on the untouched tree: "
        f"{names(still)}{same} ({unseen_regressions(len(still), placed)})",
        tuple(still),
    )
