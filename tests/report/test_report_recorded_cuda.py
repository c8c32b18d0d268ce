"""The report of the recorded CUDA run (examples/llama-cpp-cuda/recorded/, an H200's real
measurements), re-decided from its saved data and rendered: what a reviewer reads first.

The headline leads with the reasons that decide the verdict (kernels that spill more and lose
occupancy before the ones missing), with counts that agree with the table; kernel names are
demangled (the mangled name on hover and in the JSON); the header names the toolchain change and
the source; only failed stages are open; the bench chart's line is the table's Δ; the summary is
a small fraction of GitHub's comment limit. The page is opened in Debian's chromium when present.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from recorded_runs import Rejudge, unpack
from test_report import CHROMIUM, sync_playwright

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "llama-cpp-cuda"
ARCHIVE = EXAMPLE / "recorded" / "20261201-162842-cuda135.tar.xz"
RUN_NAME = ARCHIVE.name.removesuffix(".tar.xz")


@pytest.fixture(scope="module")
def rendered(rejudge_recorded: Rejudge, tmp_path_factory: pytest.TempPathFactory) -> Path:
    copy = unpack(ARCHIVE, tmp_path_factory.mktemp("recorded"))
    # No GITHUB_* variables: the summary names the run folder.
    return rejudge_recorded(EXAMPLE, copy, env={"PATH": "/usr/bin:/bin"})


def kernels(run: Path) -> dict:
    data = json.loads((run / "report.json").read_text())
    stage = next(s for s in data["stages"] if s["name"] == "compile")
    return next(c for c in stage["checks"] if c["name"] == "kernel-resources")


def test_the_headline_leads_with_the_reasons_that_decide_it(rendered: Path) -> None:
    summary = (rendered / "summary.md").read_text()
    lines = summary.splitlines()
    # Recorded before the default order had the distribution stage: its plan never configured it.
    assert (
        lines[0]
        == "## Toolchain qualification: **NOT QUALIFIED** — compile failed, distribution not configured"
    )
    reason = next(line for line in lines if line.startswith("- compile · kernel-resources: "))
    counts = next(t for t in kernels(rendered)["tables"] if t["title"] == "Kernels found and judged")
    failing = dict(zip(counts["columns"], counts["rows"][0], strict=True))["FAIL"]
    assert f"{failing} CUDA kernels fail: " in reason
    spill, occupancy, missing = (reason.index(w) for w in ("spill more", "lose occupancy", "missing from"))
    assert spill < occupancy < missing, reason
    assert "_Z" not in reason and "(+30 more)" not in reason


def test_no_reason_says_a_kernel_keeps_occupancy_it_lost(rendered: Path) -> None:
    changed = next(t for t in kernels(rendered)["tables"] if t["title"].startswith("CUDA kernels: changed"))
    why = [row[-1] for row in changed["rows"]]
    lost = [w for w in why if re.search(r"occupancy \d+ → \d+ warps/SM \(limited", w)]
    assert lost and not [w for w in lost if "keeps occupancy" in w]


def test_names_are_demangled_with_the_mangled_name_kept(rendered: Path) -> None:
    html = (rendered / "report.html").read_text()
    assert re.search(r'<span class="mangled" title="_Z\w+">flash_attn_ext_f16&lt;512, 512, ', html)
    changed = next(t for t in kernels(rendered)["tables"] if t["title"].startswith("CUDA kernels: changed"))
    assert all(str(row[2]).startswith("_Z") for row in changed["rows"])  # the JSON keeps the symbol


def test_the_header_names_the_toolchain_change_and_the_source(rendered: Path) -> None:
    summary = (rendered / "summary.md").read_text()
    html = (rendered / "report.html").read_text()
    for text in (summary, html):
        assert "CUDA 13.0.88 → 13.5.37" in text
        assert "source unknown" not in text and "flake narHash sha256-JcGju+AxE+pz" in text


def test_only_failed_stages_are_open_and_cards_say_things_once(rendered: Path) -> None:
    html = (rendered / "report.html").read_text()
    opened = re.findall(r'<details id="stage-(\w+)"[^>]* open>', html)
    assert opened == ["compile", "bench"]  # compile FAIL, bench INCONCLUSIVE (past the gate)
    assert len(re.findall(r"<details[^>]* open>", html)) <= 8
    assert html.count("Re-decided") == 1
    for text in (html, (rendered / "summary.md").read_text()):
        assert "check(s)" not in text and "(1 rows)" not in text


def test_the_bench_line_is_the_tables_delta_and_twin_curves_are_said(rendered: Path) -> None:
    data = json.loads((rendered / "report.json").read_text())
    bench = next(c for s in data["stages"] if s["name"] == "bench" for c in s["checks"])
    table = next(t for t in bench["tables"] if t["title"].startswith("Throughput"))
    delta = {row[0]: row[3] for row in table["rows"]}["pp512"]
    html = (rendered / "report.html").read_text()
    assert f"Δ {delta}" in html and "estimate (as in the table)" in html
    assert "The candidate curve is identical to pinned" in html and "candidate (= pinned)" in html


def test_the_summary_is_far_under_the_comment_limit_and_points_to_the_report(rendered: Path) -> None:
    summary = (rendered / "summary.md").read_text()
    assert len(summary) < 10_000, len(summary)  # 62 768 characters when it held the tables
    assert f"`report.html` in the run folder `{RUN_NAME}`" in summary


@pytest.mark.skipif(CHROMIUM is None or sync_playwright is None, reason="needs chromium and playwright")
def test_role_names_never_break_inside_a_word(rendered: Path) -> None:
    assert sync_playwright is not None and CHROMIUM is not None
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1100, "height": 900})
            page.goto((rendered / "report.html").as_uri(), wait_until="load")
            # The lines a cell's text is laid out on: one rectangle per line.
            lines = page.eval_on_selector_all(
                "td",
                "els => els.filter(e => e.textContent.trim() === 'candidate' && e.offsetParent)"
                ".map(e => { const r = document.createRange(); r.selectNodeContents(e);"
                " return new Set([...r.getClientRects()].map(x => Math.round(x.top))).size; })",
            )
            height = page.evaluate("document.body.scrollHeight")
        finally:
            browser.close()
    assert lines, "the page shows role cells"
    assert set(lines) == {1}, lines  # "candi/date" was two
    assert height < 10_000, height  # 18 596 px with 19 of 30 sections open
