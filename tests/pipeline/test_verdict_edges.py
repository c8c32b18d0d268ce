"""Verdicts at their edges, through real `qualify run`s of small projects: a candidate judged on
its own when the plan leaves pinned out, plans refused where it cannot be, stages kept by
`--only` that went stale, a crashed measurement re-judged, a tool the candidate lost."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import PY, Project, command_stage
from typer.testing import CliRunner

from qualify.cli import app
from qualify.records import seal

HELPERS = Path(__file__).resolve().parent.parent / "helpers"
runner = CliRunner()


def cli(project: Project, *args: str) -> tuple[int, str]:
    result = runner.invoke(app, [*args, "--project", str(project.root)])
    return result.exit_code, result.output


def result_of(run: Path, folder: str) -> dict:
    stage = json.loads((run / folder / "stage.json").read_text())
    return json.loads((run / folder / stage["checks"][0]["name"] / "result.json").read_text())


def test_candidate_only_command_limits_are_judged(project: Callable[..., Project]) -> None:
    """max_/min_ limits need only the candidate: a median of 999 against max_lat = 10 FAILs."""
    p = project()
    p.stage(
        "20-compile.toml",
        f"""
[[check]]
kind = "command"
name = "lat"
roles = ["candidate"]
run = "{PY} {HELPERS / "emit_metrics.py"} {{out_file}} lat:lower:999,998,999"
limits = {{ max_lat = 10 }}
""",
    )
    code, out = cli(p, "run", "--candidate", "cand")
    result = result_of(p.run_dirs()[0], "20-compile")
    assert result["verdict"] == "FAIL", result["reason"]
    assert "limit max_lat" in result["judged"]
    assert code == 1, out


def test_candidate_only_tests_fail_on_their_own_failures(project: Callable[..., Project]) -> None:
    p = project()
    p.stage(
        "20-compile.toml",
        f"""
[[check]]
kind = "tests"
name = "unit"
roles = ["candidate"]
run = "{PY} {HELPERS / "write_junit.py"} {{out_file}} a=failed b=failed c=failed"
junit = "{{out_file}}"
""",
    )
    code, out = cli(p, "run", "--candidate", "cand")
    result = result_of(p.run_dirs()[0], "20-compile")
    assert result["verdict"] == "FAIL", result["reason"]
    assert sum(f["message"].startswith("failing: ") for f in result["findings"]) == 3
    assert code == 1, out


@pytest.mark.parametrize(
    ("check", "words"),
    [
        ('kind = "kernel-resources"\nroot = "{out}"', "per-kernel diff against the pinned build"),
        ('kind = "command"\nrun = "true"\nlimits = { tps_margin = 0.05 }', "tps_margin compare with pinned"),
        ('kind = "bench"\nrun = "true"', "throughput with pinned"),
    ],
)
def test_a_check_that_needs_pinned_is_refused_without_it(
    project: Callable[..., Project], check: str, words: str
) -> None:
    p = project()
    path = p.stage("20-compile.toml", f'[[check]]\nroles = ["candidate"]\n{check}\n')
    code, out = cli(p, "plan")
    assert code == 4, out
    flat = " ".join(out.split())
    assert str(path.name) in flat and "leaves out the pinned role" in flat and words in flat
    assert 'add "pinned" to its roles' in flat


def test_kld_without_limits_or_pinned_is_refused(project: Callable[..., Project]) -> None:
    p = project(
        'reference = "ref"\n[arms.pinned]\ninstallable = ".#a"\n[arms.cand]\ninstallable = ".#b"\n'
        '[arms.ref]\ninstallable = ".#r"\n'
    )
    p.stage(
        "30-numerics.toml",
        '[[check]]\nkind = "kld"\nroles = ["reference", "candidate"]\nrun = "true"\nartifact = "{out_file}"\n',
    )
    code, out = cli(p, "plan")
    assert code == 4 and "non-inferiority to pinned" in " ".join(out.split()), out


def test_kld_min_chunks_below_two_is_a_config_error(project: Callable[..., Project]) -> None:
    p = project()
    p.stage("30-numerics.toml", '[[check]]\nkind = "kld"\nrun = "true"\nartifact = "x"\nmin_chunks = 1\n')
    code, out = cli(p, "plan")
    assert code == 4 and "min_chunks = 1" in out and "at least 2" in out, out


def test_stage_kept_by_only_goes_stale_when_its_inputs_change(project: Callable[..., Project]) -> None:
    """`--only compile` after changing a candidate variable that would make numerics fail:
    numerics is kept but STALE, and the run is no longer QUALIFIED until it is rerun."""
    p = project()
    for index, name in enumerate(
        ("build", "compile", "numerics", "serving", "soak", "bench", "distribution"), start=1
    ):
        run = f"{PY} -c 'import sys; sys.exit({{level}} > 9)'" if name == "numerics" else "true"
        p.stage(f"{index}0-{name}.toml", command_stage(name, run))
    code, out = cli(p, "run", "--candidate", "cand")
    assert code == 0, out
    run = p.run_dirs()[0]
    config = (p.root / "qualify.toml").read_text().replace("level = 9", "level = 10")
    (p.root / "qualify.toml").write_text(config)
    # qualify.toml is part of the plan: a rerun under the changed variable needs --allow-dirty.
    code, out = cli(p, "run", "--only", "compile", "--force", "--allow-dirty")
    assert code == 3, out
    stage = json.loads((run / "30-numerics" / "stage.json").read_text())
    assert stage["verdict"] == "PASS" and stage["stale"]["inputs_hash_now"] != stage["inputs_hash"]
    saved = json.loads((run / "run.json").read_text())
    assert saved["verdict"] == "INCOMPLETE" and saved["stages"]["numerics"] == "STALE"
    assert saved["config"]["arms"]["cand"]["vars"]["level"] == 10  # the latest snapshot
    assert "STALE" in out
    # Each attempt keeps the configuration it ran with.
    compile_ = json.loads((run / "20-compile" / "stage.json").read_text())
    assert compile_["config"]["arms"]["cand"]["vars"]["level"] == 10
    first = json.loads((run / "20-compile" / "attempts" / "1" / "stage.json").read_text())
    assert first["config"]["arms"]["cand"]["vars"]["level"] == 9
    code, out = cli(p, "run", "--only", "numerics", "--allow-dirty")
    assert code == 1, out  # rerun, it now fails as the new variable makes it
    stage = json.loads((run / "30-numerics" / "stage.json").read_text())
    assert "stale" not in stage and stage["attempt"] == 2


def test_a_crashed_measurement_stays_error_when_rejudged(project: Callable[..., Project]) -> None:
    p = project()
    p.stage("20-compile.toml", command_stage("compile", "true"))
    run_cli = cli(p, "run", "--candidate", "cand")
    assert run_cli[0] == 3
    run = p.run_dirs()[0]
    path = run / "20-compile" / "compile-check" / "result.json"
    result = json.loads(path.read_text())
    # What the stage runner saves when `measure` raised after leaving partial data behind.
    result.update(crashed="internal error in check kind 'command': OSError()", verdict="ERROR")
    path.write_text(json.dumps(result))
    # ... and its stage record, which lists the check's verdict (records that disagree are
    # not data to rejudge from).
    stage_path = run / "20-compile" / "stage.json"
    stage = json.loads(stage_path.read_text())
    stage["checks"][0]["verdict"] = stage["verdict"] = "ERROR"
    stage_path.write_text(json.dumps(stage))
    # Written as the stage runner writes them: sealed (an edit by anything else is "tampered").
    seal.note(path)
    seal.note(stage_path)
    code, out = cli(p, "report", run.name, "--rejudge")
    again = json.loads(path.read_text())
    assert again["verdict"] == "ERROR" and "crashed" in again["reason"], out


def test_a_tool_the_candidate_lost_fails_called_directly(project: Callable[..., Project]) -> None:
    """The pinned arm has the tool, the candidate's does not: FAIL, as through /bin/sh."""
    p = project(
        '[arms.pinned]\ninstallable = ".#a"\nvars = { tool = "true" }\n'
        '[arms.cand]\ninstallable = ".#b"\nvars = { tool = "/nonexistent/lost-tool" }\n'
    )
    p.stage("20-compile.toml", command_stage("compile", "{tool}"))
    code, out = cli(p, "run", "--candidate", "cand")
    result = result_of(p.run_dirs()[0], "20-compile")
    assert result["verdict"] == "FAIL", result["reason"]
    assert code == 1, out


def test_a_tool_missing_in_every_role_is_error(project: Callable[..., Project]) -> None:
    p = project()
    p.stage("20-compile.toml", command_stage("compile", "/nonexistent/tool"))
    code, out = cli(p, "run", "--candidate", "cand")
    assert result_of(p.run_dirs()[0], "20-compile")["verdict"] == "ERROR"
    assert code == 3, out


@pytest.mark.parametrize(("template", "typo", "meant"), [("{py} -c 1 {modle}", "modle", "model"),
                                                          ("echo {rol}", "rol", "role")])  # fmt: skip
def test_a_typo_in_a_placeholder_is_refused_before_anything_runs(
    project: Callable[..., Project], template: str, typo: str, meant: str
) -> None:
    p = project(
        '[vars]\nmodel = "m.gguf"\n[arms.pinned]\ninstallable = ".#a"\n[arms.cand]\ninstallable = ".#b"\n'
    )
    stage = p.stage("20-compile.toml", command_stage("compile", template.replace("{py}", PY)))
    for args in (["plan"], ["run", "--candidate", "cand"]):
        code, out = cli(p, *args)
        flat = " ".join(out.split())
        assert code == 4, out
        # The file and the line of the template (`run`, line 5 of the stage file).
        assert f"{stage}:5: check 'compile-check', run: unknown placeholder {{{typo}}}" in flat
        assert f'did you mean "{meant}"' in flat
    assert not p.runs.exists() or not list(p.runs.iterdir())  # no run was started
