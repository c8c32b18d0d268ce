"""Render a run's report: report.html (self-contained), summary.md and report.json.

summary.md is what a pull request comment or a job's step summary shows: the verdict, the
reasons that decide it and the stages, never whole tables (those are in report.html). It is held
under `SUMMARY_CAP` characters, far below GitHub's 65 536-character comment limit: a summary that
would be longer is rendered again without its per-check details, and cut at a line if it is still
too long. Every value in it goes through `qualify.core.markdown.escape`. Every value report.html
and report.json show is first made plain (`qualify.core.plaintext.clean`): no bidirectional
control, zero-width or control character from a name or a command's output reaches them.
"""

from __future__ import annotations

import itertools
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from qualify.checks.figures import Chart
from qualify.core import markdown
from qualify.core.errors import RunStoreError
from qualify.core.plaintext import clean, clean_tree
from qualify.core.provenance import describe_gpu
from qualify.core.resources import data_dir
from qualify.core.runstore import RunDir, write_atomic
from qualify.core.symbols import display_name
from qualify.records.run import RunRecord
from qualify.report.charts import identical_series, render_svg
from qualify.report.fleet import FleetModel, fleet_model
from qualify.report.headline import plural, ran_under
from qualify.report.junit import fleet_junit_xml, junit_xml, set_junit_xml
from qualify.report.matrix import MatrixModel, build_set_model
from qualify.report.model import ReportModel, build_model
from qualify.report.rendered import RenderedVerdict
from qualify.report.views import failing_sources

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
    "UNREADABLE": "error",
    "RUNNING": "notrun",
}

if TYPE_CHECKING:
    from qualify.checks.remedyreport import RemedyReport


#: The most characters summary.md may have (GitHub refuses a comment past 65 536).
SUMMARY_CAP = 60_000
#: The source files a remedy lists in a run's summary.md (the rest are in its own summary).
REMEDY_FILES = 15
#: Per-check lines listed in summary.md, and the characters one line may take there.
SUMMARY_FINDINGS = 10
SUMMARY_LINE = 400


@dataclass(frozen=True)
class ReportFiles:
    html: Path
    markdown: Path
    json: Path
    junit: Path

    def verdict_line(self) -> str:
        """The verdict as every output's first line says it ("QUALIFIED — serving, soak not
        applicable: no server"), from the report.json just written."""
        try:
            said = RenderedVerdict.read(self.json)
        except RunStoreError:
            return ""
        return said.verdict_line or said.verdict


def md_cell(value: object) -> str:
    """A value made safe for GitHub-flavoured Markdown, in a table cell or anywhere else
    (`qualify.core.markdown.escape`: no block, link, image, mention or HTML from it)."""
    return markdown.escape(value)


@dataclass(frozen=True)
class SummaryLinks:
    """Where the full report is: the CI run's page (its artifacts hold report.html), when the
    environment names one; else only the run folder."""

    ci_run: str | None = None

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> SummaryLinks:
        """GitHub Actions' run page from GITHUB_SERVER_URL, GITHUB_REPOSITORY and GITHUB_RUN_ID,
        each checked against what GitHub sets (a value that could carry markup gives no link):
        the server an http(s) origin (a GitHub Enterprise Server may serve plain http), the
        repository owner/name, the run id digits."""
        server = environ.get("GITHUB_SERVER_URL", "")
        repository = environ.get("GITHUB_REPOSITORY", "")
        run_id = environ.get("GITHUB_RUN_ID", "")
        if (
            re.fullmatch(r"https?://[A-Za-z0-9.-]+(:[0-9]+)?", server)
            and re.fullmatch(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", repository)
            and re.fullmatch(r"[0-9]+", run_id)
        ):
            return cls(f"{server}/{repository}/actions/runs/{run_id}")
        return cls()


def _kernel_cell(value: object, hover: bool = True) -> Markup:
    """A kernel's name as a reviewer reads it, the name as compiled (mangled) on hover; without
    `hover` (the long tables of unchanged kernels) report.json keeps the mangled name."""
    name = "" if value is None else str(value)
    shown = display_name(name)
    if shown == name or not hover:
        return Markup("{}").format(shown)
    return Markup('<span class="mangled" title="{}">{}</span>').format(name, shown)


def _common_filters(env: Environment) -> None:
    env.filters["gpu"] = describe_gpu
    env.filters["vclass"] = lambda v: VERDICT_CLASS.get(str(v), "notrun")
    env.filters["plural"] = plural
    env.filters["ran_under"] = ran_under
    env.globals["SUMMARY_FINDINGS"] = SUMMARY_FINDINGS


def _markdown_environment() -> Environment:
    """Every `{{ … }}` is escaped by `markdown.escape` (its `finalize`); `code` makes a code span."""
    env = Environment(
        loader=FileSystemLoader(str(data_dir("reports"))),
        autoescape=False,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=markdown.escape,
        keep_trailing_newline=True,
    )
    _common_filters(env)
    env.filters["code"] = markdown.code
    env.filters["clip"] = _clip
    env.filters["kernel_name"] = display_name
    env.filters["failing_sources"] = failing_sources
    return env


def _clip(value: object, limit: int = SUMMARY_LINE) -> str:
    """At most `limit` characters of one line (before it is escaped, so no escape is cut)."""
    text = " ".join(str(value or "").split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _shown(value: Any) -> Any:
    """Every value a page prints (jinja's `finalize`), before it is escaped: its bidirectional
    controls, zero-width and control characters taken out (`plaintext.clean`), markup too (a
    kernel's cell quotes its name)."""
    if isinstance(value, Markup):
        return Markup(clean(str(value)))  # removing characters opens no tag
    if isinstance(value, str):
        return clean(value)
    return value


def _environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(str(data_dir("reports"))),
        autoescape=select_autoescape(enabled_extensions=("html", "html.j2"), default=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=_shown,
    )
    _common_filters(env)
    env.filters["kernel"] = _kernel_cell
    env.filters["identical"] = identical_series
    drawn = itertools.count()  # one number per chart in the page keeps SVG ids unique

    def chart(figure: Chart) -> Markup:
        try:
            return Markup(render_svg(figure, next(drawn)))  # matplotlib escapes its text
        except (ValueError, KeyError, TypeError) as exc:
            return Markup("<p class='muted'>chart not drawn: {}</p>").format(exc)

    env.filters["chart"] = chart
    return env


def render(run: RunDir) -> ReportFiles:
    # No report is written through a link inside the run folder (a member's, a host's).
    with run.writing():
        kind = RunRecord.load(run).kind
        if kind == "set":
            return render_set(run)
        if kind == "fleet":
            return render_fleet(run)
        model = build_model(run)
        from qualify.checks.remedyreport import remedy_beside  # only a run's own report shows one

        remedy = remedy_beside(run.path)
        return _write(run, "report.html.j2", "summary.md.j2", model, junit_xml(model), remedy)


def render_set(run: RunDir) -> ReportFiles:
    """A run set's report: every member's own report, then the set's matrix over them."""
    for member in RunRecord.load(run).members:
        if (run.path / member.label / "run.json").is_file():
            render(RunDir(run.path / member.label))
    model = build_set_model(run)
    return _write(run, "set.html.j2", "set.md.j2", model, set_junit_xml(model))


def render_fleet(run: RunDir) -> ReportFiles:
    """A merged fleet report, from its folder alone (the hosts' runs keep their own reports)."""
    model = fleet_model(run.path)
    return _write(run, "fleet.html.j2", "fleet.md.j2", model, fleet_junit_xml(model))


def _write(
    run: RunDir,
    html: str,
    summary: str,
    model: ReportModel | MatrixModel | FleetModel,
    junit: bytes,
    remedy: RemedyReport | str | None = None,
) -> ReportFiles:
    """The four files of a report, each written atomically; a run's own report with the remedy
    `qualify remedy` left beside it, or why it does not read."""
    env = _environment()
    css = (data_dir("reports") / "style.css").read_text(encoding="utf-8")
    files = ReportFiles(
        run.path / "report.html", run.path / "summary.md", run.path / "report.json", run.path / "junit.xml"
    )
    page = env.get_template(html).render(m=model, css=css, remedy=remedy)
    write_atomic(files.html, page.encode("utf-8"))
    write_atomic(files.junit, junit)
    text = render_summary(summary, model, run.path, SummaryLinks.from_environ(os.environ), remedy=remedy)
    write_atomic(files.markdown, text.encode("utf-8"))
    document = clean_tree(model.as_json())  # the same text as the pages show
    if remedy is not None:
        document["remedy"] = remedy if isinstance(remedy, str) else remedy.to_json()
    write_atomic(files.json, (json.dumps(document, indent=2, default=str) + "\n").encode())
    return files


def render_summary(
    template: str,
    model: ReportModel | MatrixModel | FleetModel,
    folder: Path,
    links: SummaryLinks,
    cap: int = SUMMARY_CAP,
    remedy: RemedyReport | str | None = None,
) -> str:
    """summary.md: in full, else without per-check details, else cut at a line; always under `cap`.
    A remedy beside the run is shown in either form, its source files cut to fit."""
    env = _markdown_environment()
    said: markdown.MdSafe | None = None
    if isinstance(remedy, str):
        said = markdown.MdSafe(markdown.escape(remedy))
    elif remedy is not None:
        from qualify.checks.remedyreport import markdown as remedy_markdown

        said = markdown.MdSafe(remedy_markdown(remedy, heading="###", listed=REMEDY_FILES))
    # The CI run's address was checked character by character (`SummaryLinks.from_environ`).
    where = {"ci_run": markdown.MdSafe(links.ci_run) if links.ci_run else None, "folder": folder.name}
    text = env.get_template(template).render(m=model, links=where, details=True, remedy=said)
    if len(text) <= cap:
        return text
    text = env.get_template(template).render(m=model, links=where, details=False, remedy=said)
    if len(text) <= cap:
        return text
    note = (
        "\n\n_The summary was cut here to stay under GitHub's comment limit: the rest is in report.html._\n"
    )
    cut = text.rfind("\n", 0, cap - len(note))
    return text[: max(cut, 0)] + note
