"""A run's own report shows the remedy `qualify remedy` left beside it: summary.md carries its
table, report.html opens the compile stage with it, report.json holds it; a remedy file that
does not read is said, never fatal; and every value of it is escaped, since it is a file of the
runs folder, not sealed with the run.

The remedy is judged here from the recorded ROCm run's own tables (tests/remedy/remedy_data.py):
a unit that reproduces pinned's kernels of the file with the most failures stands in for a
variant's build, as in test_judge.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from remedy_data import recorded_check, unit_like

from qualify.checks.remedyreport import REPORT, folder_of
from qualify.core.remedies import RemedySpec
from qualify.core.runstore import RunDir, write_json
from qualify.remedy.drive import Remedy
from qualify.remedy.failing import failing_sources
from qualify.remedy.judge import judge_variant
from qualify.remedy.report import document
from qualify.report.render import render


def remedy_of(where: Path, variant: str = "true16-off") -> tuple[Path, Remedy]:
    check = recorded_check(where)
    _, failing = failing_sources(check)
    spec = RemedySpec(variant, ".#remedy-true16-off", "-Xclang -target-feature -Xclang -real-true16", None)
    found = Remedy(check, failing, {variant: spec})
    found.outcomes[variant] = judge_variant(check, {"worst.cu": unit_like(check, "pinned")})
    found.problems[variant] = {f.source_file: "no unit" for f in failing[1:3]}
    found.seconds[variant] = 41.0
    return check.run, found


def test_the_runs_report_carries_the_remedy_beside_it(tmp_path: Path) -> None:
    run, found = remedy_of(tmp_path)
    said = document(found)
    folder_of(run).mkdir()
    write_json(folder_of(run) / REPORT, said.to_json())
    files = render(RunDir(run))
    summary = files.markdown.read_text()
    worst = next(o for o in said.variants["true16-off"].sources if o.source_file == "worst.cu")
    assert "### Remedies for 20-compile/kernel-resources" in summary
    assert f"| worst.cu | {worst.failing_before} of {worst.kernels} | {worst.recovered} of" in summary
    assert "not built" in summary and summary.count("\n| ") > 10
    page = files.html.read_text()
    assert "<h3>Remedies</h3>" in page and said.headline in page
    assert json.loads(files.json.read_text())["remedy"]["headline"] == said.headline


@pytest.mark.slow
def test_a_remedy_file_that_does_not_read_is_said_and_the_report_is_written(tmp_path: Path) -> None:
    run, found = remedy_of(tmp_path)
    folder_of(run).mkdir()
    (folder_of(run) / REPORT).write_text('{"version": 1, "run": 7}')
    summary = render(RunDir(run)).markdown.read_text()
    assert "remedy-report.json does not read" in summary


@pytest.mark.parametrize(
    "name", ["<script>alert(1)</script>.cu", "[x](https://evil.example).cu", "@owner.cu"]
)
def test_a_hostile_source_name_is_shown_as_its_characters(tmp_path: Path, name: str) -> None:
    run, found = remedy_of(tmp_path)
    said = document(found).to_json()
    said["failing"][0]["source_file"] = name
    folder_of(run).mkdir()
    write_json(folder_of(run) / REPORT, said)
    files = render(RunDir(run))
    assert name not in files.markdown.read_text()  # no link, mention or tag in the comment
    assert "<script>" not in files.html.read_text()
