"""Run sets: several candidates and the project's controls in one run, on real subprocesses.

The stages are `command` checks whose exit status depends on the arm ({arm}), and a `bench`
check whose units are a small Python script reporting throughput in qualify's metrics format:
the "bad" arm is 10 % slower, the "noisy" one has pinned's speed with 20 % noise (no run of
12 pairs can decide it), every other arm runs at the same speed with 0.2 % noise. They
stand in for real builds and engines (no nix here): what is under test is how a set binds,
gates, measures together and decides.
"""

from __future__ import annotations

import itertools
import json
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
from conftest import Project, command_stage
from typer.testing import CliRunner

from qualify.cli import app
from qualify.core.designs import block_order, williams_rows

runner = CliRunner()
STAGES = ("build", "compile", "numerics", "serving", "soak")

ARMS = """
[arms.pinned]
installable = ".#default"
[arms.cand]
installable = ".#cand"
[arms.cand2]
installable = ".#cand2"
[arms.bad]
installable = ".#bad"
[arms.noisy]
installable = ".#noisy"
"""

SPEED = """
import json, random, sys
from pathlib import Path
arm, out = sys.argv[1], sys.argv[2]
random.seed(Path(out).parent.parent.name + Path(out).name)  # the role and the unit: repeatable
factor = 0.9 if arm == "bad" else 1.0
noise = 0.2 if arm == "noisy" else 0.002
samples = [100 * factor * (1 + random.gauss(0, noise)) for _ in range(3)]
metric = {"name": "tps", "unit": "t/s", "higher_is_better": True, "samples": samples}
json.dump({"schema_version": 1, "metrics": [metric]}, open(out, "w"))
"""


def cli(project: Project, *args: str) -> tuple[int, str]:
    result = runner.invoke(app, [*args, "--project", str(project.root)])
    # --json: the document alone on stdout (messages go to stderr).
    return result.exit_code, result.stdout if "--json" in args else result.output


def make(project: Callable[..., Project], controls: str = "", fails: dict[str, str] | None = None) -> Project:
    """A project of five command stages and a bench; `fails` maps an arm to the stage it fails."""
    p = project(ARMS + controls)
    fails = fails or {}
    for index, name in enumerate(STAGES, start=1):
        failing = [arm for arm, stage in fails.items() if stage == name]
        p.stage(
            f"{index}0-{name}.toml",
            f'name = "{name}"\n[[check]]\nkind = "command"\nname = "{name}-check"\n'
            f"run = '''{{py}} -c 'import sys; sys.exit(1 if \"{{arm}}\" in {json.dumps(failing)} else 0)' '''\n",
        )
    p.script("speed.py", SPEED)
    p.stage(
        "60-bench.toml",
        'name = "bench"\ninconclusive = "warn"\n[[check]]\nkind = "bench"\nname = "speed"\n'
        'format = "metrics"\nwarmup = false\nlooks = 1\nmax_pairs = 12\n'
        "run = '{py} {project}/speed.py {arm} {out_file}'\n",
    )
    p.stage("70-distribution.toml", command_stage("distribution", "{py} -c pass"))
    return p


def only_run(p: Project) -> Path:
    [run] = p.run_dirs()
    return run


def saved(path: Path) -> dict:
    return json.loads(path.read_text())


def test_williams_rows_balance_order_and_carry_over() -> None:
    for count in (2, 3, 4, 5):
        rows = williams_rows(count)
        assert all(sorted(r) == list(range(count)) for r in rows)
        for position in range(count):  # every treatment in every position equally often
            assert len({r[position] for r in rows}) == count
        for other in range(1, count):  # each candidate before pinned as often as after it
            assert sum(r.index(0) < r.index(other) for r in rows) * 2 == len(rows)
        follows: dict[tuple[int, int], int] = {}
        for r in rows:
            for a, b in itertools.pairwise(r):
                follows[(a, b)] = follows.get((a, b), 0) + 1
        assert len(follows) == count * (count - 1) and len(set(follows.values())) == 1
    assert [block_order(("pinned", "candidate"), b) for b in (1, 2, 3)] == [
        ["pinned", "candidate"],
        ["candidate", "pinned"],
        ["pinned", "candidate"],
    ]


def test_two_candidates_gate_apart_with_their_own_folders(project: Callable[..., Project]) -> None:
    p = make(project, fails={"cand2": "compile"})
    code, out = cli(p, "run", "--candidate", "cand", "--candidate", "cand2", "--json")
    assert code == 1, out
    run = only_run(p)
    assert run.name.endswith("-cand+cand2")
    top = saved(run / "run.json")
    assert top["kind"] == "set" and [m["label"] for m in top["members"]] == ["cand", "cand2"]
    assert top["verdict"] == "NOT QUALIFIED" and top["verdict_reason"] == "not qualified: cand2"
    for label in ("cand", "cand2"):
        member = saved(run / label / "run.json")
        assert member["roles"]["candidate"]["arm"] == label and member["roles"]["pinned"]["arm"] == "pinned"
        assert member["set"]["run_id"] == run.name
    assert saved(run / "cand" / "run.json")["verdict"] == "QUALIFIED"
    stages = saved(run / "cand2" / "run.json")["stages"]
    assert stages["compile"] == "FAIL"
    assert all(stages[s] == "BLOCKED" for s in ("numerics", "serving", "soak", "bench")), stages
    # cand's later stages ran although cand2 failed its gate; its bench ran alone.
    assert saved(run / "cand" / "60-bench" / "stage.json")["verdict"] in ("PASS", "WARN")
    document = json.loads(out[out.index("{") :])
    assert {m["label"]: m["verdict"] for m in document["members"]} == {
        "cand": "QUALIFIED",
        "cand2": "NOT QUALIFIED",
    }
    # Why, as the run.json saved it: both derived from the members' folders.
    assert (document["verdict_reason"], document["controls_behaved"]) == ("not qualified: cand2", None)
    assert document["exit_code"] == 1
    suites = {s.get("name") for s in ET.parse(run / "junit.xml").getroot()}
    assert {"cand/compile", "cand2/compile", "cand/bench"} <= suites
    matrix = (run / "summary.md").read_text()
    assert "| stage | cand (candidate) | cand2 (candidate) |" in matrix
    assert "| compile | **PASS** | **FAIL** |" in matrix
    assert (run / "cand2" / "report.html").is_file()
    html = (run / "report.html").read_text()
    assert 'href="cand2/report.html#stage-compile"' in html


@pytest.mark.slow
def test_controls_run_with_every_qualification_and_behave(project: Callable[..., Project]) -> None:
    controls = '[controls]\npositive = ["pinned"]\nnegative = { bad = ["numerics"] }\n'
    p = make(project, controls, fails={"bad": "numerics"})
    code, out = cli(p, "run", "--candidate", "cand")
    assert code == 0, out
    run = only_run(p)
    top = saved(run / "run.json")
    assert [(m["label"], m["role"]) for m in top["members"]] == [
        ("cand", "candidate"),
        ("positive-pinned", "positive"),
        ("negative-bad", "negative"),
    ]
    assert top["verdict"] == "QUALIFIED" and top["controls_behaved"] is True
    # The negative control runs the stages that build arms (none here: the "build" stage is a
    # command) and the stage it must fail.
    negative = saved(run / "negative-bad" / "run.json")
    assert [s["name"] for s in negative["plan"]["stages"]] == ["numerics"]
    assert negative["stages"]["numerics"] == "FAIL"
    summary = (run / "summary.md").read_text()
    assert "Controls behaved" in summary and "**FAIL** (must FAIL)" in summary
    # Every command check ran pinned once for the set, beside each member's arm.
    joint_build = run / "10-build" / "build-check"
    assert sorted(d.name for d in joint_build.iterdir() if d.is_dir() and d.name != "logs") == [
        "cand",
        "pinned",
        "positive-pinned",
    ]
    view = saved(run / "cand" / "10-build" / "build-check" / "pinned" / "measurement.json")
    assert view["measured_as"] == "pinned" and view["role"] == "pinned"
    # The bench measured pinned, cand and the A/A in one Williams schedule, pinned once.
    joint = run / "60-bench" / "speed"
    schedule = saved(joint / "schedule.json")
    assert schedule["roles"] == ["pinned", "cand", "positive-pinned"]
    pairs = [u for u in schedule["units"] if u["phase"] == "pair"]
    for block in {u["pair"] for u in pairs}:
        order = [u["role"] for u in pairs if u["pair"] == block]
        assert order == block_order(schedule["roles"], block)
    joint_pinned = pd.read_parquet(joint / "pinned" / "samples.parquet")
    for label in ("cand", "positive-pinned"):
        view = run / label / "60-bench" / "speed"
        assert pd.read_parquet(view / "pinned" / "samples.parquet").equals(joint_pinned)
        assert pd.read_parquet(view / "candidate" / "samples.parquet").equals(
            pd.read_parquet(joint / label / "samples.parquet")
        )
        plan = saved(view / "schedule.json")["plan"]
        assert plan["alpha"] == pytest.approx(0.05 / 2)  # cand and the A/A share the bench's alpha
        assert saved(view / "result.json")["verdict"] in ("PASS", "WARN")  # no regression
    # Without controls the same command is an ordinary run of one candidate.
    code, out = cli(p, "run", "--candidate", "cand", "--no-controls")
    assert code == 0, out
    plain = [r for r in p.run_dirs() if r != run]
    assert len(plain) == 1 and "kind" not in saved(plain[0] / "run.json")


@pytest.mark.slow
def test_a_negative_control_that_slips_through_means_the_gate_could_not_tell(
    project: Callable[..., Project],
) -> None:
    # The gate is too loose: nothing fails the "bad" arm at numerics.
    controls = '[controls]\nnegative = { bad = ["numerics"] }\n'
    p = make(project, controls)
    code, out = cli(p, "run", "--candidate", "cand")
    assert code == 1, out
    top = saved(only_run(p) / "run.json")
    assert saved(only_run(p) / "cand" / "run.json")["verdict"] == "QUALIFIED"
    assert top["verdict"] == "NOT QUALIFIED" and top["controls_behaved"] is False
    assert "the gate could not tell" in top["verdict_reason"] and "bad" in top["verdict_reason"]
    junit = ET.parse(only_run(p) / "junit.xml").getroot()
    [controls_suite] = [s for s in junit if s.get("name") == "controls"]
    assert controls_suite.get("failures") == "1"


def test_a_positive_control_that_fails_makes_the_set_not_qualified(project: Callable[..., Project]) -> None:
    controls = '[controls]\npositive = ["pinned"]\n'
    # A gate that fails a build against itself: every serving check exits 1 for the pinned arm.
    p = make(project, controls, fails={"pinned": "serving"})
    code, out = cli(p, "run", "--candidate", "cand")
    assert code == 1, out
    top = saved(only_run(p) / "run.json")
    assert top["controls_behaved"] is False and "positive control pinned" in top["verdict_reason"]


@pytest.mark.slow
def test_a_bench_regression_is_found_for_its_candidate_only(project: Callable[..., Project]) -> None:
    p = make(project)
    code, out = cli(p, "run", "--candidate", "cand", "--candidate", "bad")
    assert code == 1, out
    run = only_run(p)
    # cand runs at pinned's speed: no regression (a chance SLOWER within the margin is WARN).
    cand = saved(run / "cand" / "60-bench" / "speed" / "result.json")
    assert cand["verdict"] in ("PASS", "WARN") and not cand["facts"]["tests"]["tps"]["regression"]
    bad = saved(run / "bad" / "60-bench" / "speed" / "result.json")
    assert bad["verdict"] == "FAIL" and "regression" in bad["reason"], bad["reason"]


@pytest.mark.slow
def test_a_member_decided_early_is_not_told_of_another_member_s_open_test(
    project: Callable[..., Project],
) -> None:
    """The set's one schedule runs to its planned maximum while noisy's test is open; bad's
    judgement, decided, says the schedule ran on for other members rather than that a test is
    still inconclusive, and noisy's names its own open test."""
    p = make(project)
    code, out = cli(p, "run", "--candidate", "noisy", "--candidate", "bad")
    assert code == 1, out
    run = only_run(p)
    joint = saved(run / "60-bench" / "speed" / "schedule.json")
    assert joint["stop_reason"] == "the planned maximum ran; 1 test(s) still inconclusive: noisy: tps"
    noisy = saved(run / "noisy" / "60-bench" / "speed" / "result.json")
    assert noisy["verdict"] == "INCONCLUSIVE" and "still inconclusive: noisy: tps" in noisy["reason"]
    bad = saved(run / "bad" / "60-bench" / "speed" / "result.json")
    assert bad["verdict"] == "FAIL" and "still inconclusive" not in bad["reason"], bad["reason"]
    assert "for other members' tests; every test of this one was decided" in bad["reason"]


@pytest.mark.slow
def test_a_saved_set_is_rerun_and_rejudged_per_candidate(project: Callable[..., Project]) -> None:
    p = make(project, fails={"cand2": "compile"})
    code, _ = cli(p, "run", "--candidate", "cand", "--candidate", "cand2")
    run = only_run(p)
    code, out = cli(p, "run", "--run", run.name, "--candidate", "cand", "--only", "soak", "--force")
    assert code == 1, out
    assert (run / "cand" / "50-soak" / "attempts" / "1").is_dir()
    assert not (run / "cand2" / "50-soak" / "attempts").exists()
    code, out = cli(p, "run", "--run", run.name, "--candidate", "nosuch")
    assert code == 4 and "no member 'nosuch'" in out and "cand, cand2" in out
    code, out = cli(p, "report", run.name, "--rejudge")
    assert code == 0, out
    assert saved(run / "run.json")["verdict"] == "NOT QUALIFIED"
    code, out = cli(p, "show", run.name)
    assert code == 0 and "cand2" in out and "BLOCKED" in out
    code, out = cli(p, "runs", "--json")
    assert json.loads(out)[0]["candidate"] == "cand, cand2"


@pytest.mark.parametrize(
    ("controls", "words"),
    [
        ('[controls]\npositive = ["pinnd"]\n', ["qualify.toml", "controls.positive", "'pinnd'", "pinned"]),
        ('[controls]\nnegative = { bda = ["numerics"] }\n', ["controls.negative.bda", "'bda'"]),
        (
            '[controls]\nnegative = { bad = ["numerix"] }\n',
            ["controls.negative.bad", "'numerix'", "numerics"],
        ),
        ("[controls]\nnegative = { bad = [] }\n", ["controls.negative.bad", "stages it must fail"]),
    ],
)
def test_bad_controls_are_refused_before_anything_runs(
    project: Callable[..., Project], controls: str, words: list[str]
) -> None:
    p = make(project, controls)
    code, out = cli(p, "run", "--candidate", "cand")
    flat = " ".join(out.split())
    assert code == 4, out
    assert all(w in flat for w in words), flat
    assert not p.runs.exists() or not p.run_dirs()


def test_a_candidate_given_twice_is_refused(project: Callable[..., Project]) -> None:
    p = make(project)
    code, out = cli(p, "run", "--candidate", "cand", "--candidate", "cand")
    assert code == 4 and "given twice" in out


@pytest.mark.slow
def test_a_member_given_by_its_path_is_rerun_and_rejudged_with_its_share_of_the_plan(
    project: Callable[..., Project],
) -> None:
    controls = '[controls]\npositive = ["pinned"]\nnegative = { bad = ["numerics"] }\n'
    p = make(project, controls, fails={"bad": "numerics"})
    code, out = cli(p, "run", "--candidate", "cand")
    assert code == 0, out
    run = only_run(p)
    # The negative control's own folder: rerun as the set's member, with its two-stage plan.
    member = run / "negative-bad"
    code, out = cli(p, "run", "--run", str(member), "--only", "numerics", "--force")
    assert code == 0, out  # the set's verdict: the control failed numerics as it must
    assert [s["name"] for s in saved(member / "run.json")["plan"]["stages"]] == ["numerics"]
    assert (member / "30-numerics" / "attempts" / "1").is_dir()
    assert not (run / "cand" / "30-numerics" / "attempts").exists()
    # cand's bench is judged at its share of alpha also when rejudged from its own folder.
    code, out = cli(p, "report", str(run / "cand"), "--rejudge")
    assert code == 0, out
    result = saved(run / "cand" / "60-bench" / "speed" / "result.json")
    assert result["spec"]["params"]["alpha"] == pytest.approx(0.025)  # shared with the A/A
    assert saved(run / "run.json")["verdict"] == "QUALIFIED"


def test_a_shared_measurement_that_crashes_is_each_members_error_not_a_lost_set(
    project: Callable[..., Project], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A harness bug inside the set's shared bench (injected: the schedule raises) makes each
    member's bench ERROR with the log's path; the set finishes and says INCOMPLETE."""

    def broken(_ctx: object) -> None:
        raise RuntimeError("injected")

    monkeypatch.setattr("qualify.bench.schedule.run_schedule", broken)
    monkeypatch.setattr("qualify.bench.check.run_schedule", broken)
    p = make(project)
    code, out = cli(p, "run", "--candidate", "cand", "--candidate", "cand2")
    assert code == 3, out
    run = only_run(p)
    assert saved(run / "run.json")["status"] == "complete"
    for label in ("cand", "cand2"):
        result = saved(run / label / "60-bench" / "speed" / "result.json")
        assert result["verdict"] == "ERROR" and "harness-error.log" in result["reason"], result["reason"]
    assert "RuntimeError: injected" in (run / "60-bench" / "speed" / "logs" / "harness-error.log").read_text()
