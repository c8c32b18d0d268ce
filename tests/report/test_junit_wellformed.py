"""junit.xml stays well-formed whatever a command prints (a terminal's colours and titles, NUL,
vertical tab, lone surrogates), and JUnit written by a test tool that let such characters
through is still read. Parsed back with the standard library's expat-based parser, which
refuses any file that is not well-formed XML 1.0."""

from __future__ import annotations

import dataclasses
import json
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import PY, Project, qualify_proc

from qualify.core.runstore import RunDir
from qualify.records.result import SavedFinding
from qualify.report.junit import junit_xml, set_junit_xml, xml_text
from qualify.report.matrix import Column, MatrixModel
from qualify.report.model import build_model

#: What the candidate prints before it fails: colour, a window title, NUL, vertical tab.
NOISY = (
    "import sys; sys.stdout.write('\\x1b[31mred alert\\x1b[0m\\n\\x1b]0;pwned\\x07title\\n"
    "nul:\\x00: vt:\\x0b: bell:\\x07:\\n'); sys.exit(1 if sys.argv[1] == 'candidate' else 0)"
)


@pytest.fixture
def noisy_run(project: Callable[..., Project]) -> Path:
    p = project()
    p.script("noisy.py", NOISY)
    p.stage(
        "20-compile.toml",
        f"""
        name = "compile"
        [[check]]
        kind = "command"
        name = "noisy"
        run = "{PY} {p.root / "noisy.py"} {{role}}"
        """,
    )
    done = qualify_proc("run", "--candidate", "cand", "--project", str(p.root))
    assert done.returncode == 1, done.stdout + done.stderr
    [run] = p.run_dirs()
    return run


def check_failures(root: ET.Element) -> list[ET.Element]:
    """The failures of checks (the suite `qualify` holds the run's verdict as a case of its own)."""
    return [f for s in root.iter("testsuite") if s.get("name") != "qualify" for f in s.iter("failure")]


def test_junit_of_a_command_printing_control_characters_parses(noisy_run: Path) -> None:
    root = ET.parse(noisy_run / "junit.xml").getroot()
    [failure] = check_failures(root)
    text = failure.text or ""
    assert "red alert" in text and "title" in text  # what was said is kept ...
    assert "\x1b" not in text and "pwned" not in text  # ... a terminal's sequences are not
    assert "nul:\\x00: vt:\\x0b: bell:\\x07:" in text  # the rest shows as escapes


def test_lone_surrogates_in_any_field_are_escaped(noisy_run: Path) -> None:
    """A run folder's JSON may hold lone surrogates (`"\\ud800"` is valid JSON): a check's
    reason, a finding, a stage's name. Each of the writers' documents still parses."""
    model = build_model(RunDir(noisy_run))
    index, stage = next((i, s) for i, s in enumerate(model.stages) if s.checks)
    hostile = "half \ud800 pair \udfff nul \x00 esc \x1b[1m end \ufffe"
    check = dataclasses.replace(
        stage.checks[0], reason=hostile, findings=[SavedFinding(verdict="FAIL", message=hostile, role="x")]
    )
    stage = dataclasses.replace(stage, name=f"compile{hostile}", checks=[check, *stage.checks[1:]])
    model = dataclasses.replace(model, stages=[*model.stages[:index], stage, *model.stages[index + 1 :]])
    root = ET.fromstring(junit_xml(model))
    [failure] = check_failures(root)
    assert failure.get("message") == "half \\ud800 pair \\udfff nul \\x00 esc  end \\ufffe"
    assert "\\ud800" in (failure.text or "")
    assert any("\\ud800" in (s.get("name") or "") for s in root.iter("testsuite"))


@pytest.mark.parametrize(
    ("text", "kept"),
    [("plain ünïcödé 😀\ttab\nline", "plain ünïcödé 😀\ttab\nline"),
     ("\x1b[38;5;196mc\x1b[0m \x1b[2K\x1b[1A", "c "), ("\x1f\x7f\ud83d", "\\x1f\x7f\\ud83d")],
)  # fmt: skip
def test_xml_text(text: str, kept: str) -> None:
    assert xml_text(text) == kept
    ET.fromstring(f"<a>{xml_text(text)}</a>".encode())


def test_a_set_junit_with_a_hostile_control_note_parses(noisy_run: Path) -> None:
    """The run set's writer goes through the same cleaning (a control's note is text)."""
    member = build_model(RunDir(noisy_run))
    control = Column(
        "neg\x1b[31m", "neg", "negative control", "cand", "PASS", False, "did not fail \x00\ud800", ""
    )
    matrix = MatrixModel(
        1, "0", "set", "s", "complete", "NOT QUALIFIED", "", "", None, None, {}, {}, {}, [], [], [control], {},
        None, [member],
    )  # fmt: skip
    root = ET.fromstring(set_junit_xml(matrix))
    [failure] = [f for f in root.iter("failure") if f.get("type") == "CONTROL"]
    assert failure.get("message") == "did not fail \\x00\\ud800"


WRITE_NOISY_JUNIT = """
import sys
out, failing = sys.argv[1], sys.argv[2]
cases = "".join(
    f"<testcase classname='ops' name='{name}'>"
    + ("<failure message='boom'/>" if name == failing else "")
    + "<system-out>\\x1b[32mOK\\x1b[0m \\x00 &#27;[1m &#x1b; &#0;</system-out></testcase>"
    for name in ("rope", "quant")
)
open(out, "w").write(f"<?xml version='1.0' encoding='UTF-8'?><testsuites><testsuite name='s'>{cases}</testsuite></testsuites>")
sys.exit(8 if failing != "none" else 0)
"""


def test_junit_a_test_tool_wrote_with_control_characters_is_read(project: Callable[..., Project]) -> None:
    """Raw ESC and NUL bytes and `&#27;` references in a test's captured output (as a tool that
    does not filter them writes them): the outcomes are read, the newly failing test named."""
    p = project(
        """
[arms.pinned]
installable = ".#default"
vars = { failing = "none" }
[arms.cand]
installable = ".#cand"
vars = { failing = "quant" }
"""
    )
    p.script("noisy_junit.py", WRITE_NOISY_JUNIT)
    p.stage(
        "20-compile.toml",
        f"""
        name = "compile"
        [[check]]
        kind = "tests"
        name = "ops"
        run = "{PY} {p.root / "noisy_junit.py"} {{out_file}} {{failing}}"
        """,
    )
    done = qualify_proc("run", "--candidate", "cand", "--project", str(p.root))
    [run] = p.run_dirs()
    result = json.loads((run / "20-compile" / "ops" / "result.json").read_text())
    assert result["verdict"] == "FAIL", (result["reason"], done.stdout)
    assert "quant" in result["reason"] and "not valid JUnit XML" not in result["reason"]
