"""A QUALIFIED set whose members' stage held an undecided check says which check, and how the
plan each member ran with counts an INCONCLUSIVE check, read from the member's saved plan.

The set is real (`qualify run` of two candidates): every stage a `command` check; the bench
stage two of them reporting chosen samples (tests/helpers/emit_metrics.py): `steady`, where
the candidates match pinned and the check decides, and `speed`, whose samples straddle pinned's
median less the margin so it cannot decide.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from conftest import PY, Project
from typer.testing import CliRunner

from qualify.cli import app

runner = CliRunner()
HELPER = Path(__file__).resolve().parent.parent / "helpers" / "emit_metrics.py"
STAGES = ("build", "compile", "numerics", "serving", "soak")
CONFIG = """
[arms.pinned]
installable = ".#default"
vars = { samples = "100,100,100,100,100" }
[arms.cand]
installable = ".#cand"
vars = { samples = "80,90,100,110,120" }
[arms.cand2]
installable = ".#cand2"
vars = { samples = "80,90,100,110,120" }
"""
BENCH = f"""
name = "bench"
inconclusive = "warn"

[[check]]
kind = "command"
name = "steady"
run = "{PY} {HELPER} {{out_file}} tps:higher:100,100,100"
metrics = true
limits = {{ tps_margin = 0.1 }}

[[check]]
kind = "command"
name = "speed"
run = "{PY} {HELPER} {{out_file}} tps:higher:{{samples}}"
metrics = true
limits = {{ tps_margin = 0.1 }}
"""


def saved(path: Path) -> dict[str, Any]:
    return dict(json.loads(path.read_text()))


def test_the_set_names_the_undecided_check_and_the_plan_s_setting(project: Callable[..., Project]) -> None:
    """Before, the reason said "these stages decided nothing (counted as WARN by the plan): cand
    bench, cand2 bench": the bench's steady check had decided, the words named no check and
    quoted no setting of the plan."""
    p = project(CONFIG)
    for index, name in enumerate(STAGES, start=1):
        p.stage(
            f"{index}0-{name}.toml", f'name = "{name}"\n[[check]]\nkind = "command"\nrun = "{PY} -c pass"\n'
        )
    p.stage("60-bench.toml", BENCH)
    p.stage(
        "70-distribution.toml", f'name = "distribution"\n[[check]]\nkind = "command"\nrun = "{PY} -c pass"\n'
    )
    result = runner.invoke(
        app, ["run", "--candidate", "cand", "--candidate", "cand2", "--project", str(p.root)]
    )
    assert result.exit_code == 0, result.output
    (run,) = p.run_dirs()
    top = saved(run / "run.json")
    assert top["verdict"] == "QUALIFIED"
    reason = str(top["verdict_reason"])
    for label in ("cand", "cand2"):
        stage = saved(run / label / "60-bench" / "stage.json")
        verdicts = {c["name"]: c["verdict"] for c in stage["checks"]}
        assert verdicts == {"steady": "PASS", "speed": "INCONCLUSIVE"} and stage["verdict"] == "WARN"
        (planned,) = [s for s in saved(run / label / "run.json")["plan"]["stages"] if s["name"] == "bench"]
        said = re.search(rf"\b{label} bench \(([^)]*)\)", reason)
        assert said is not None, reason
        assert said.group(1).startswith("speed INCONCLUSIVE, counted as WARN"), said.group(1)
        assert said.group(1).endswith(f'inconclusive = "{planned["inconclusive"]}"'), said.group(1)
        assert "steady" not in said.group(1)
    assert "decided nothing" in reason


def test_only_a_stage_whose_plan_counts_inconclusive_as_warn_reaches_the_qualified_reason(
    project: Callable[..., Project],
) -> None:
    """Which stages can be named there: a stage is undecided-yet-counted only when its
    stage.json counted INCONCLUSIVE as WARN, and a stage.json whose plan entry differs from
    the member's saved plan is STALE. A saved plan that says "fail" where the stage ran under
    "warn" leaves the set no longer QUALIFIED, never QUALIFIED "by the plan"."""
    p = project(CONFIG)
    for index, name in enumerate(STAGES, start=1):
        p.stage(
            f"{index}0-{name}.toml", f'name = "{name}"\n[[check]]\nkind = "command"\nrun = "{PY} -c pass"\n'
        )
    p.stage("60-bench.toml", BENCH)
    p.stage(
        "70-distribution.toml", f'name = "distribution"\n[[check]]\nkind = "command"\nrun = "{PY} -c pass"\n'
    )
    result = runner.invoke(
        app, ["run", "--candidate", "cand", "--candidate", "cand2", "--project", str(p.root)]
    )
    assert result.exit_code == 0, result.output
    (run,) = p.run_dirs()
    member = run / "cand" / "run.json"
    document = saved(member)
    for stage in document["plan"]["stages"]:
        if stage["name"] == "bench":
            stage["inconclusive"] = "fail"
    member.write_text(json.dumps(document))
    shown = runner.invoke(app, ["show", run.name, "--json", "--project", str(p.root)])
    model = json.loads(shown.stdout)
    assert model["verdict"] != "QUALIFIED"
    assert model["cells"]["bench"]["cand"]["outcome"] == "STALE"
    assert "as the plan says" not in model["verdict_reason"]


def test_an_interrupted_set_names_only_the_stages_a_negative_control_runs() -> None:
    """Before: "not decided: negative-kvq4 (serving not configured, soak not configured, bench
    not configured)" for a set stopped before its negative control's numerics: those stages are
    configured, in the set's plan; the control's plan leaves them out on purpose."""
    from qualify.core.verdicts import RunVerdict, StageState, Verdict
    from qualify.pipeline.members import Behaviour
    from qualify.pipeline.ondisk import MemberOnDisk, RunOnDisk, _open_members
    from qualify.pipeline.stageorder import DEFAULT_ORDER
    from qualify.records.run import Member

    outcomes: dict[str, Any] = {name: StageState.NOT_CONFIGURED for name in DEFAULT_ORDER}
    outcomes |= {"build": Verdict.PASS, "numerics": StageState.NOT_RUN}
    run = RunOnDisk(
        RunVerdict.INCOMPLETE,
        3,
        "interrupted",
        outcomes,
        {},
        None,
        (),
        ("build", "numerics"),  # type: ignore[arg-type]
    )
    negative = Member("negative-kvq4", "kvq4", "negative", ("numerics",))
    said = _open_members([MemberOnDisk(negative, run, Behaviour(None, "numerics not run"))])
    assert said == "not decided: negative-kvq4 (numerics not run)"
    candidate = Member("cand", "cand", "candidate")
    said = _open_members([MemberOnDisk(candidate, run, Behaviour(None, ""))])
    assert "serving not configured" in said  # a candidate's plan is the set's: it is not configured
