"""The report, rendered from run directories made by real stages and opened in a real browser.

The browser is Debian's chromium driven by Playwright (`executable_path`; no browser is
downloaded). The example runs are the session's real runs (gcc vs clang with --no-gate, and
A/A); the small runs here use `command` checks whose output is chosen to attack the report
(a planted `<script>`). Nothing stands in for qualify, the engine or the browser.
"""

from __future__ import annotations

import json
import re
import shutil
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import PY, REPO, Project, qualify_proc

from qualify.report.charts import downsample, render_svg

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
try:
    from playwright.sync_api import sync_playwright
except ImportError:  # pragma: no cover - the dev extra installs it
    sync_playwright = None  # type: ignore[assignment]
needs_browser = pytest.mark.skipif(
    CHROMIUM is None or sync_playwright is None,
    reason="needs Debian's chromium (apt-get install chromium) and the playwright package",
)
ARTIFACTS = REPO / "test-artifacts"
HELPERS = Path(__file__).resolve().parent.parent / "helpers"
MAX_HTML_BYTES = 2 * 1024 * 1024


def open_in_browser(html: Path, screenshot: Path | None = None) -> dict[str, Any]:
    """Load `html` in headless chromium; what it logged, fetched and shows."""
    assert sync_playwright is not None and CHROMIUM is not None
    errors: list[str] = []
    requests: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1100, "height": 900})
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("request", lambda r: requests.append(r.url))
            page.goto(html.as_uri(), wait_until="load")
            if screenshot is not None:
                screenshot.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(screenshot), full_page=True)
            return {
                "errors": errors,
                "requests": requests,
                "text": page.inner_text("body"),
                "ids": page.eval_on_selector_all("[id]", "els => els.map(e => e.id)"),
                "planted": page.evaluate("() => [window.__planted, document.querySelectorAll('img').length]"),
                "svgs": page.eval_on_selector_all(
                    "svg.chart", "els => els.map(e => e.getAttribute('aria-label'))"
                ),
            }
        finally:
            browser.close()


@pytest.mark.nix
@pytest.mark.example
@needs_browser
@pytest.mark.parametrize("which", ["clang19", "aa", "set"])
def test_example_reports_load_cleanly_offline(example_runs: dict, which: str) -> None:
    _code, run_dir, out = example_runs[which]
    html = run_dir / "report.html"
    assert html.stat().st_size < MAX_HTML_BYTES
    seen = open_in_browser(html, ARTIFACTS / f"report-{which}.png")
    assert seen["errors"] == []
    assert seen["requests"] == [html.as_uri()], "the report must not fetch anything"
    saved = json.loads((run_dir / "run.json").read_text())
    assert saved["verdict"] in seen["text"]
    if which == "set":
        # The set's page: the matrix, a section per member, every link to a member's report real.
        assert [f"member-{m['label']}" for m in saved["members"]] == [
            i for i in seen["ids"] if i.startswith("member-")
        ]
        assert "Stages × members" in seen["text"] and "Controls behaved" in seen["text"]
        links = re.findall(r'href="([^"#]+/report.html)', html.read_text())
        assert links and all((run_dir / link).is_file() for link in links)
        return
    for spec in saved["plan"]["stages"]:
        assert f"stage-{spec['name']}" in seen["ids"], spec["name"]
    for name in ("kernel-resources", "operator-tests", "What this does not prove", "Environment"):
        assert name in seen["text"], name
    model = json.loads((run_dir / "report.json").read_text())
    assert model["schema_version"] == 1 and model["run_id"] == run_dir.name


PLANTED = '<script>window.__planted=1</script><img src=x onerror="window.__planted=2">'


def test_engine_output_is_text_never_markup(project: Callable[..., Project], tmp_path: Path) -> None:
    p = project()
    script = tmp_path / "hostile.py"
    script.write_text(f"import sys\nprint({PLANTED!r})\nsys.exit(3)\n")
    p.stage(
        "20-compile.toml",
        textwrap.dedent(
            f"""
            [[check]]
            kind = "command"
            name = "hostile"
            run = "{PY} {script}"
            """
        ),
    )
    done = qualify_proc("run", "--candidate", "cand", "--project", str(p.root))
    assert done.returncode == 1, done.stdout + done.stderr
    (run_dir,) = p.run_dirs()
    html = (run_dir / "report.html").read_text()
    assert "<script>window.__planted" not in html and "&lt;script&gt;window.__planted" in html
    summary = (run_dir / "summary.md").read_text()
    assert "<script>" not in summary and "<img" not in summary  # at most escaped text
    if CHROMIUM is not None and sync_playwright is not None:
        seen = open_in_browser(run_dir / "report.html")
        assert seen["planted"] == [None, 0]  # no script ran, no image element was made
        assert "<script>window.__planted=1</script>" in seen["text"]  # shown as text


def _table_blocks(markdown: str) -> list[list[str]]:
    blocks: list[list[str]] = []
    current: list[str] = []
    for line in markdown.splitlines():
        if line.startswith("|"):
            current.append(line)
        elif current:
            blocks.append(current)
            current = []
    if current:
        blocks.append(current)
    return blocks


def _cells(row: str) -> int:
    return len(re.findall(r"(?<!\\)\|", row)) - 1


@pytest.mark.nix
@pytest.mark.example
@pytest.mark.parametrize("which", ["clang19", "aa", "set"])
def test_summary_is_github_flavoured_tables(example_runs: dict, which: str) -> None:
    from markdown_it import MarkdownIt

    _code, run_dir, _out = example_runs[which]
    markdown = (run_dir / "summary.md").read_text()
    blocks = _table_blocks(markdown)
    assert blocks, "the summary has tables"
    for block in blocks:
        assert re.fullmatch(r"\|(---\|)+", block[1]), block[:2]  # header, then the separator row
        assert {_cells(row) for row in block} == {_cells(block[0])}, block[0]
    tokens = MarkdownIt("commonmark").enable("table").parse(markdown)
    assert sum(t.type == "table_open" for t in tokens) == len(blocks)
    saved = json.loads((run_dir / "run.json").read_text())
    heading = next(line for line in markdown.splitlines() if line.startswith("## "))
    assert f"**{saved['verdict']}**" in heading


METRIC_STAGE = """
[[check]]
kind = "command"
name = "m"
run = "{py} %s {out_file} tps:higher:100,101,99"
metrics = true
limits = { min_tps = %s }
"""


def test_rejudge_re_decides_from_saved_data_with_the_current_limits(project: Callable[..., Project]) -> None:
    p = project()
    stage = p.stage("20-compile.toml", METRIC_STAGE % (HELPERS / "emit_metrics.py", "90"))
    first = qualify_proc("run", "--candidate", "cand", "--project", str(p.root))
    assert first.returncode == 3, first.stdout + first.stderr  # PASS, later stages not configured
    (run_dir,) = p.run_dirs()
    check = run_dir / "20-compile" / "m"
    assert json.loads((check / "result.json").read_text())["verdict"] == "PASS"
    measured = (check / "candidate" / "measurement.json").read_text()
    stage.write_text(stage.read_text().replace("min_tps = 90", "min_tps = 150"))
    again = qualify_proc("report", run_dir.name, "--rejudge", "--project", str(p.root))
    assert again.returncode == 0, again.stdout + again.stderr
    assert "1 check(s) changed" in again.stdout
    assert f"re-decided with the plan of {p.root}" in again.stdout  # whose limits decided
    result = json.loads((check / "result.json").read_text())
    assert result["verdict"] == "FAIL" and result["spec"]["limits"] == {"min_tps": 150}
    assert json.loads((check / "result.measured.json").read_text())["verdict"] == "PASS"
    assert (check / "candidate" / "measurement.json").read_text() == measured  # nothing re-measured
    saved = json.loads((run_dir / "run.json").read_text())
    assert saved["verdict"] == "NOT QUALIFIED" and saved["rejudged"][-1]["changed"][0]["after"] == "FAIL"
    assert json.loads((run_dir / "20-compile" / "stage.json").read_text())["verdict"] == "FAIL"
    assert "Re-decided" in (run_dir / "report.html").read_text()


def test_charts_follow_the_page_colour_and_keep_ids_apart() -> None:
    chart = {
        "title": "tg128",
        "kind": "dots",
        "alt": "tg128: pinned median 10.5 t/s, candidate 9.2 t/s",
        "data": {"tg128": {"pinned": [10, 11, 10.5], "candidate": [9, 9.5, 9.2]}},
        "y_label": "tokens/s",
    }
    first, second = render_svg(chart, 0), render_svg(chart, 1)
    assert first.startswith("<svg") and 'role="img"' in first and chart["alt"] in first
    assert "currentColor" in first and "#000000" not in first and "<?xml" not in first
    ids = set(re.findall(r'id="([^"]+)"', first))
    assert ids and not ids & set(re.findall(r'id="([^"]+)"', second))
    with pytest.raises(ValueError, match="unknown kind"):
        render_svg({**chart, "kind": "pie"}, 2)


def test_downsampling_keeps_every_spike() -> None:
    xs = list(range(100_000))
    ys = [0.0] * 100_000
    ys[12_345], ys[77_777] = 50.0, -7.0
    out_x, out_y = downsample(xs, ys, 2000)
    assert len(out_x) <= 2000 and max(out_y) == 50.0 and min(out_y) == -7.0
    assert out_x == sorted(out_x) and out_x[out_y.index(50.0)] == 12_345
