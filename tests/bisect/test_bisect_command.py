"""`qualify bisect` over a series of arms in qualify.toml, on real projects: every step a real
qualification run through the engine (real subprocesses, containment, records), its outcome
derived from the run folder it wrote.

What stands in: the stage named "build" is a `command` check, not a nix build; it fails for
an arm marked `broken`, as a toolchain that cannot build the engine would. A nix build of each
step would make every test minutes long, and the search only sees the build stage's verdict."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import PY, Project, qualify_proc

#: The gate: FAIL at or above `threshold`, else the arm's `samples` as metrics judged on a
#: margin against pinned (samples straddling it make the check INCONCLUSIVE). With a file
#: `hold-<level>` in the project it writes its pid to `held.pid` and waits for a signal first.
GATE = """\
import json, os, sys, time
level, threshold, out, samples = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
project = os.path.dirname(os.path.abspath(__file__))
if os.path.exists(os.path.join(project, f"hold-{level}")) and sys.argv[5] == "candidate":
    with open(os.path.join(project, "held.pid"), "w") as handle:
        handle.write(str(os.getpid()))
    time.sleep(300)
if level >= threshold:
    sys.exit(1)
name, direction, values = samples.split(":")
metric = {"name": name, "unit": "u", "higher_is_better": True, "samples": [float(v) for v in values.split(",")]}
with open(out, "w") as handle:
    json.dump({"schema_version": 1, "metrics": [metric]}, handle)
"""

STEADY = "speed:higher:99,100,101"
STRADDLE = "speed:higher:90,96,99"  # against 100: across the 5 % margin, undecidable


def series_project(
    make: Callable[..., Project],
    arms: int = 7,
    threshold: int = 4,
    broken: tuple[int, ...] = (),
    straddle: tuple[int, ...] = (),
) -> Project:
    """Arms s0..s{arms-1}, arm i at `level` i; `[series.move]` lists them in order."""
    config = ['pinned = "s0"', "[vars]", f'samples = "{STEADY}"', 'broken = "no"']
    for i in range(arms):
        extra = ', broken = "yes"' if i in broken else ""
        extra += f', samples = "{STRADDLE}"' if i in straddle else ""
        config += [f"[arms.s{i}]", f'installable = ".#s{i}"', f"vars = {{ level = {i}{extra} }}"]
    config += ["[series.move]", "arms = [" + ", ".join(f'"s{i}"' for i in range(arms)) + "]"]
    p = make("\n".join(config) + "\n")
    p.script("gate.py", GATE)
    p.stage(
        "10-build.toml",
        'name = "build"\n[[check]]\nkind = "command"\nname = "make"\n'
        "run = '''{py} -c \"import sys; sys.exit('{broken}' == 'yes')\"'''\n",
    )
    p.stage(
        "20-compile.toml",
        'name = "compile"\n[[check]]\nkind = "command"\nname = "speed"\nmetrics = true\n'
        f"run = '''{{py}} {{project}}/gate.py {{level}} {threshold} {{out_file}} {{samples}} {{role}}'''\n"
        "limits = { speed_margin = 0.05 }\n",
    )
    # Past the gate: a bisect never needs it, so it must never run.
    p.stage(
        "30-numerics.toml",
        'name = "numerics"\n[[check]]\nkind = "command"\nname = "later"\n'
        "run = '''{py} -c \"open('{project}/numerics-ran', 'a').write('x')\"'''\n",
    )
    return p


def bisect(p: Project, *args: str) -> subprocess.CompletedProcess[str]:
    return qualify_proc("bisect", *args, "--project", str(p.root))


def bisect_folder(p: Project) -> Path:
    (folder,) = [f for f in p.runs.iterdir() if (f / "bisect.json").is_file()]
    return folder


def saved(p: Project) -> dict:
    return json.loads((bisect_folder(p) / "bisect.json").read_text())


def probed(document: dict) -> list[str]:
    return [probe["step"] for probe in document["probes"]]


def attempts(p: Project, index: int, arm: str) -> list[Path]:
    step = bisect_folder(p) / "steps" / f"{index:02d}-{arm}"
    return sorted(r for r in step.iterdir() if (r / "run.json").is_file()) if step.is_dir() else []


def test_the_flip_is_found_at_the_first_failing_arm(project: Callable[..., Project]) -> None:
    p = series_project(project, arms=7, threshold=4)
    result = bisect(p, "move", "--gate", "compile", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    document = json.loads(result.stdout)
    assert document["answer"]["finding"] == "found"
    assert (document["answer"]["good"], document["answer"]["bad"]) == (3, 4)
    line = document["answer"]["line"]
    assert line.startswith("FOUND: first bad: s4 (step 4), last good: s3 (step 3): compile FAIL")
    assert line in result.stderr
    # Halving: the ends, then the midpoint 3 and 4, never the steps the search left out.
    assert probed(document) == ["s0", "s6", "s3", "s4"]
    assert attempts(p, 1, "s1") == [] and len(attempts(p, 4, "s4")) == 1
    # Each step ran only as far as its gate: the stage past it never started, and the step's
    # run ended complete (its plan narrowed to the gate's stages), not stopped half-way.
    assert not (p.root / "numerics-ran").exists()
    [good] = attempts(p, 3, "s3")
    assert json.loads((good / "run.json").read_text())["status"] == "complete"
    # Each probed step's run has its own report, as any run has.
    for index, arm in ((0, "s0"), (3, "s3"), (4, "s4"), (6, "s6")):
        [run] = attempts(p, index, arm)
        assert (run / "report.html").is_file() and (run / "summary.md").is_file(), run
    table = (bisect_folder(p) / "bisect.md").read_text()
    assert "| 4 | `s4` | bad |" in table and "| 1 | `s1` | not probed |" in table
    assert json.loads((bisect_folder(p) / "bisect.json").read_text())["answer"] == document["answer"]
    # The bisect's folder is listed beside the runs, and `show` prints its summary.
    listed = json.loads(qualify_proc("runs", "--json", "--project", str(p.root)).stdout)
    [entry] = [e for e in listed if e.get("kind") == "bisect"]
    assert (entry["run_id"], entry["status"], entry["verdict"]) == (
        bisect_folder(p).name,
        "answered",
        "FOUND",
    )
    assert entry["candidate"] == "bisect: s0 … s6 (7 steps)" and entry["line"] == line
    shown = qualify_proc("show", bisect_folder(p).name, "--project", str(p.root))
    assert shown.returncode == 0 and "| 4 | `s4` | bad |" in shown.stdout, shown.stdout + shown.stderr
    again = qualify_proc("show", str(bisect_folder(p)), "--json", "--project", str(p.root))
    assert json.loads(again.stdout)["answer"] == document["answer"]


@pytest.mark.slow
def test_a_step_that_does_not_build_is_skipped_and_stepped_around(project: Callable[..., Project]) -> None:
    p = series_project(project, arms=7, threshold=5, broken=(3,))
    result = bisect(p, "move", "--gate", "compile")
    assert result.returncode == 0, result.stdout + result.stderr
    document = saved(p)
    rows = {row["arm"]: row for row in document["steps"]}
    assert rows["s3"]["outcome"] == "skip" and rows["s3"]["verdict"] == "build FAIL"
    assert probed(document).count("s3") == 1  # never built again
    assert (document["answer"]["good"], document["answer"]["bad"]) == (4, 5)
    assert "FOUND: first bad: s5 (step 5), last good: s4 (step 4)" in result.stdout


@pytest.mark.slow
def test_an_undecided_step_is_retried_then_the_answer_is_a_range(project: Callable[..., Project]) -> None:
    p = series_project(project, arms=7, threshold=4, straddle=(3,))
    result = bisect(p, "move", "--gate", "compile/speed", "--retries", "1")
    assert result.returncode == 3, result.stdout + result.stderr
    document = saved(p)
    assert probed(document).count("s3") == 2  # the first attempt and one retry
    assert {p["outcome"] for p in document["probes"] if p["step"] == "s3"} == {"undecided"}
    assert document["answer"]["finding"] == "range"
    assert (document["answer"]["good"], document["answer"]["bad"]) == (2, 4)
    assert document["answer"]["between"] == [3]
    assert "RANGE:" in result.stdout and "s3 (undecided)" in result.stdout
    assert document["steps"][3]["verdict"] == "INCONCLUSIVE"


@pytest.mark.slow
def test_an_interrupted_bisect_resumes_with_the_same_answer(project: Callable[..., Project]) -> None:
    p = series_project(project, arms=7, threshold=4)
    (p.root / "hold-3").write_text("")  # step 3, the first midpoint, waits to be interrupted
    proc = subprocess.Popen(
        [PY, "-m", "qualify", "bisect", "move", "--gate", "compile", "--project", str(p.root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    held = p.root / "held.pid"
    deadline = time.monotonic() + 120
    while not (held.exists() and held.read_text().strip()):
        assert time.monotonic() < deadline and proc.poll() is None, "step 3 never started"
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, out
    folder = bisect_folder(p)
    assert f"--run {folder.name}" in out
    before = saved(p)
    assert [(x["step"], x["outcome"]) for x in before["probes"]] == [
        ("s0", "good"),
        ("s6", "bad"),
        ("s3", None),
    ]

    (p.root / "hold-3").unlink()
    result = bisect(p, "move", "--gate", "compile", "--run", folder.name)
    assert result.returncode == 0, result.stdout + result.stderr
    after = saved(p)
    assert "first bad: s4 (step 4), last good: s3 (step 3)" in after["answer"]["line"]
    assert after["probes"][:2] == before["probes"][:2]  # the decided ends kept as they were
    assert len(attempts(p, 0, "s0")) == 1 and len(attempts(p, 6, "s6")) == 1  # not run again
    assert len(attempts(p, 3, "s3")) == 2  # the stopped attempt kept apart from the new one
    assert [x["attempt"] for x in after["probes"] if x["step"] == "s3"] == [1, 2]


def test_a_series_naming_an_unknown_arm_is_refused_before_anything_runs(
    project: Callable[..., Project],
) -> None:
    p = series_project(project, arms=3)
    toml = p.root / "qualify.toml"
    toml.write_text(toml.read_text().replace('arms = ["s0", "s1", "s2"]', 'arms = ["s0", "s1x", "s2"]'))
    result = bisect(p, "move", "--gate", "compile")
    assert result.returncode == 4, result.stdout + result.stderr
    assert "qualify.toml" in result.stderr and "series.move.arms" in result.stderr
    assert "did you mean" in result.stderr and "s1" in result.stderr
    assert not p.runs.exists()


def test_a_series_of_one_arm_is_refused(project: Callable[..., Project]) -> None:
    p = series_project(project, arms=3)
    toml = p.root / "qualify.toml"
    toml.write_text(toml.read_text().replace('arms = ["s0", "s1", "s2"]', 'arms = ["s0"]'))
    result = bisect(p, "move", "--gate", "compile")
    assert result.returncode == 4, result.stdout + result.stderr
    assert (
        "qualify.toml" in result.stderr and "series.move" in result.stderr and "at least 2" in result.stderr
    )
    assert not p.runs.exists()


@pytest.mark.slow
def test_an_unknown_gate_is_refused_with_the_closest_stage(project: Callable[..., Project]) -> None:
    p = series_project(project, arms=3)
    result = bisect(p, "move", "--gate", "compil")
    assert result.returncode == 4, result.stdout + result.stderr
    assert "did you mean" in result.stderr and "compile" in result.stderr
    assert not p.runs.exists()
    unknown = bisect(p, "move", "--gate", "compile/sped")
    assert unknown.returncode == 4 and "did you mean" in unknown.stderr and "speed" in unknown.stderr


@pytest.mark.slow
def test_no_gate_runs_only_the_build_and_the_gate_s_stage(project: Callable[..., Project]) -> None:
    """--no-gate: a stage between the build and the gate (here one that always fails) neither
    runs nor blocks the gate; the step's plan holds the build and the gate's stage alone."""
    p = series_project(project, arms=5, threshold=3)
    p.stage(
        "15-lint.toml",
        'name = "lint"\n[[check]]\nkind = "command"\nname = "lint"\n'
        "run = '''{py} -c \"open('{project}/lint-ran', 'a').write('x'); raise SystemExit(1)\"'''\n",
    )
    result = bisect(p, "move", "--gate", "compile", "--no-gate", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    document = json.loads(result.stdout)
    assert (document["answer"]["good"], document["answer"]["bad"]) == (2, 3)
    assert not (p.root / "lint-ran").exists() and not (p.root / "numerics-ran").exists()
    [run] = attempts(p, 2, "s2")
    planned = [s["name"] for s in json.loads((run / "run.json").read_text())["plan"]["stages"]]
    assert planned == ["build", "compile"]


@pytest.mark.slow
def test_a_dirty_tree_or_an_unknown_profile_is_refused_before_a_folder_is_made(
    project: Callable[..., Project],
) -> None:
    """As `qualify run` does: a tracked file changed since the last commit means the steps
    would not come from one revision (exit 4, nothing made) unless --allow-dirty, which every
    step's run then records; a profile the plan does not define is refused the same way."""
    p = series_project(project, arms=3, threshold=2)
    git = ["git", "-c", "user.email=q@example.org", "-c", "user.name=q", "-C", str(p.root)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "plan"], check=True)
    (p.root / "gate.py").write_text((p.root / "gate.py").read_text() + "# changed\n")
    refused = bisect(p, "move", "--gate", "compile")
    assert refused.returncode == 4 and "uncommitted changes" in refused.stderr, refused.stderr
    assert "gate.py" in refused.stderr and not any(p.runs.glob("*/bisect.json"))
    unknown = bisect(p, "move", "--gate", "compile", "--allow-dirty", "--profile", "nosuch")
    assert unknown.returncode == 4 and "nosuch" in unknown.stderr and not any(p.runs.glob("*/bisect.json"))
    allowed = bisect(p, "move", "--gate", "compile", "--allow-dirty", "--json")
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr
    assert json.loads(allowed.stdout)["answer"]["bad"] == 2
    [run] = attempts(p, 2, "s2")
    assert json.loads((run / "run.json").read_text())["options"]["allow_dirty"] is True
