"""The totals of a `.ci/run`: `python -m scripts.ci_totals DIR` (standard library only).

`.ci/run` writes one line per step to DIR/steps: `passed` or `failed`, a tab, the step's name,
a tab, and the file of its own report in DIR (`-` for none). A pytest step's report is its
JUnit XML; schemathesis' is the output of `make fuzz`. A step with a report counts its cases;
a step without one counts as one check; a failed step whose report shows no failure (a lint
error before the tests, a crash) counts one failure more.

Prints a line per step, then the totals alone on the last line: `N passed, N failed`.
"""

from __future__ import annotations

import re
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Count:
    passed: int = 0
    failed: int = 0
    skipped: int = 0

    def __add__(self, other: Count) -> Count:
        return Count(
            self.passed + other.passed, self.failed + other.failed, self.skipped + other.skipped
        )

    def __str__(self) -> str:
        return f"{self.passed} passed, {self.failed} failed, {self.skipped} skipped"


def junit_count(text: str) -> Count:
    """The cases of a pytest JUnit XML report."""
    root = ET.fromstring(text)  # noqa: S314 - written by this run's pytest
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    total = Count()
    for suite in suites:
        tests, skipped = int(suite.get("tests", 0)), int(suite.get("skipped", 0))
        failed = int(suite.get("failures", 0)) + int(suite.get("errors", 0))
        total += Count(tests - failed - skipped, failed, skipped)
    return total


SCHEMATHESIS_CASES = re.compile(r"Test cases:\s*\n\s*([^\n]*)")
CASE_COUNT = re.compile(r"(\d+) (passed|failed|skipped|errored)")


def schemathesis_count(text: str) -> Count:
    """The cases of every schemathesis summary in a `make fuzz` output (`Test cases: N
    generated, N passed, N skipped`, one summary per run)."""
    total = Count()
    for summary in SCHEMATHESIS_CASES.findall(text):
        found = {kind: int(number) for number, kind in CASE_COUNT.findall(summary)}
        failed = found.get("failed", 0) + found.get("errored", 0)
        total += Count(found.get("passed", 0), failed, found.get("skipped", 0))
    return total


def report_count(path: Path) -> Count | None:
    if not path.is_file():
        return None
    text = path.read_text(encoding="utf-8", errors="replace")
    try:
        return junit_count(text) if path.suffix == ".xml" else schemathesis_count(text)
    except ET.ParseError:
        return None


def step_count(status: str, report: Path | None) -> Count:
    counted = report_count(report) if report is not None else None
    if counted is None:
        return Count(passed=1) if status == "passed" else Count(failed=1)
    if status == "failed" and counted.failed == 0:
        counted += Count(failed=1)
    return counted


def totals(directory: Path) -> tuple[list[str], Count]:
    lines, total = [], Count()
    steps = directory / "steps"
    text = steps.read_text(encoding="utf-8") if steps.is_file() else ""
    for line in text.splitlines():
        status, name, report = line.split("\t")
        count = step_count(status, None if report == "-" else directory / report)
        lines.append(f"{name}: {count}")
        total += count
    if not lines:
        total = Count(failed=1)  # nothing ran: that is no pass
    return lines, total


def main(argv: list[str]) -> int:
    lines, total = totals(Path(argv[0]))
    for line in lines:
        print(line)
    print(f"{total.passed} passed, {total.failed} failed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
