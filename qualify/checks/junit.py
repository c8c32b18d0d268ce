"""JUnit XML as ctest (`--output-junit`) and pytest (`--junitxml`) write it.

A test's captured output may hold characters XML 1.0 does not allow (a coloured log's ESC, a
NUL), written raw or as character references by tools that do not filter them: such a file
is read with those characters taken out, since the outcomes it records are intact.

A file is read up to `MAX_BYTES` (a suite of tens of thousands of tests with their captured
output stays well under it); a larger one is refused, naming its size and the cap, without
being read.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

from qualify.core.capped import FileTooLarge, read_capped

#: The largest JUnit XML file read.
MAX_BYTES = 256 << 20

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
        data = read_capped(path, MAX_BYTES, "the JUnit XML")
    except FileNotFoundError:
        raise JUnitInvalid(f"{path}: the test command wrote no JUnit XML") from None
    except FileTooLarge as exc:
        raise JUnitInvalid(str(exc)) from None
    except (OSError, ValueError) as exc:
        raise JUnitInvalid(f"{path}: not valid JUnit XML: {exc}") from None
    try:
        root = ET.fromstring(data)
    except ET.ParseError as exc:
        try:
            root = ET.fromstring(_without_control_characters(data))
        except ET.ParseError:
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


#: C0 controls other than tab, line feed and carriage return, raw or as character references.
_CONTROL_BYTES = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f]")
_CONTROL_REFS = re.compile(rb"&#(?:[xX]0*(?:[0-8bBcCeEfF]|1[0-9a-fA-F])|0*(?:[0-8]|1[124-9]|2[0-9]|3[01]));")


def _without_control_characters(data: bytes) -> bytes:
    return _CONTROL_REFS.sub(b"", _CONTROL_BYTES.sub(b"", data))


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
