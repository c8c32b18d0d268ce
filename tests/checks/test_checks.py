"""The `command` and `tests` check kinds, measured through real commands and judged."""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import Project
from typer.testing import CliRunner

from qualify.checks.base import SavedCheck
from qualify.checks.commandfacts import CommandFacts
from qualify.checks.junit import read_junit
from qualify.checks.rolerun import JUnitRun
from qualify.checks.tests_check import judge as judge_tests
from qualify.cli import app
from qualify.core.checkspec import CheckSpec
from qualify.core.errors import RunStoreError

HELPERS = Path(__file__).resolve().parent.parent / "helpers"
runner = CliRunner()

ARMS = """
[arms.pinned]
installable = ".#default"
vars = {{ samples = "{pinned}", cases = {pinned_cases} }}
[arms.cand]
installable = ".#cand"
vars = {{ samples = "{cand}", cases = {cand_cases} }}
"""


def run_check(
    make: Callable[..., Project],
    stage: str,
    pinned: str = "",
    cand: str = "",
    pinned_cases: str = "[]",
    cand_cases: str = "[]",
) -> dict:
    p = make(ARMS.format(pinned=pinned, cand=cand, pinned_cases=pinned_cases, cand_cases=cand_cases))
    p.stage("30-numerics.toml", stage)
    result = runner.invoke(app, ["run", "--candidate", "cand", "--project", str(p.root)])
    assert result.exit_code in (1, 3), result.output
    stage = p.run_dirs()[0] / "30-numerics"
    name = json.loads((stage / "stage.json").read_text())["checks"][0]["name"]
    return json.loads((stage / name / "result.json").read_text())


def metrics_stage(limits: str) -> str:
    return f"""
[[check]]
kind = "command"
name = "m"
run = "{{py}} {HELPERS / "emit_metrics.py"} {{out_file}} {{samples}}"
metrics = true
limits = {{ {limits} }}
"""


@pytest.mark.parametrize(
    ("pinned", "cand", "limits", "verdict"),
    [
        ("tps:higher:100,101,99", "tps:higher:99,98,100", "tps_margin = 0.05", "PASS"),
        ("tps:higher:100,101,99", "tps:higher:80,81,82", "tps_margin = 0.05", "FAIL"),
        ("tps:higher:100,101,99", "tps:higher:90,97,99", "tps_margin = 0.05", "INCONCLUSIVE"),
        ("lat:lower:10,10,10", "lat:lower:10.4,10.2,10.3", "lat_margin = 0.05", "PASS"),
        ("lat:lower:10,10,10", "lat:lower:11,12,11", "lat_margin = 0.05", "FAIL"),
        ("kld:lower:0.001", "kld:lower:0.02", "max_kld = 0.01", "FAIL"),
        ("kld:lower:0.001", "kld:lower:0.002", "max_kld = 0.01", "PASS"),
        ("agree:higher:0.99", "agree:higher:0.95", "min_agree = 0.97", "FAIL"),
        ("tps:higher:100", "other:higher:100", "tps_margin = 0.05", "FAIL"),  # candidate lacks it
        ("other:higher:100", "tps:higher:100", "tps_margin = 0.05", "ERROR"),  # pinned lacks it
    ],
)
def test_command_metrics_against_limits(
    project: Callable[..., Project], pinned: str, cand: str, limits: str, verdict: str
) -> None:
    result = run_check(project, metrics_stage(limits), pinned, cand)
    assert result["verdict"] == verdict, result["reason"]
    assert result["tables"][0]["columns"][:4] == ["metric", "unit", "pinned", "candidate"]
    # The metrics the judge read, as its facts type: each role's samples and the median judged.
    facts = CommandFacts.load(result["facts"], "result.json", "facts")
    for role, spec in (("pinned", pinned), ("candidate", cand)):
        name, _, samples = spec.split(":")
        fact = facts.metrics[role][name]
        assert fact.samples == [float(x) for x in samples.split(",")]
        assert fact.median == statistics.median(fact.samples)


def test_command_with_empty_metrics_measured_nothing(project: Callable[..., Project]) -> None:
    stage = f"""
[[check]]
kind = "command"
name = "m"
run = '''{{py}} {HELPERS / "write_file.py"} {{out_file}} '{{{{"schema_version": 1, "metrics": []}}}}' '''
metrics = true
"""
    result = run_check(project, stage)
    assert result["verdict"] == "FAIL"
    assert "nothing was measured" in result["reason"]


def test_command_invalid_metrics_file_names_the_problem(project: Callable[..., Project]) -> None:
    stage = f"""
[[check]]
kind = "command"
name = "m"
run = '''{{py}} {HELPERS / "write_file.py"} {{out_file}} '{{{{"schema_version": 2}}}}' '''
metrics = true
"""
    result = run_check(project, stage)
    assert result["verdict"] == "FAIL"
    assert "schema_version must be 1" in result["reason"]


def test_candidate_crash_is_fail_pinned_crash_is_error(project: Callable[..., Project]) -> None:
    stage = """
[[check]]
kind = "command"
name = "m"
run = "sh -c 'echo dying >&2; exit {samples}'"
"""
    result = run_check(project, stage, pinned="0", cand="139")
    assert result["verdict"] == "FAIL"
    assert "exit code 139" in result["reason"]


def test_pinned_crash_is_error(project: Callable[..., Project]) -> None:
    stage = """
[[check]]
kind = "command"
name = "m"
run = "sh -c 'echo dying >&2; exit {samples}'"
"""
    result = run_check(project, stage, pinned="2", cand="0")
    assert result["verdict"] == "ERROR"
    assert result["findings"][0]["role"] == "pinned"
    assert "dying" in result["findings"][0]["message"]


def test_timeout_of_candidate_is_fail(project: Callable[..., Project]) -> None:
    stage = """
[[check]]
kind = "command"
name = "m"
timeout = 1
run = "sleep {samples}"
"""
    result = run_check(project, stage, pinned="0", cand="30")
    assert result["verdict"] == "FAIL"
    assert "timed out" in result["reason"]


def junit_stage() -> str:
    return f"""
[[check]]
kind = "tests"
name = "ops"
run = "{{py}} {HELPERS / "write_junit.py"} {{out_file}} {{cases}}"
"""


def test_newly_failing_tests_are_named(project: Callable[..., Project]) -> None:
    result = run_check(
        project,
        junit_stage(),
        pinned_cases='["rope=passed", "quant=passed", "flaky=failed"]',
        cand_cases='["rope=passed", "quant=failed", "flaky=failed"]',
    )
    assert result["verdict"] == "FAIL"
    messages = [f["message"] for f in result["findings"]]
    assert "newly failing: quant (failed)" in messages
    assert any("failing in both roles: flaky" in m for m in messages)
    rows = result["tables"][0]["rows"]
    assert rows[0][:4] == ["quant", "passed", "failed", "newly failing"]  # changes first


def test_failures_in_both_roles_only_warn(project: Callable[..., Project]) -> None:
    result = run_check(
        project, junit_stage(), pinned_cases='["a=passed", "b=failed"]', cand_cases='["a=passed", "b=failed"]'
    )
    assert result["verdict"] == "WARN"


def test_zero_tests_executed_is_not_a_pass(project: Callable[..., Project]) -> None:
    result = run_check(project, junit_stage(), pinned_cases="[]", cand_cases="[]")
    assert result["verdict"] == "FAIL"
    assert "no tests executed" in result["reason"]
    result = run_check(project, junit_stage(), pinned_cases='["a=skipped"]', cand_cases='["a=skipped"]')
    assert result["verdict"] == "FAIL"


def test_a_tests_measurement_reads_whole_as_its_kind(project: Callable[..., Project]) -> None:
    """Each role's measurement of a real `tests` check reads whole as the kind's type, and a
    field the type does not know is refused when judged, naming the file and key (the run's
    part alone would not have seen it)."""
    p = project(ARMS.format(pinned="", cand="", pinned_cases='["a=passed"]', cand_cases='["a=passed"]'))
    p.stage("30-numerics.toml", junit_stage())
    runner.invoke(app, ["run", "--candidate", "cand", "--project", str(p.root)])
    folder = p.run_dirs()[0] / "30-numerics" / "ops"
    result = json.loads((folder / "result.json").read_text())
    assert result["verdict"] == "PASS", result["reason"]
    spec = CheckSpec(**{**result["spec"], "roles": tuple(result["spec"]["roles"]), "timeout_s": None})
    saved = SavedCheck(folder, spec, spec.roles)
    for role in spec.roles:
        measured = saved.measured(role, JUnitRun)
        assert measured is not None and measured.ok and measured.junit is not None
    path = folder / "candidate" / "measurement.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "junit_copy": "x"}))
    with pytest.raises(RunStoreError, match=r"candidate/measurement.json: junit_copy: not a field"):
        judge_tests(saved)


def test_missing_junit_from_candidate_is_fail(project: Callable[..., Project]) -> None:
    stage = f"""
[[check]]
kind = "tests"
name = "ops"
run = '''{{py}} {HELPERS / "write_file.py"} {{out_file}}.{{role}} '<testsuite><testcase name="a"/></testsuite>' '''
junit = "{{out_file}}.pinned"
"""
    result = run_check(project, stage)
    assert result["verdict"] == "FAIL"
    assert result["findings"][0]["role"] == "candidate"
    assert "wrote no JUnit XML" in result["findings"][0]["message"]


CTEST_TREE = """
cmake_minimum_required(VERSION 3.16)
project(t NONE)
enable_testing()
add_test(NAME ok COMMAND sh -c "exit 0")
add_test(NAME bad COMMAND sh -c "exit $BAD")
"""


def test_ctest_runs_on_a_writable_copy_of_a_read_only_tree(
    project: Callable[..., Project], tmp_path: Path
) -> None:
    """A read-only directory stands in for a test tree in the nix store; ctest runs for real."""
    import shutil
    import subprocess

    if shutil.which("ctest") is None or shutil.which("cmake") is None:
        pytest.skip("cmake/ctest not installed")
    src, build = tmp_path / "src", tmp_path / "tree"
    src.mkdir()
    (src / "CMakeLists.txt").write_text(CTEST_TREE)
    subprocess.run(["cmake", "-S", str(src), "-B", str(build)], check=True, capture_output=True)
    for path in [build, *build.rglob("*")]:
        path.chmod(path.stat().st_mode & ~0o222)
    p = project("""
[arms.pinned]
installable = ".#default"
env = { BAD = "0" }
[arms.cand]
installable = ".#cand"
env = { BAD = "1" }
""")
    p.stage(
        "20-compile.toml",
        f"""
[[check]]
kind = "tests"
name = "ctest"
copy = "{build}"
run = "ctest --output-junit {{out_file}}"
""",
    )
    result = runner.invoke(app, ["run", "--candidate", "cand", "--project", str(p.root)])
    check = p.run_dirs()[0] / "20-compile" / "ctest"
    saved = json.loads((check / "result.json").read_text())
    assert saved["verdict"] == "FAIL", result.output
    assert any(f["message"].startswith("newly failing: bad") for f in saved["findings"])
    assert (check / "pinned" / "work" / "Testing").is_dir()
    assert not (build / "Testing").exists()
    assert read_junit(check / "pinned" / "junit.xml") == {"ok": "passed", "bad": "passed"}
    for path in [build, *build.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o200)
