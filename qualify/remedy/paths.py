"""Where a remedy's files are: light on purpose, since the command line names them."""

from __future__ import annotations

from pathlib import Path

#: The remedy's answer, as a typed document (`qualify.remedy.report.RemedyReport`).
REPORT = "remedy-report.json"
#: The remedy in Markdown, for the pull request.
SUMMARY = "summary.md"


def folder_of(run: Path) -> Path:
    """Where `qualify remedy` keeps the remedy of the run in `run`: beside it, in the runs folder."""
    return run.parent / f"remedy-{run.name}"
