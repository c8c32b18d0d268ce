"""`qualify merge`: several hosts' runs of one revision in one fleet report.

The hosts stand in for GPU machines that cannot exist here: each is a project folder on this
machine with the same plan, run with its own `--host-label`. Where a host's GPU matters, its
arms are real AMDGPU code objects compiled by clang-19 for the target that host would have
(gfx1151 for a Strix Halo, gfx942 for an MI300): the same kernel source spills on one target and
not on the other, as the compiler decides. The command checks read a variable the host project
sets, the way a real host's driver or firmware would make a stage pass on one host and fail on
another.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tarfile
import textwrap
import xml.etree.ElementTree as ET
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import PY, Project, command_stage, qualify_proc
from test_report import ARTIFACTS, needs_browser, open_in_browser
from typer.testing import CliRunner

from qualify.cli import app

runner = CliRunner()
KERNELS = Path(__file__).resolve().parent.parent / "compile" / "kernels"


def host_project(project: Callable[..., Project], fail_serving: bool, extra_vars: str = "") -> Project:
    """A host's checkout: the same plan everywhere; `broken` is what this host's stack does."""
    p = project(
        textwrap.dedent(
            f"""
            inherit_env = []
            [arms.pinned]
            installable = ".#default"
            [arms.cand]
            installable = ".#cand"
            [vars]
            broken = "{"serving" if fail_serving else "none"}"
            {extra_vars}
            """
        )
    )
    stages = ("build", "compile", "numerics", "serving", "soak", "bench", "distribution")
    for index, name in enumerate(stages, start=1):
        p.stage(
            f"{index}0-{name}.toml",
            command_stage(
                name,
                f'{PY} -c \'import sys; sys.exit("{{broken}}" == "{name}" and "{{role}}" == "candidate")\'',
            ),
        )
    return p


def run_on(p: Project, label: str) -> Path:
    done = qualify_proc("run", "--candidate", "cand", "--host-label", label, "--project", str(p.root))
    assert done.returncode in (0, 1, 3), done.stdout + done.stderr
    return max(p.run_dirs(), key=lambda r: r.stat().st_mtime)


def merge(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, ["merge", *args])
    # --json: the document alone on stdout (messages go to stderr).
    return result.exit_code, result.stdout if "--json" in args else result.output


def test_a_stage_failing_on_one_host_fails_the_fleet_and_is_called_out(
    project: Callable[..., Project], tmp_path: Path
) -> None:
    strix = run_on(host_project(project, fail_serving=False), "strix-halo-3")
    mi300 = run_on(host_project(project, fail_serving=True), "mi300-runner")
    out = tmp_path / "fleet"
    code, output = merge(str(strix), str(mi300), "--out", str(out), "--json")
    assert code == 1, output
    document = json.loads(output[output.index("{") :])
    assert document["verdict"] == "NOT QUALIFIED"
    assert [(h["host"], h["verdict"]) for h in document["hosts"]] == [
        ("strix-halo-3", "QUALIFIED"),
        ("mi300-runner", "NOT QUALIFIED"),
    ]
    assert "cand serving: passes on strix-halo-3, not on mi300-runner (FAIL)" in document["differences"]
    # The hosts' runs are copied in, so the report's links work wherever the folder goes.
    assert (out / "hosts" / "strix-halo-3" / "run.json").is_file()
    html = (out / "report.html").read_text()
    assert 'href="hosts/mi300-runner/report.html#stage-serving"' in html
    summary = (out / "summary.md").read_text()
    assert "| stage | strix-halo-3 | mi300-runner |" in summary
    assert "| serving | **PASS** | **FAIL** |" in summary
    assert "not paired" in summary  # what a merged report does not prove
    suites = {s.get("name"): s for s in ET.parse(out / "junit.xml").getroot()}
    assert suites["mi300-runner/cand/serving"].get("failures") == "1"
    assert suites["strix-halo-3/cand/serving"].get("failures") == "0"
    # show and runs read the merged report; report re-renders it from the folder alone.
    result = runner.invoke(app, ["show", str(out), "--project", str(tmp_path / "proj")])
    assert result.exit_code == 0 and "mi300-runner" in result.output and "differs" in result.output
    (out / "summary.md").unlink()
    result = runner.invoke(app, ["report", str(out), "--project", str(tmp_path / "proj")])
    assert result.exit_code == 0 and (out / "summary.md").is_file()


#: What GitHub Actions sets in every job: the run's page is built from these.
CI_RUN = {
    "GITHUB_SERVER_URL": "https://github.com",
    "GITHUB_REPOSITORY": "owner/engine",
    "GITHUB_RUN_ID": "4242",
}


def links_in(markdown_text: str) -> list[str]:
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark").parse(markdown_text)
    inline = [c for t in tokens for c in (t.children or [])]
    return [str(c.attrs["href"]) for c in inline if c.type == "link_open"]


@pytest.mark.slow
def test_the_fleet_summary_links_the_ci_run_and_says_each_host_s_controls(
    project: Callable[..., Project], tmp_path: Path
) -> None:
    """Before: the fleet's summary (the pull request's comment and the step summary) and a run
    set's summary did not link the CI run whose artifacts hold the reports, and said nothing of
    each host's controls. Each host here runs the pinned arm as a positive control; on the host
    whose serving stage fails for every candidate role, the control fails too: it did not behave."""
    controls = '\n[controls]\npositive = ["pinned"]'
    strix = run_on(host_project(project, fail_serving=False, extra_vars=controls), "strix-halo-3")
    mi300 = run_on(host_project(project, fail_serving=True, extra_vars=controls), "mi300-runner")
    out = tmp_path / "fleet"
    step_summary = tmp_path / "step-summary.md"
    result = runner.invoke(
        app,
        ["merge", str(strix), str(mi300), "--out", str(out)],
        env={**CI_RUN, "GITHUB_STEP_SUMMARY": str(step_summary)},
    )
    assert result.exit_code == 1, result.output
    summary = (out / "summary.md").read_text()
    run_page = "https://github.com/owner/engine/actions/runs/4242"
    assert links_in(summary) == [run_page]
    assert links_in(step_summary.read_text()) == [run_page]
    lines = summary.splitlines()
    assert "- strix-halo-3: controls behaved: the positive control pinned passed every stage" in lines
    assert (
        "- mi300-runner: controls did NOT behave: the gate could not tell: the positive control "
        "pinned got serving FAIL"
    ) in lines
    # A run set's own summary links the run too; without the variables, its folder.
    from qualify.core.runstore import RunDir
    from qualify.report.matrix import build_set_model
    from qualify.report.render import SummaryLinks, render_summary

    model = build_set_model(RunDir(strix))
    linked = render_summary("set.md.j2", model, strix, SummaryLinks.from_environ(CI_RUN))
    assert links_in(linked) == [run_page]
    unlinked = render_summary("set.md.j2", model, strix, SummaryLinks())
    assert links_in(unlinked) == [] and f"the run set's folder `{strix.name}`" in unlinked


@pytest.mark.parametrize(
    ("changed", "linked"),
    [
        ({}, True),
        ({"GITHUB_SERVER_URL": "http://ghe.internal:8080"}, True),  # an Enterprise Server's own
        ({"GITHUB_SERVER_URL": "javascript://github.com"}, False),
        ({"GITHUB_SERVER_URL": "https://github.com/x)"}, False),
        ({"GITHUB_REPOSITORY": "owner"}, False),
        ({"GITHUB_REPOSITORY": "owner/x)](https://elsewhere"}, False),
        ({"GITHUB_RUN_ID": "42a"}, False),
        ({"GITHUB_RUN_ID": ""}, False),
    ],
)
def test_the_ci_run_s_address_is_taken_only_in_the_shape_github_gives_it(
    changed: dict[str, str], linked: bool
) -> None:
    """The variables come from the environment: a value of another shape gives no link at all."""
    from qualify.report.render import SummaryLinks

    environ = {**CI_RUN, **changed}
    found = SummaryLinks.from_environ(environ).ci_run
    if linked:
        server = environ["GITHUB_SERVER_URL"]
        assert found == f"{server}/owner/engine/actions/runs/4242"
    else:
        assert found is None


@pytest.mark.slow
def test_runs_of_another_plan_are_refused_unless_allowed(
    project: Callable[..., Project], tmp_path: Path
) -> None:
    one = host_project(project, fail_serving=False)
    other = host_project(project, fail_serving=False)
    first = run_on(one, "a")
    (other.root / "stages" / "20-compile.toml").write_text(
        (other.root / "stages" / "20-compile.toml").read_text() + "timeout = 77\n"
    )
    second = run_on(other, "b")
    out = tmp_path / "fleet"
    code, output = merge(str(first), str(second), "--out", str(out))
    flat = " ".join(output.split())
    assert code == 4, output
    assert "qualify different things" in flat and "plan: a " in flat and ", b " in flat, flat
    assert "--allow-mixed" in flat and not out.exists()
    code, output = merge(str(first), str(second), "--out", str(out), "--allow-mixed")
    assert code == 0, output
    assert "Merged although they differ" in (out / "summary.md").read_text()


@pytest.mark.slow
def test_archives_merge_like_directories(project: Callable[..., Project], tmp_path: Path) -> None:
    p = host_project(project, fail_serving=False)
    first, second = run_on(p, "gfx1151-box"), run_on(p, "gfx1151-box")
    tgz = tmp_path / "first.tgz"
    with tarfile.open(tgz, "w:gz") as archive:
        archive.add(first, arcname=first.name)
    zipped = tmp_path / "second.zip"
    with zipfile.ZipFile(zipped, "w") as archive:
        for path in second.rglob("*"):
            archive.write(path, Path(second.name) / path.relative_to(second))
    out = tmp_path / "fleet"
    code, output = merge(str(tgz), str(zipped), "--out", str(out))
    assert code == 0, output
    # Two runs of one host label: both kept, the second named apart.
    assert sorted(p.name for p in (out / "hosts").iterdir()) == ["gfx1151-box", "gfx1151-box-2"]
    code, output = merge(str(tmp_path / "nothing.tgz"), "--out", str(tmp_path / "x"))
    assert code == 4 and "nothing.tgz" in output
    # --out that holds something else is never overwritten.
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "keep.txt").write_text("mine")
    code, output = merge(str(tgz), "--out", str(tmp_path / "busy"))
    assert code == 4 and "not a fleet report" in output and (tmp_path / "busy" / "keep.txt").is_file()


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("clang-19") is None, reason="needs clang-19 (AMDGPU code objects)")
def test_a_kernel_spilling_on_one_target_only_is_called_out(
    project: Callable[..., Project], tmp_path: Path
) -> None:
    def code_objects(target: str, name: str, *flags: str) -> Path:
        tree = tmp_path / f"{target}-{name}" / "lib"
        tree.mkdir(parents=True)
        subprocess.run(
            ["clang-19", "-x", "cl", "-cl-std=CL2.0", "--target=amdgcn-amd-amdhsa", "-O3", "-nogpulib",
             f"-mcpu={target}", *flags, str(KERNELS / "resources.cl"), "-o", str(tree / "kernels.hsaco")],
            check=True,
        )  # fmt: skip
        return tree.parent

    runs = []
    for label, target in (("strix-halo", "gfx1151"), ("mi300", "gfx942")):
        pinned, cand = code_objects(target, "pinned"), code_objects(target, "cand", "-DACC_WAVES=16")
        p = project(
            f'[arms.pinned]\ninstallable = ".#default"\nvars = {{ tree = "{pinned}" }}\n'
            f'[arms.cand]\ninstallable = ".#cand"\nvars = {{ tree = "{cand}" }}\n'
        )
        p.stage(
            "20-compile.toml", '[[check]]\nkind = "kernel-resources"\nname = "kernels"\nroot = "{tree}"\n'
        )
        runs.append(run_on(p, label))
    out = tmp_path / "fleet"
    code, output = merge(*map(str, runs), "--out", str(out), "--json")
    document = json.loads(output[output.index("{") :])
    assert "cand: kernel acc_spill spills on strix-halo only" in document["differences"], document
    model = json.loads((out / "report.json").read_text())
    rows = {r[0]: r[1:] for r in model["spills"]["cand"]["rows"]}
    assert rows["acc_spill"] == ["spills (gfx1151)", "no spill (gfx942)"]


@pytest.mark.slow
@needs_browser
def test_the_fleet_report_loads_in_a_browser_offline(project: Callable[..., Project], tmp_path: Path) -> None:
    """The merged report in headless chromium: no errors, nothing fetched, the hosts shown, and
    every cell's link leads to a host's own report that exists in the folder."""
    runs = [run_on(host_project(project, fail_serving=i == 1), f"host-{i}") for i in range(2)]
    out = tmp_path / "fleet"
    code, output = merge(*map(str, runs), "--out", str(out))
    assert code == 1, output
    seen = open_in_browser(out / "report.html", ARTIFACTS / "report-fleet.png")
    assert seen["errors"] == [] and seen["requests"] == [(out / "report.html").as_uri()]
    assert "host-0" in seen["text"] and "host-1" in seen["text"] and "NOT QUALIFIED" in seen["text"]
    links = re.findall(r'href="(hosts/[^"#]+)', (out / "report.html").read_text())
    assert links and all((out / link).is_file() for link in links)
