"""`qualify bisect --gate STAGE/CHECK/METRIC`: one metric of a `command` check against its
limit, on real projects (every step a real qualification run; see test_bisect_command.py for
what stands in for the build stage and why). The figure per step, bisect.md's text chart and
bisect.html's SVG chart come from the steps' saved results."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import Project
from test_bisect_command import bisect, bisect_folder, probed, saved, series_project

#: Arm `level` i measures speed 100 - 3i (three samples around it) and another metric; with
#: `drop` "yes" it reports no speed at all.
METRIC = """\
import json, sys
level, out, drop = int(sys.argv[1]), sys.argv[2], sys.argv[3]
speed = 100 - 3 * level
metrics = [{"name": "other", "unit": "u", "higher_is_better": True, "samples": [1.0]}]
if drop != "yes":
    metrics.append({"name": "speed", "unit": "tok/s", "higher_is_better": True,
                    "samples": [speed - 0.5, speed, speed + 0.5]})
with open(out, "w") as handle:
    json.dump({"schema_version": 1, "metrics": metrics}, handle)
"""


def metric_project(
    make: Callable[..., Project], arms: int, floor: float, drop: tuple[int, ...] = ()
) -> Project:
    """series_project's arms and stages, its gate a command check of metrics with `min_speed`."""
    p = series_project(make, arms=arms)
    toml = p.root / "qualify.toml"
    text = toml.read_text().replace('broken = "no"', 'broken = "no"\ndrop = "no"')
    for i in drop:
        text = text.replace(f"level = {i}", f'level = {i}, drop = "yes"')
    toml.write_text(text)
    p.script("metric.py", METRIC)
    p.stage(
        "20-compile.toml",
        'name = "compile"\n[[check]]\nkind = "command"\nname = "speed"\nmetrics = true\n'
        "run = '''{py} {project}/metric.py {level} {out_file} {drop}'''\n"
        f"limits = {{ min_speed = {floor} }}\n",
    )
    return p


def test_a_metric_gate_flips_where_the_metric_crosses_its_limit(project: Callable[..., Project]) -> None:
    """s0..s3 measure 100, 97, 94, 91 (within min_speed 90), s4..s6 88, 85, 82 (beyond): the flip
    is s4, every probe keeps its figure, and bisect.md shows it per step with the flip marked."""
    p = metric_project(project, arms=7, floor=90)
    result = bisect(p, "move", "--gate", "compile/speed/speed", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    document = json.loads(result.stdout)
    assert (document["answer"]["good"], document["answer"]["bad"]) == (3, 4)
    assert document["answer"]["line"].startswith("FOUND: first bad: s4 (step 4), last good: s3 (step 3)")
    assert "compile/speed/speed FAIL" in document["answer"]["line"]
    for row in document["steps"]:
        if row["arm"] in probed(document):
            assert row["figure"] == {"candidate": 100 - 3 * row["step"], "pinned": 100}, row
        else:
            assert row["figure"] is None
    # The check as a whole holds both metrics; the gate's verdict is speed's alone.
    assert document["steps"][3]["verdict"] == "PASS" and "speed" in document["steps"][3]["reason"]
    table = (bisect_folder(p) / "bisect.md").read_text()
    assert "| figure | series |" in table
    [flip] = [line for line in table.splitlines() if line.startswith("| 4 |")]
    assert "88 (pinned 100)" in flip and "← flip" in flip
    [good] = [line for line in table.splitlines() if line.startswith("| 3 |")]
    assert "91 (pinned 100)" in good and "← flip" not in good
    # The bars follow the figures: the good end's (the largest) is the longest.
    widths = {
        line.split("|")[1].strip(): len(re.sub(r"[^█▏▎▍▌▋▊▉]", "", line))
        for line in table.splitlines()
        if line.startswith("| ") and line.split("|")[1].strip().isdigit()
    }
    assert widths["0"] > widths["3"] > widths["4"] > 0 and widths["1"] == 0


@pytest.mark.slow
def test_the_html_report_charts_every_probed_step(project: Callable[..., Project]) -> None:
    p = metric_project(project, arms=7, floor=90)
    result = bisect(p, "move", "--gate", "compile/speed/speed")
    assert result.returncode == 0, result.stdout + result.stderr
    page = (bisect_folder(p) / "bisect.html").read_text()
    [label] = re.findall(r'<svg role="img" aria-label="([^"]*)"', page)
    steps = probed(saved(p))
    for index, name in ((int(n[1:]), n) for n in steps):
        assert f"step {index} {name}: " in label
    assert "s1" not in steps and "step 1 s1" not in label  # never probed: not charted
    assert "flip: s4" in page  # the flip's mark, drawn as the chart's text


@pytest.mark.slow
def test_an_unknown_metric_is_refused_before_anything_runs(project: Callable[..., Project]) -> None:
    p = metric_project(project, arms=3, floor=90)
    result = bisect(p, "move", "--gate", "compile/speed/sped")
    assert result.returncode == 4, result.stdout + result.stderr
    assert "no limit on a metric 'sped'" in result.stderr and 'did you mean "speed"' in result.stderr
    assert not p.runs.exists()
    # A metric the check reports but no limit judges has no outcome to give: refused as well.
    other = bisect(p, "move", "--gate", "compile/speed/other")
    assert other.returncode == 4 and "metrics its limits judge: speed" in other.stderr


@pytest.mark.slow
def test_a_step_missing_the_metric_is_undecided_with_the_reason(project: Callable[..., Project]) -> None:
    """s1 reports no speed: the check FAILs on it, yet the metric is neither within nor beyond
    its limit there, so the step is undecided and the flip a range around it."""
    p = metric_project(project, arms=3, floor=95, drop=(1,))
    result = bisect(p, "move", "--gate", "compile/speed/speed", "--retries", "0")
    assert result.returncode == 3, result.stdout + result.stderr
    document = saved(p)
    assert document["answer"]["finding"] == "range" and document["answer"]["between"] == [1]
    row = document["steps"][1]
    assert row["outcome"] == "undecided" and row["verdict"] == "MISSING"
    assert "reported no metric 'speed'" in row["reason"]
    assert row["figure"] == {"candidate": None, "pinned": 100}
    assert document["steps"][2]["outcome"] == "bad" and document["steps"][2]["figure"]["candidate"] == 94


#: The AMDGPU kernels tests/compile builds (OpenCL, header-less: no ROCm needed).
RESOURCES = Path(__file__).parent.parent / "compile" / "kernels" / "resources.cl"
CL = ["-x", "cl", "-cl-std=CL2.0", "--target=amdgcn-amd-amdhsa", "-O3", "-nogpulib", "-mcpu=gfx1100"]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("clang-19") is None, reason="needs clang-19")
def test_a_kernel_resources_gate_lists_the_kernels_that_changed_at_the_flip(
    project: Callable[..., Project], tmp_path: Path
) -> None:
    """Two real gfx1100 code objects of one source: `base`, and `waves16`, where a waves-per-EU
    request caps acc_spill's VGPRs so that it spills (how tests/compile makes them differ).
    Arms s0, s1 hold `base`, s2, s3 `waves16`: the flip is s2, each probe keeps the counts that
    decide it, and bisect.md lists acc_spill with the figures that changed."""
    trees = {}
    for name, flags in (("base", []), ("waves16", ["-DACC_WAVES=16"])):
        (tmp_path / name / "lib").mkdir(parents=True)
        out = tmp_path / name / "lib" / "kernels.hsaco"
        subprocess.run(["clang-19", *CL, *flags, str(RESOURCES), "-o", str(out)], check=True)
        trees[name] = tmp_path / name
    config = ['pinned = "s0"']
    for i, tree in enumerate(("base", "base", "waves16", "waves16")):
        config += [f"[arms.s{i}]", f'installable = ".#s{i}"', f'vars = {{ tree = "{trees[tree]}" }}']
    config += ["[series.move]", 'arms = ["s0", "s1", "s2", "s3"]']
    p = project("\n".join(config) + "\n")
    p.stage(
        "20-compile.toml",
        'name = "compile"\n[[check]]\nkind = "kernel-resources"\nname = "kernels"\n'
        'root = "{tree}"\nhost_patterns = []\n',
    )
    result = bisect(p, "move", "--gate", "compile/kernels", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    document = json.loads(result.stdout)
    assert (document["answer"]["good"], document["answer"]["bad"]) == (1, 2)
    good, bad = document["steps"][1]["figure"], document["steps"][2]["figure"]
    assert good["kernels spilling"] == 0 and good["kernels failing"] == 0
    assert bad["kernels spilling"] >= 1 and bad["kernels failing"] >= 1
    # The cap on VGPRs raises acc_spill's occupancy: no kernel loses any.
    assert bad["kernels losing occupancy"] == 0
    [spilled] = [line for line in document["changed_kernels"] if "acc_spill" in line]
    assert "vgpr_spill_count" in spilled
    # The unchanged kernels (vadd, lds_reduce) are not listed.
    assert not any("vadd" in line or "lds_reduce" in line for line in document["changed_kernels"])
    table = (bisect_folder(p) / "bisect.md").read_text()
    assert "## Kernels changed from s1 (last good) to s2 (first bad)" in table
    assert "acc_spill" in table.split("## Kernels changed")[1]
