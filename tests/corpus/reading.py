"""The corpus's own reading of a test run's output, written apart from
corral's parsers (supervisor/contracts/test_reports and its runners) so the
independent re-check inherits none of their defects: which tests a run
named failing, and how many it said passed and failed. It knows the plain
forms the corpus's runners print (pytest's short summary, unittest -v,
TAP, go test, cargo test, mocha's spec reporter, jest) and nothing else: a
run it cannot read is compared by exit code alone, and says so."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

# one failing test per line, its name in group 1
FAILING_LINE = (
    re.compile(r"^(?:FAILED|ERROR) (\S+::\S+)"),  # pytest short summary
    re.compile(r"^(?:FAIL|ERROR): (\S+ \([\w.]+\))"),  # unittest
    re.compile(r"^not ok \d+ (?:- )?(.*?)(?:\s+#\s*(?!TODO|SKIP)\w.*)?$"),  # TAP
    re.compile(r"^\s*--- FAIL: (\S+)"),  # go test
    re.compile(r"^test (\S+) \.\.\. FAILED$"),  # cargo test
    re.compile(r"^\s*[✕×] (.+?)(?: \(\d+ ?m?s\))?$"),  # jest
    re.compile(r"^\s*\d+\) (.+)$"),  # mocha spec: the numbered failures
)
SKIPPED_TAP = re.compile(r"#\s*(TODO|SKIP)", re.IGNORECASE)
COUNTS = (
    re.compile(r"(\d+) (passed|failed)"),  # pytest, jest, cargo, the plain closing line
    re.compile(r"(\d+) (passing|failing)"),  # mocha
    re.compile(r"^# (pass|fail)\s+(\d+)"),  # TAP / tape trailer
)


@dataclass
class Reading:
    """What a run's output said about its tests."""

    failing: set[str] = field(default_factory=set)
    passed: int | None = None
    failed: int | None = None

    @property
    def read(self) -> bool:
        """Whether the output named tests or counted them at all."""
        return bool(self.failing) or self.passed is not None or self.failed is not None


def read_run(output: str) -> Reading:
    """The failing tests a run named and the counts it closed with."""
    reading = Reading()
    for raw in output.splitlines():
        line = ANSI.sub("", raw).rstrip()
        for pattern in FAILING_LINE:
            found = pattern.match(line)
            if found and not (line.startswith("not ok") and SKIPPED_TAP.search(line)):
                reading.failing.add(found.group(1).strip())
                break
        for pattern in COUNTS:
            for found in pattern.finditer(line):
                groups = [g for g in found.groups() if g]
                pairs = (
                    zip(groups[0::2], groups[1::2], strict=False)
                    if groups[0].isdigit()
                    else [(groups[1], groups[0])]
                )
                for number, word in pairs:
                    if word.startswith("pass"):
                        reading.passed = (reading.passed or 0) + int(number)
                    elif word.startswith("fail"):
                        reading.failed = (reading.failed or 0) + int(number)
    return reading


def newly_failing(before: str, after: str) -> tuple[list[str], str]:
    """Tests the `after` run names failing that the `before` run did not, and
    a note when neither names tests but their failure counts grew."""
    was, now = read_run(before), read_run(after)
    new = sorted(now.failing - was.failing)
    if new or now.failing or was.failing:
        return new, ""
    if (now.failed or 0) > (was.failed or 0):
        return [], f"{now.failed} failing, {was.failed or 0} before (counts only)"
    return [], ""
