"""JUnit XML as ctest (`--output-junit`) and pytest (`--junitxml`) write it."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

PASSED, FAILED, ERROR, SKIPPED, MISSING = "passed", "failed", "error", "skipped", "missing"


class JUnitInvalid(ValueError):
    pass


def read_junit(path: Path) -> dict[str, str]:
    """Map each test case to passed / failed / error / skipped.

    The id is `classname::name` (just `name` when the class repeats it, as ctest writes);
    repeated ids get `#2`, `#3` so no result is silently merged.
    """
    return {test: status for test, (status, _) in read_junit_cases(path).items()}


def read_junit_cases(path: Path) -> dict[str, tuple[str, float | None]]:
    """Each test case's status and its `time` attribute in seconds (None when absent)."""
    try:
        root = ET.parse(path).getroot()
    except FileNotFoundError:
        raise JUnitInvalid(f"{path}: the test command wrote no JUnit XML") from None
    except (ET.ParseError, OSError) as exc:
        raise JUnitInvalid(f"{path}: not valid JUnit XML: {exc}") from None
    if root.tag not in ("testsuites", "testsuite"):
        raise JUnitInvalid(f"{path}: root element is <{root.tag}>, not <testsuites>/<testsuite>")
    results: dict[str, tuple[str, float | None]] = {}
    for case in root.iter("testcase"):
        name = case.get("name", "")
        classname = case.get("classname", "")
        test_id = name if not classname or classname == name else f"{classname}::{name}"
        unique, counter = test_id, 1
        while unique in results:
            counter += 1
            unique = f"{test_id}#{counter}"
        results[unique] = (_status(case), _seconds(case.get("time")))
    return results


def _seconds(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _status(case: ET.Element) -> str:
    tags = {child.tag for child in case}
    if "failure" in tags:
        return FAILED
    if "error" in tags:
        return ERROR
    if "skipped" in tags or case.get("status") in ("notrun", "disabled"):
        return SKIPPED
    if case.get("status") == "fail":
        return FAILED
    return PASSED


def executed(results: dict[str, str]) -> int:
    return sum(1 for status in results.values() if status != SKIPPED)
