"""junit.xml for CI systems, from the report's view of a run: one testsuite per stage, one
testcase per check (each check judges the candidate, against pinned where it has it).

The first suite, `qualify`, holds the verdict as a case: a failure when the run did not
qualify, an error when it is INCOMPLETE, so a file of a run that did not qualify always holds a
failing or erroring case. FAIL is a failure and ERROR an error, each with the check's reason as
message and its findings as text; INCONCLUSIVE is a failure too (it blocks the gate as FAIL
does); SKIPPED, BLOCKED, NOT CONFIGURED, NOT APPLICABLE, NOT RUN, STALE and INTERRUPTED are
skipped with the reason; each check's verdict and
what it judged are properties of the stage's suite (the schema CI tools read allows them there
only). Written with the standard library's ElementTree, which escapes text and attributes;
what XML 1.0 cannot hold at all (a terminal's escape sequences, NUL and the other control
characters, lone surrogates, U+FFFE) is taken out first (`xml_text`), so the file is
well-formed whatever a command printed; so are bidirectional controls and zero-width characters,
which would make a name or a message read otherwise than it is.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any

from qualify.core.plaintext import clean
from qualify.records.result import SavedFinding
from qualify.report.fleet import FleetModel
from qualify.report.matrix import MatrixModel
from qualify.report.model import ReportModel
from qualify.report.views import CheckView, StageView

_FAILURE = {"FAIL", "INCONCLUSIVE"}
_ERROR = {"ERROR"}
_PASSED = {"PASS", "WARN"}

#: A terminal's control sequences (colours, cursor moves, titles): their meaning is lost in XML.
_TERMINAL = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
#: What XML 1.0 allows: tab, line feed, carriage return, and U+0020 up, less the surrogates
#: and U+FFFE/U+FFFF.
_NOT_XML = re.compile(r"[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_text(text: str) -> str:
    """`text` as XML 1.0 can hold it: a terminal's control sequences removed, any other
    character XML cannot hold written as its escape (`\\x00`, `\\x1b`, `\\ud800`), visible."""
    # Bidirectional controls and zero-width characters would reorder or hide text where a CI
    # system shows it: taken out (`plaintext.clean`); control characters are shown escaped.
    return _NOT_XML.sub(_escape, _TERMINAL.sub("", clean(text, controls=False)))


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def junit_xml(model: ReportModel) -> bytes:
    suites = ET.Element("testsuites", name=f"qualify run {model.run_id}")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    _verdict_suite(suites, model.verdict, model.verdict_line, totals)
    _stage_suites(suites, model, "", totals)
    return _document(suites, totals)


def _verdict_suite(suites: ET.Element, verdict: str, line: str, totals: dict[str, int]) -> None:
    """A suite `qualify` with one case, the verdict itself: it passes only when the run (set,
    fleet) QUALIFIED, fails when it did not, and is an error when it is INCOMPLETE or still
    running. Every stage that did not run is only `skipped` below, so without this case a CI
    reporter would show an INCOMPLETE run (exit 3) as green."""
    suite = ET.SubElement(suites, "testsuite", name="qualify")
    case = ET.SubElement(suite, "testcase", classname="qualify", name="verdict")
    counts = {"tests": 1, "failures": 0, "errors": 0, "skipped": 0}
    if verdict == "NOT QUALIFIED":
        counts["failures"] = 1
        ET.SubElement(case, "failure", message=line, type=verdict).text = line
    elif verdict != "QUALIFIED":
        counts["errors"] = 1
        ET.SubElement(case, "error", message=line, type=verdict).text = line
    for key, value in counts.items():
        suite.set(key, str(value))
        totals[key] += value


def set_junit_xml(model: MatrixModel) -> bytes:
    """A run set's junit.xml: each candidate's stages as suites named `<candidate>/<stage>`,
    and a suite `controls` with a case per control (a failure when it did not behave)."""
    suites = ET.Element("testsuites", name=f"qualify run set {model.run_id}")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    _verdict_suite(suites, model.verdict, f"{model.verdict_line}: {model.verdict_reason}", totals)
    controls = []
    for column, member in zip(model.columns, model.members, strict=True):
        if column.role == "candidate":
            _stage_suites(suites, member, f"{column.key}/", totals)
        else:
            controls.append(column)
    if controls:
        suite = ET.SubElement(suites, "testsuite", name="controls")
        counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        for column in controls:
            case = ET.SubElement(
                suite, "testcase", classname="qualify.controls", name=f"{column.key} ({column.role})"
            )
            counts["tests"] += 1
            if column.behaved is False:
                counts["failures"] += 1
                ET.SubElement(case, "failure", message=column.note, type="CONTROL").text = column.note
            elif column.behaved is None:
                counts["skipped"] += 1
                ET.SubElement(case, "skipped", message=column.note or "not judged")
        for key, value in counts.items():
            suite.set(key, str(value))
            totals[key] += value
    return _document(suites, totals)


def fleet_junit_xml(model: FleetModel) -> bytes:
    """A fleet's junit.xml: every host's stages for each candidate, as `<host>/<candidate>/<stage>`."""
    suites = ET.Element("testsuites", name=f"qualify fleet {model.run_id}")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    _verdict_suite(suites, model.verdict, f"{model.verdict}: {model.verdict_reason}", totals)
    for column, member in zip(model.columns, model.members, strict=True):
        _stage_suites(suites, member, f"{column.key}/", totals)
    return _document(suites, totals)


def _document(suites: ET.Element, totals: dict[str, int]) -> bytes:
    for key, value in totals.items():
        suites.set(key, str(value))
    # Every text and attribute, whichever field of the run it came from (a check's reason, a
    # finding holding a command's output, a test's name).
    for element in suites.iter():
        if element.text:
            element.text = xml_text(element.text)
        for name, text in list(element.attrib.items()):
            element.set(name, xml_text(text))
    ET.indent(suites)
    document: bytes = ET.tostring(suites, encoding="utf-8", xml_declaration=True)
    return document + b"\n"


def _stage_suites(suites: ET.Element, model: ReportModel, prefix: str, totals: dict[str, int]) -> None:
    for stage in model.stages:
        suite = ET.SubElement(suites, "testsuite", name=prefix + stage.name)
        # The schema CI tools read allows properties on the suite only, first: one per figure.
        ET.SubElement(suite, "properties")
        counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        if not stage.checks:
            _case(suite, stage, None, counts)
        for check in stage.checks:
            _case(suite, stage, check, counts)
        # A suite's time is its cases' at least: a run set's member only reads the bench's one
        # measurement (its stage's own time is that moment), and its case gives the time the
        # measurement took, which the suite must not contradict.
        cases = sum(_seconds(check) or 0 for check in stage.checks)
        suite.set("time", f"{max(stage.duration_s or 0, cases):.3f}")
        for key, value in counts.items():
            suite.set(key, str(value))
            totals[key] += value


def _case(suite: ET.Element, stage: StageView, check: CheckView | None, counts: dict[str, int]) -> None:
    verdict = check.verdict if check else stage.outcome
    reason = check.reason if check else stage.reason
    case = ET.SubElement(
        suite,
        "testcase",
        classname=f"qualify.{stage.name}",
        name=f"{check.name} ({check.kind})" if check else stage.name,
        time=f"{_seconds(check) or 0:.3f}",
    )
    counts["tests"] += 1
    properties = suite.find("properties")
    assert properties is not None
    prefix = check.name if check else stage.name
    _property(properties, f"{prefix}.verdict", verdict)
    if check is not None:
        for index, item in enumerate(_judged(check), start=1):
            _property(properties, f"{prefix}.judged.{index}", item)
        if check.ungated:
            _property(properties, f"{prefix}.ungated", "true")
    if verdict in _PASSED:
        return
    text = "\n".join(f"{f.verdict} {f.role or ''}: {f.message}" for f in _findings(check))
    if verdict in _FAILURE:
        counts["failures"] += 1
        ET.SubElement(case, "failure", message=reason, type=verdict).text = text or reason
    elif verdict in _ERROR:
        counts["errors"] += 1
        ET.SubElement(case, "error", message=reason, type=verdict).text = text or reason
    else:
        counts["skipped"] += 1
        ET.SubElement(case, "skipped", message=f"{verdict}: {reason}")


def _seconds(check: CheckView | None) -> float | None:
    """A check's time: the run set's one measurement it read, when it read one (its own time is
    then only the judging), else its own."""
    if check is None:
        return None
    if check.shared is not None and check.shared.duration_s is not None:
        return check.shared.duration_s
    return check.duration_s


def _property(parent: ET.Element, name: str, value: Any) -> None:
    ET.SubElement(parent, "property", name=name, value=str(value))


def _findings(check: CheckView | None) -> list[SavedFinding]:
    if check is None:
        return []
    return [f for f in check.findings if f.verdict in ("FAIL", "ERROR", "INCONCLUSIVE")]


def _judged(check: CheckView) -> list[str]:
    return [str(item) for item in check.judged]
