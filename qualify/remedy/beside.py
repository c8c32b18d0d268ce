"""The remedy of a run, where `qualify remedy` left it beside the run (`remedy-<RUN>/` in the
runs folder), for the run's own report: its summary.md carries the remedy's table, its
report.html shows it first in the compile stage. The file is read through its type, and every
value is escaped where it is shown; it is not part of the run's seal, and the report says so."""

from __future__ import annotations

from pathlib import Path

from qualify.core.errors import QualifyError
from qualify.remedy.paths import REPORT, folder_of
from qualify.remedy.report import RemedyReport


def remedy_beside(run: Path) -> RemedyReport | str | None:
    """The remedy of the run, why it does not read, or None where there is none."""
    path = folder_of(run) / REPORT
    if not path.is_file():
        return None
    try:
        report = RemedyReport.read(path)
    except QualifyError as exc:
        return f"{path} does not read: {exc.message}"
    if report.run != run.name:
        return f"{path} is the remedy of run {report.run}, not of {run.name}"
    return report
