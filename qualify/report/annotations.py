"""A run's findings as GitHub Actions annotations: `::error` for FAIL and ERROR, `::warning` for
WARN and INCONCLUSIVE.

A WARN passes the job and an INCONCLUSIVE fails it (unless its stage turns it into WARN); either
way the reviewer sees why on the pull request without opening the report. A check that ERRORs
could not decide, most often because of how its stage file sets it up (a command, a path, a
limit): its annotation points at the check's `[[check]]` table in that file (`file=`, `line=`),
where the file is in the workspace. Values are escaped as GitHub documents for workflow
commands (`qualify.report.github`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

from qualify.core.errors import QualifyError
from qualify.core.runstore import RunDir
from qualify.core.tomlfile import locate, read_toml
from qualify.records.result import SavedFinding
from qualify.records.run import RunRecord
from qualify.report.fleet import FleetModel
from qualify.report.github import annotation_message, escape_property
from qualify.report.matrix import MatrixModel
from qualify.report.model import ReportModel
from qualify.report.views import CheckView

#: The verdicts annotated, and as what.
LEVEL = {"FAIL": "error", "ERROR": "error", "WARN": "warning", "INCONCLUSIVE": "warning"}


def stage_files(run: RunDir) -> dict[str, Path]:
    """Each stage's file, as the run's plan names it."""
    try:
        stages = RunRecord.load(run).stages
    except QualifyError:
        return {}
    return {s.name: Path(s.file) for s in stages if s.file}


def check_location(file: Path, check: str, workspace: str | None) -> str:
    """`file=…,line=…` for a check's `[[check]]` table, or "" when the file is not in the
    workspace (GitHub places annotations on the repository's files only)."""
    if not workspace or not file.is_absolute() or not file.is_relative_to(workspace):
        return ""
    where = f"file={escape_property(str(file.relative_to(workspace)))}"
    try:
        doc = read_toml(file)
    except QualifyError:
        return where
    tables = doc.data.get("check", [])
    index = next((i for i, t in enumerate(tables) if isinstance(t, dict) and t.get("name") == check), None)
    line = locate(doc.text, ("check", index)) if index is not None else None
    return where + (f",line={line}" if line else "")


def check_commands(
    model: ReportModel, files: Mapping[str, Path], workspace: str | None, member: str = ""
) -> Iterator[str]:
    """One command per finding of every check judged FAIL, ERROR, WARN or INCONCLUSIVE (a check
    without such findings: its reason); `member` names a run set's candidate or a fleet's host."""
    prefix = f"{member}/" if member else ""
    for stage in model.stages:
        for check in stage.checks:
            level = LEVEL.get(check.verdict)
            if level is None:
                continue
            title = escape_property(f"qualify {prefix}{stage.name}/{check.name}: {check.verdict}")
            where = ""
            if check.verdict == "ERROR" and stage.name in files:
                where = check_location(files[stage.name], check.name, workspace)
            properties = ",".join(p for p in (where, f"title={title}") if p)
            for message in _messages(check):
                yield f"::{level} {properties}::{annotation_message(message)}"


def _messages(check: CheckView) -> list[str]:
    own = [f for f in check.findings if f.verdict == check.verdict]
    return [_finding(f) for f in own] or [check.reason]


def _finding(finding: SavedFinding) -> str:
    return (f"{finding.role}: " if finding.role else "") + finding.message


def workflow_annotations(
    run: RunDir, model: ReportModel | MatrixModel | FleetModel, environ: Mapping[str, str]
) -> Iterator[str]:
    """Every annotation of a run, a run set (each candidate's, and a control that did not
    behave) or a fleet (each host's)."""
    workspace = environ.get("GITHUB_WORKSPACE")
    files = stage_files(run)
    if isinstance(model, FleetModel):
        for column, member in zip(model.columns, model.members, strict=True):
            yield from check_commands(member, {}, workspace, column.key)
    elif isinstance(model, MatrixModel):
        for column, member in zip(model.columns, model.members, strict=True):
            if column.role == "candidate":
                yield from check_commands(member, files, workspace, column.key)
            elif column.behaved is False:
                title = escape_property(f"qualify control {column.key}: did not behave")
                yield f"::error title={title}::{annotation_message(column.note)}"
    else:
        yield from check_commands(model, files, workspace)
