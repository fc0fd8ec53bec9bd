"""A check's verdict reason is words, never the runner's terminal escapes."""

from __future__ import annotations

from pathlib import Path

from corral.supervisor.contracts.verdicts import classify
from corral.supervisor.models import CheckResult


def test_colour_codes_never_reach_a_reason(tmp_path: Path) -> None:
    failed = CheckResult(
        name="tests",
        passed=False,
        exit_code=1,
        output_tail="\x1b[31mFAIL\x1b[0m test/report.js\n\x1b]8;;file:///x\x07\x1b[1m 2 failed\x1b[22m\n",
    )
    verdict = classify(failed, "npm test", tmp_path)
    assert verdict.reason == "exit 1: 2 failed"
    assert "\x1b" not in verdict.reason
