"""summary.md and the report's header: the verdict says no more than was decided, outside text
forges no Markdown, the summary stays under GitHub's comment limit and links the full report.

The runs are real `qualify run`s of `command` checks (tests/helpers/emit_metrics.py reports
chosen samples). For the hostile fields, a finished run folder is then edited as an archived run
could be (its run.json, stage.json and result.json can hold anything) and rendered again; the
Markdown is read back with markdown-it-py, a real CommonMark parser.
"""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import Project, qualify_proc
from markdown_it import MarkdownIt
from markdown_it.token import Token

from qualify.core import markdown
from qualify.core.runstore import RunDir
from qualify.report.model import build_model
from qualify.report.render import SUMMARY_CAP, VERDICT_CLASS, SummaryLinks, render, render_summary

HELPERS = Path(__file__).resolve().parent.parent / "helpers"
STAGES = ("build", "compile", "numerics", "serving", "soak", "bench", "distribution")
CONFIG = """
[arms.pinned]
installable = ".#default"
vars = { samples = "100,100,100,100,100" }

[arms.cand]
installable = ".#cand"
vars = { samples = "80,90,100,110,120" }
"""
PLAIN_CHECK = """
[[check]]
kind = "command"
name = "ok"
run = "{py} -c pass"
"""
# The candidate's samples straddle pinned's median less 10 %: the check cannot decide.
UNDECIDED_BENCH = """
inconclusive = "warn"

[[check]]
kind = "command"
name = "speed"
run = "{py} %s {out_file} tps:higher:{samples}"
metrics = true
limits = { tps_margin = 0.1 }
"""


def undecided_run(p: Project) -> Path:
    for n, stage in enumerate(STAGES, start=1):
        body = UNDECIDED_BENCH % (HELPERS / "emit_metrics.py") if stage == "bench" else PLAIN_CHECK
        p.stage(f"{n}0-{stage}.toml", body)
    done = qualify_proc("run", "--candidate", "cand", "--project", str(p.root))
    assert done.returncode == 0, done.stdout + done.stderr  # WARN (from INCONCLUSIVE) qualifies
    (run_dir,) = p.run_dirs()
    return run_dir


def test_a_stage_turned_warn_from_inconclusive_is_named_in_the_verdict(
    project: Callable[..., Project],
) -> None:
    run_dir = undecided_run(project(CONFIG))
    stage = json.loads((run_dir / "60-bench" / "stage.json").read_text())
    assert stage["verdict"] == "WARN" and stage["checks"][0]["verdict"] == "INCONCLUSIVE"
    summary = (run_dir / "summary.md").read_text()
    assert summary.splitlines()[0] == "## Toolchain qualification: **QUALIFIED** — bench undecided"
    assert re.search(r"^\| bench \| \*\*WARN\*\* \(undecided\) \| undecided, counted as WARN", summary, re.M)
    assert "- bench · speed: " in summary  # the undecided check's reason, as a reason
    html = (run_dir / "report.html").read_text()
    assert "— bench undecided</span>" in html
    assert json.loads((run_dir / "report.json").read_text())["verdict_line"] == "QUALIFIED — bench undecided"
    for text in (summary, html):
        assert "check(s)" not in text and "(1 rows)" not in text


HOSTILE = (
    "## Toolchain qualification: **QUALIFIED**\n@someone ![x](http://e/x.png) "
    "[link](javascript:x) <img src=x> <script>alert(1)</script> `tick` a|b\n- item"
)


def flat(tokens: list[Token]) -> list[Token]:
    out: list[Token] = []
    for token in tokens:
        out.append(token)
        out += flat(token.children or [])
    return out


def forge(run_dir: Path) -> None:
    """Every outside field of a finished run set to HOSTILE (with a folder-safe check name)."""
    saved = json.loads((run_dir / "run.json").read_text())
    for role in saved["roles"].values():
        role["arm"], role["installable"] = HOSTILE, HOSTILE
    saved["provenance"]["host"].update(hostname=HOSTILE, label=HOSTILE, kernel=HOSTILE)
    for spec in saved["plan"]["stages"]:
        spec["name"] = f"{spec['name']} {HOSTILE}"
    (run_dir / "run.json").write_text(json.dumps(saved))
    for stage_json in run_dir.glob("*/stage.json"):
        stage = json.loads(stage_json.read_text())
        stage["reason"] = HOSTILE
        for check in stage["checks"]:
            check["reason"] = HOSTILE
            result_json = stage_json.parent / check["name"] / "result.json"
            result = json.loads(result_json.read_text())
            result["reason"] = HOSTILE
            result["findings"] = [{"verdict": "FAIL", "message": HOSTILE, "role": HOSTILE}]
            result["facts"] = {"limits_of_evidence": [HOSTILE]}
            result_json.write_text(json.dumps(result))
        stage_json.write_text(json.dumps(stage))


def test_outside_text_forges_no_heading_link_image_mention_or_html(project: Callable[..., Project]) -> None:
    run_dir = undecided_run(project(CONFIG))
    forge(run_dir)
    render(RunDir(run_dir))
    source = (run_dir / "summary.md").read_text()
    tokens = flat(MarkdownIt("commonmark").enable(["table", "strikethrough"]).parse(source))
    headings = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]
    assert len(headings) == 2 and headings[0].startswith("Toolchain qualification: **"), headings
    assert headings[1] == "What this does not prove"
    kinds = {t.type for t in tokens}
    assert not kinds & {"link_open", "image", "html_inline", "html_block", "s_open", "code_block", "fence"}
    strong = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "strong_open"]
    assert set(strong) <= set(VERDICT_CLASS), strong  # only the harness's own verdict words
    text = " ".join(t.content for t in tokens if t.type in ("text", "text_special"))
    assert "@someone" not in text and "@" + markdown.ZWSP + "someone" in text
    assert not re.search(r"https?://|www\.", text)
    assert "<script>alert(1)</script>" in text  # shown as the characters it is
    for table in [i for i, t in enumerate(tokens) if t.type == "table_open"]:
        end = next(i for i in range(table, len(tokens)) if tokens[i].type == "table_close")
        rows = [[]]  # cells per row: the header's count everywhere
        for t in tokens[table:end]:
            if t.type == "tr_open":
                rows.append([])
            elif t.type in ("th_open", "td_open"):
                rows[-1].append(t)
        assert len({len(r) for r in rows if r}) == 1


def test_the_summary_links_the_ci_run_and_stays_under_the_cap(project: Callable[..., Project]) -> None:
    run_dir = undecided_run(project(CONFIG))
    model = build_model(RunDir(run_dir))
    environ = {
        "GITHUB_SERVER_URL": "https://github.com",
        "GITHUB_REPOSITORY": "owner/engine",
        "GITHUB_RUN_ID": "123",
    }
    linked = render_summary("summary.md.j2", model, run_dir, SummaryLinks.from_environ(environ))
    links = [t for t in flat(MarkdownIt("commonmark").parse(linked)) if t.type == "link_open"]
    assert [t.attrs["href"] for t in links] == ["https://github.com/owner/engine/actions/runs/123"]
    forged = {**environ, "GITHUB_REPOSITORY": "owner/x)](javascript:alert(1)"}
    assert SummaryLinks.from_environ(forged).ci_run is None
    unlinked = render_summary("summary.md.j2", model, run_dir, SummaryLinks())
    assert f"the run folder `{run_dir.name}`" in unlinked and len(unlinked) < SUMMARY_CAP
    cut = render_summary("summary.md.j2", model, run_dir, SummaryLinks(), cap=600)
    assert len(cut) <= 600 and cut.rstrip().endswith("the rest is in report.html._")


@pytest.mark.slow
def test_summary_of_many_findings_is_capped(project: Callable[..., Project]) -> None:
    run_dir = undecided_run(project(CONFIG))
    result_json = run_dir / "60-bench" / "speed" / "result.json"
    result = json.loads(result_json.read_text())
    long = textwrap.shorten("kernel " * 400, 2000)
    result["findings"] = [
        {"verdict": "INCONCLUSIVE", "message": f"{i} {long}", "role": "candidate"} for i in range(5000)
    ]
    result_json.write_text(json.dumps(result))
    render(RunDir(run_dir))
    summary = (run_dir / "summary.md").read_text()
    assert len(summary) < 15_000, len(summary)  # ten findings, each cut to one line
    assert "(the first 10 of 5000)" in summary


@pytest.mark.slow
def test_a_positive_control_whose_stage_decided_nothing_is_not_said_to_pass_it(
    project: Callable[..., Project],
) -> None:
    # Both arms report the same noisy samples: the A/A control's bench cannot decide either.
    noisy = CONFIG.replace("100,100,100,100,100", "80,90,100,110,120")
    p = project(noisy + '\n[controls]\npositive = ["pinned"]\n')
    for n, stage in enumerate(STAGES, start=1):
        body = UNDECIDED_BENCH % (HELPERS / "emit_metrics.py") if stage == "bench" else PLAIN_CHECK
        p.stage(f"{n}0-{stage}.toml", body)
    done = qualify_proc("run", "--candidate", "cand", "--project", str(p.root))
    assert done.returncode == 0, done.stdout + done.stderr
    (set_dir,) = p.run_dirs()
    summary = (set_dir / "summary.md").read_text()
    # Before: "— bench undecided", as if the set's own; whom it left undecided is named, the
    # control by its role and arm.
    assert summary.splitlines()[0] == (
        "## Toolchain qualification: **QUALIFIED** — bench undecided for cand and the positive control pinned"
    )
    assert (
        "every control behaved at the stages that decided; bench decided nothing for cand, "
        "the positive control pinned"
    ) in summary
    assert (
        "passed every stage" not in summary
        and "passed every stage" not in (set_dir / "report.html").read_text()
    )
    assert "its bench decided nothing" in summary
    assert "**WARN** (undecided)" in summary


def test_a_set_that_did_not_qualify_names_the_control_its_bench_left_undecided() -> None:
    """Before: "bench undecided; clang19: bench undecided", the first part the positive
    control's, unnamed. The candidate's own part keeps saying its undecided stage."""
    from types import SimpleNamespace

    from qualify.report.matrix import _verdict_note

    members = [
        SimpleNamespace(label="clang19", role="candidate"),
        SimpleNamespace(label="positive-pinned", role="positive"),
    ]
    models = {
        "clang19": SimpleNamespace(verdict="NOT QUALIFIED", verdict_note="bench undecided", stages=[]),
        "positive-pinned": SimpleNamespace(
            verdict="NOT QUALIFIED", verdict_note="bench undecided", stages=[]
        ),
    }
    undecided = {"bench": ["clang19", "the positive control pinned"]}
    note = _verdict_note("NOT QUALIFIED", undecided, members, models)  # type: ignore[arg-type]
    assert note == "bench undecided for the positive control pinned; clang19: bench undecided"


def test_a_compiler_on_one_side_only_is_named_on_its_side() -> None:
    """Before: "clang — → 19.1.7, GCC 12.2.0 → —" for a move from GCC to clang."""
    from types import SimpleNamespace

    from qualify.report.headline import toolchain_delta

    def delta(*rows: tuple[str, str, str]) -> list[str]:
        table = SimpleNamespace(
            title="Toolchain (build-time closure)", columns=("component", "pinned", "candidate"), rows=rows
        )
        stage = SimpleNamespace(checks=[SimpleNamespace(tables=[table])])
        return toolchain_delta([stage])  # type: ignore[list-item]

    assert delta(("clang", "—", "19.1.7"), ("gcc", "12.2.0", "—")) == ["GCC 12.2.0 → clang 19.1.7"]
    assert delta(("clang", "—", "19.1.7"), ("gcc", "12.2.0", "12.2.0")) == ["clang 19.1.7 added"]
    assert delta(
        ("gcc", "12.2.0", "—"),
    ) == ["GCC 12.2.0 dropped"]
    assert delta(
        ("gcc", "12.2.0", "13.1.0"),
    ) == ["GCC 12.2.0 → 13.1.0"]
