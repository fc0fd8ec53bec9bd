"""The capture and differential checks (`baseline`, `differential`) against
a tree an agent changed: a capture records the value on the untouched tree, a
differential compares the value now with it. A wrong verdict here is a false
"verified", so each test is an agent's way to one: real bash, real files."""

from __future__ import annotations

from pathlib import Path

import pytest

from corral.supervisor.contracts.checks import captures_from, run_contract
from corral.supervisor.models import (
    CheckResult,
    ContractCheck,
    DeltaWithin,
    Differential,
    OutcomeContract,
)


def contract(capture: str, now: str, expect: object = "changed") -> OutcomeContract:
    return OutcomeContract(
        checks=[
            ContractCheck(name="before", command=capture, baseline=True, timeout_secs=5),
            ContractCheck(
                name="after",
                command=now,
                differential=Differential(baseline="before", expect=expect),  # type: ignore[arg-type]
                timeout_secs=5,
            ),
        ]
    )


async def verdict(tmp_path: Path, c: OutcomeContract, edit: str | None = None) -> CheckResult:
    """Baseline on the untouched tree, then (after `edit`, as the agent's
    work) the verification run; the differential check's result."""
    tree = tmp_path / "tree"
    tree.mkdir(exist_ok=True)
    (tree / "value.txt").write_text("3\n")
    baseline = await run_contract(c, tree, untouched=True)
    if edit is not None:
        (tree / "value.txt").write_text(edit)
    results = await run_contract(c, tree, captures=captures_from(c, baseline), baseline=baseline)
    return results[-1]


async def test_a_real_change_passes_and_no_change_fails(tmp_path: Path) -> None:
    c = contract("cat value.txt", "cat value.txt")
    assert (await verdict(tmp_path, c, "4\n")).passed
    assert not (await verdict(tmp_path, c, "3\n")).passed
    unchanged = contract("cat value.txt", "cat value.txt", "unchanged")
    assert (await verdict(tmp_path, unchanged, "3\n")).passed
    assert not (await verdict(tmp_path, unchanged, "4\n")).passed


async def test_long_identical_output_is_not_a_change(tmp_path: Path) -> None:
    """The capture was kept as a 4,000-character tail while the value now was
    the whole output: the same 5,000 characters read as "changed"."""
    long = "python3 -c 'print(\"x\" * 5000)'"
    result = await verdict(tmp_path, contract(long, long), None)
    assert not result.passed, result.output_tail


async def test_a_change_before_the_tail_is_a_change(tmp_path: Path) -> None:
    """ "unchanged" must see a change in the head of a long output too."""
    command = "head -c 1 value.txt; python3 -c 'print(\"x\" * 5000)'"
    result = await verdict(tmp_path, contract(command, command, "unchanged"), "9\n")
    assert not result.passed, result.output_tail


async def test_an_output_that_prints_corrals_own_marker_is_compared_whole(
    tmp_path: Path,
) -> None:
    """The capture was cut at the first "[corral]" line it printed itself, so
    the same output read as changed."""
    command = "printf 'value\\n[corral] not ours\\n'"
    result = await verdict(tmp_path, contract(command, command), None)
    assert not result.passed, result.output_tail


@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf", "1e999"])
async def test_a_number_that_is_no_number_never_meets_a_bound(tmp_path: Path, value: str) -> None:
    """float('nan') compares false with every bound, so it passed any range."""
    c = contract("cat value.txt", "cat value.txt", DeltaWithin(min=1, max=5))
    result = await verdict(tmp_path, c, f"{value}\n")
    assert not result.passed, result.output_tail
    assert (await verdict(tmp_path, c, "5\n")).passed  # 3 → 5 is within


@pytest.mark.parametrize(
    "capture",
    ["sleep 10; echo 3", "cat missing.txt"],
    ids=["timed-out", "failed"],
)
async def test_a_capture_that_did_not_run_cleanly_captured_nothing(
    tmp_path: Path, capture: str
) -> None:
    """A capture that timed out or failed on the untouched tree recorded its
    error (or nothing) as the value, so any output now was "changed"."""
    c = contract(capture, "cat value.txt")
    c.checks[0].timeout_secs = 1
    result = await verdict(tmp_path, c, "4\n")
    assert not result.passed, result.output_tail
    assert "no baseline value was captured" in result.output_tail
