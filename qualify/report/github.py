"""A run's outcome where GitHub Actions shows it: the step summary and error annotations.

Only when the environment says so: `GITHUB_STEP_SUMMARY` names the file the Markdown summary is
appended to, and `GITHUB_ACTIONS=true` turns every FAIL or ERROR finding into an `::error`
workflow command on stdout. Values are escaped as GitHub documents for workflow commands: `%`,
CR and LF everywhere, and also `:` and `,` in properties such as the title; other control
characters, bidirectional controls and zero-width characters are taken out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from qualify.core.plaintext import clean
from qualify.report.fleet import FleetModel
from qualify.report.matrix import MatrixModel
from qualify.report.model import ReportModel


def escape_data(text: str) -> str:
    """A workflow command's message: `%`, CR and LF escaped as GitHub reads them back (`%25`,
    `%0D`, `%0A`); every other control character, a terminal's escape sequences, bidirectional
    controls and zero-width characters taken out (`plaintext.clean`), since the runner would
    show them as they are."""
    return clean(text, keep_cr=True).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


#: The most characters of one annotation's message: GitHub shows an annotation in the job's
#: summary and beside the pull request's files, where a finding of many kilobytes (a command's
#: output, a list of kernels) buries the others. The report keeps the whole finding.
MAX_MESSAGE = 1000


def annotation_message(text: str) -> str:
    """An annotation's message, escaped, cut to `MAX_MESSAGE` characters with a note that says
    how long it was and where the rest is."""
    if len(text) > MAX_MESSAGE:
        note = f" … (cut: {len(text):,} characters in all; the report has the whole finding)"
        text = text[: MAX_MESSAGE - len(note)].rstrip() + note
    return escape_data(text)


def escape_property(text: str) -> str:
    """A workflow command's property (`title=`, `file=`): as a message, and `:` and `,`, which
    end a property, escaped too (`%3A`, `%2C`)."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def error_commands(model: ReportModel, member: str = "") -> Iterator[str]:
    """`::error title=…::…` for every FAIL or ERROR finding (a check without findings: its reason);
    `member` names the candidate of a run set in each title."""
    where = f"{member}/" if member else ""
    for stage in model.stages:
        for check in stage.checks:
            if check.verdict not in ("FAIL", "ERROR"):
                continue
            bad = [f for f in check.findings if f.verdict in ("FAIL", "ERROR")]
            title = escape_property(f"qualify {where}{stage.name}/{check.name}: {check.verdict}")
            messages = [(f"{f.role}: " if f.role else "") + f.message for f in bad] or [check.reason]
            for message in messages:
                yield f"::error title={title}::{annotation_message(message)}"


def set_error_commands(model: MatrixModel) -> Iterator[str]:
    """A run set's annotations: each candidate's, and one per control that did not behave."""
    for column, member in zip(model.columns, model.members, strict=True):
        if column.role == "candidate":
            yield from error_commands(member, column.key)
        elif column.behaved is False:
            title = escape_property(f"qualify control {column.key}: did not behave")
            yield f"::error title={title}::{annotation_message(column.note)}"


def fleet_error_commands(model: FleetModel) -> Iterator[str]:
    """A fleet's annotations: every host's, its name in each title."""
    for column, member in zip(model.columns, model.members, strict=True):
        yield from error_commands(member, column.key)


def publish(
    model: ReportModel | MatrixModel | FleetModel,
    summary: Path,
    environ: Mapping[str, str],
    out: Callable[[str], None],
) -> None:
    """Append the summary to the step summary and print the annotations, where GitHub asks."""
    step_summary = environ.get("GITHUB_STEP_SUMMARY")
    if step_summary:
        with Path(step_summary).open("a", encoding="utf-8") as handle:
            handle.write(summary.read_text(encoding="utf-8") + "\n")
    if environ.get("GITHUB_ACTIONS") == "true":
        if isinstance(model, FleetModel):
            lines = fleet_error_commands(model)
        elif isinstance(model, MatrixModel):
            lines = set_error_commands(model)
        else:
            lines = error_commands(model)
        for line in lines:
            out(line)
