"""Render a run's report: report.html (self-contained), summary.md and report.json."""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from qualify.core.provenance import describe_gpu
from qualify.core.resources import data_dir
from qualify.core.runstore import RunDir, write_atomic
from qualify.report.charts import render_svg
from qualify.report.fleet import FleetModel, fleet_model
from qualify.report.junit import fleet_junit_xml, junit_xml, set_junit_xml
from qualify.report.matrix import MatrixModel, build_set_model
from qualify.report.model import ReportModel, build_model

VERDICT_CLASS = {
    "QUALIFIED": "pass",
    "NOT QUALIFIED": "fail",
    "INCOMPLETE": "incomplete",
    "PASS": "pass",
    "WARN": "warn",
    "INCONCLUSIVE": "inconclusive",
    "FAIL": "fail",
    "ERROR": "error",
    "SKIPPED": "skipped",
    "BLOCKED": "blocked",
    "NOT CONFIGURED": "notconfigured",
    "NOT RUN": "notrun",
    "INTERRUPTED": "error",
    "STALE": "incomplete",
    "RUNNING": "notrun",
}


@dataclass(frozen=True)
class ReportFiles:
    html: Path
    markdown: Path
    json: Path
    junit: Path


def md_cell(value: object) -> str:
    """A value made safe for one GitHub-flavoured Markdown table cell.

    Engine output can contain pipes, newlines and HTML; none of it may break the table or
    render as markup in the pull request.
    """
    text = "" if value is None else str(value)
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = text.replace("|", "\\|").replace("\r", "").replace("\n", "<br>")
    return text.replace("`", "\\`")


def _environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(str(data_dir("reports"))),
        autoescape=select_autoescape(enabled_extensions=("html", "html.j2"), default=False),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["md"] = md_cell
    env.filters["gpu"] = describe_gpu
    env.filters["vclass"] = lambda v: VERDICT_CLASS.get(str(v), "notrun")
    drawn = itertools.count()  # one number per chart in the page keeps SVG ids unique

    def chart(data: dict[str, Any]) -> Markup:
        try:
            return Markup(render_svg(data, next(drawn)))  # matplotlib escapes its text
        except (ValueError, KeyError, TypeError) as exc:
            return Markup("<p class='muted'>chart not drawn: {}</p>").format(exc)

    env.filters["chart"] = chart
    return env


def render(run: RunDir) -> ReportFiles:
    kind = run.read().get("kind")
    if kind == "set":
        return render_set(run)
    if kind == "fleet":
        return render_fleet(run)
    model = build_model(run)
    return _write(run, "report.html.j2", "summary.md.j2", model, junit_xml(model))


def render_set(run: RunDir) -> ReportFiles:
    """A run set's report: every member's own report, then the set's matrix over them."""
    for member in run.read().get("members", []):
        if (run.path / member["label"] / "run.json").is_file():
            render(RunDir(run.path / member["label"]))
    model = build_set_model(run)
    return _write(run, "set.html.j2", "set.md.j2", model, set_junit_xml(model))


def render_fleet(run: RunDir) -> ReportFiles:
    """A merged fleet report, from its folder alone (the hosts' runs keep their own reports)."""
    model = fleet_model(run.path)
    return _write(run, "fleet.html.j2", "fleet.md.j2", model, fleet_junit_xml(model))


def _write(
    run: RunDir, html: str, markdown: str, model: ReportModel | MatrixModel | FleetModel, junit: bytes
) -> ReportFiles:
    """The four files of a report, each written atomically."""
    env = _environment()
    css = (data_dir("reports") / "style.css").read_text(encoding="utf-8")
    files = ReportFiles(
        run.path / "report.html", run.path / "summary.md", run.path / "report.json", run.path / "junit.xml"
    )
    write_atomic(files.html, env.get_template(html).render(m=model, css=css).encode("utf-8"))
    write_atomic(files.junit, junit)
    write_atomic(files.markdown, env.get_template(markdown).render(m=model).encode("utf-8"))
    write_atomic(files.json, (json.dumps(model.as_json(), indent=2, default=str) + "\n").encode())
    return files
