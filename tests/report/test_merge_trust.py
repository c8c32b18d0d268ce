"""`qualify merge` believes nothing a host's folder says about itself.

Each host is a real run of a small six-stage project (real `command` checks, the CLI as a user
runs it, with its own `--host-label`); what a host's folder then says is edited the way a broken
or forged folder would say it (its measurements gone, a result's limits loosened and its records
made to agree, a result of another kind than its plan's, a check of a kind this qualify does not
know, an archive holding two runs). The
merged verdict of each host must be what `qualify report --rejudge` of the same folder decides.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import shutil
import tarfile
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import PY, Project, command_stage
from test_fleet import host_project, merge, run_on
from typer.testing import CliRunner

from qualify.cli import app

runner = CliRunner()
EMIT = Path(__file__).resolve().parent.parent / "helpers" / "emit_metrics.py"


def copy(run: Path, where: Path) -> Path:
    target = where / run.name
    shutil.copytree(run, target, symlinks=True, ignore=shutil.ignore_patterns("lock"))
    return target


def measured_nothing(run: Path) -> None:
    """Every record still says PASS; every role's measurement is gone."""
    for role_dir in [*run.glob("*/*/pinned"), *run.glob("*/*/candidate")]:
        shutil.rmtree(role_dir)


def loosened(run: Path) -> None:
    """The bench's FAIL made PASS in every record, its result's limit loosened to match."""
    folder = run / "60-bench"
    result_path = folder / "bench-check" / "result.json"
    result = json.loads(result_path.read_text())
    assert result["verdict"] == "FAIL", result
    result["verdict"], result["reason"] = "PASS", "1 metrics within limits"
    result["findings"] = [f for f in result.get("findings", []) if f.get("verdict") == "PASS"]
    result["spec"]["limits"] = {"min_speed": 1.0}
    result_path.write_text(json.dumps(result))
    stage = json.loads((folder / "stage.json").read_text())
    stage["verdict"] = "PASS"
    stage["checks"] = [{**c, "verdict": "PASS"} for c in stage["checks"]]
    (folder / "stage.json").write_text(json.dumps(stage))
    saved = json.loads((run / "run.json").read_text())
    saved.update(verdict="QUALIFIED", exit_code=0, stages={k: "PASS" for k in saved.get("stages", {})})
    (run / "run.json").write_text(json.dumps(saved))
    reseal(run)


def reseal(run: Path) -> None:
    """What a forger does next where the run keeps a digest of its records (seal.json): the
    digests written again to match (nothing on another host's folder can stop that)."""
    seal_path = run / "seal.json"
    if not seal_path.is_file():
        return
    seal = json.loads(seal_path.read_text())
    for key in seal.get("records", {}):
        seal["records"][key] = hashlib.sha256((run / key).read_bytes()).hexdigest()
    seal_path.write_text(json.dumps(seal))


def sealed_elsewhere(run: Path) -> None:
    """The run's seal made again as another host's qualify makes it: its digests, authenticated
    with a key this host does not hold (a host whose qualify writes a kind this one lacks)."""
    key = secrets.token_bytes(32)
    records = {}
    for key_path in json.loads((run / "seal.json").read_text())["records"]:
        records[key_path] = hashlib.sha256((run / key_path).read_bytes()).hexdigest()
    named = hashlib.sha256(key).hexdigest()[:16]
    payload = json.dumps({"key": named, "records": records}, sort_keys=True, separators=(",", ":"))
    mac = hmac.new(key, payload.encode(), hashlib.sha256).hexdigest()
    document = {"schema_version": 2, "key": named, "records": records, "mac": mac}
    (run / "seal.json").write_text(json.dumps(document))


def slow_bench_host(project: Callable[..., Project]) -> Project:
    """Six passing stages, but the candidate's bench below the plan's `min_speed`."""
    p = host_project(project, fail_serving=False)
    p.stage(
        "60-bench.toml",
        command_stage(
            "bench", f"{PY} {EMIT} {{out_file}} speed:higher:90,91,92", metrics="true",
            limits="{ min_speed = 100 }",
        ),
    )  # fmt: skip
    return p


def rejudged(p: Project, run: Path) -> str:
    """The verdict `qualify report --rejudge` gives the folder, with the host's own project."""
    result = runner.invoke(app, ["report", str(run), "--rejudge", "--json", "--project", str(p.root)])
    assert result.exit_code == 0, result.output
    return str(json.loads(result.stdout[result.stdout.index("{") :])["verdict"])


def merged_hosts(*runs: Path, out: Path, extra: tuple[str, ...] = ()) -> tuple[int, dict[str, str], str]:
    code, output = merge(*map(str, runs), "--out", str(out), "--json", *extra)
    assert "{" in output, output
    document = json.loads(output[output.index("{") :])
    return code, {h["host"]: h["verdict"] for h in document["hosts"]}, str(document["verdict"])


@pytest.mark.parametrize(
    "case",
    [
        pytest.param("qualified", marks=pytest.mark.slow),
        pytest.param("fails", marks=pytest.mark.slow),
        "measured nothing",
        pytest.param("limits loosened", marks=pytest.mark.slow),
    ],
)
def test_each_hosts_merged_verdict_is_what_rejudge_decides(
    project: Callable[..., Project], tmp_path: Path, case: str
) -> None:
    """A host's folder whose records all say PASS while nothing was measured used to merge as
    QUALIFIED (rejudge: INCOMPLETE); one whose failing result was edited to PASS with its limit
    loosened to match used to merge as QUALIFIED (rejudge, by the plan the run records: NOT
    QUALIFIED)."""
    if case == "limits loosened":
        p = slow_bench_host(project)
    else:
        p = host_project(project, fail_serving=case == "fails")
    run = run_on(p, "host-a")
    if case == "measured nothing":
        measured_nothing(run)
    elif case == "limits loosened":
        loosened(run)
    for_merge, for_report = copy(run, tmp_path / "m"), copy(run, tmp_path / "r")
    expected = rejudged(p, for_report)
    code, hosts, fleet = merged_hosts(for_merge, out=tmp_path / "fleet")
    assert hosts == {"host-a": expected}, (case, hosts, expected)
    assert fleet == expected and code == {"QUALIFIED": 0, "NOT QUALIFIED": 1, "INCOMPLETE": 3}[expected]
    if case in ("measured nothing", "limits loosened"):
        assert expected != "QUALIFIED"
    # The fleet's own folder says so when read back, and the host's page agrees.
    shown = json.loads((tmp_path / "fleet" / "report.json").read_text())
    assert shown["verdict"] == expected and shown["hosts"][0]["verdict"] == expected
    assert (
        json.loads((tmp_path / "fleet" / "hosts" / "host-a" / "report.json").read_text())["verdict"]
        == expected
    )


def of_kind(run: Path, kind: str, everywhere: bool) -> None:
    """The serving check's result made one of `kind`; `everywhere`: its stage.json and the plan
    its run.json records say so too (a kind of a newer qualify, say), else only the result."""
    files = [run / "40-serving" / "serving-check" / "result.json"]
    if everywhere:
        files += [run / "40-serving" / "stage.json", run / "run.json"]
    for path in files:
        document = json.loads(path.read_text())
        if "kind" in document:
            document["kind"] = kind
        plans = [document.get("spec") or {}, document.get("plan") or {}]
        for stage in [s for plan in plans for s in plan.get("stages", [plan])]:
            for check in stage.get("checks", [stage] if "kind" in stage else []):
                if check.get("name") == "serving-check":
                    check["kind"] = kind
        path.write_text(json.dumps(document))
    sealed_elsewhere(run)


@pytest.mark.slow
@pytest.mark.parametrize("everywhere", [False, True], ids=["result of another kind", "kind unknown here"])
def test_a_host_that_cannot_be_rejudged_is_shown_as_such(
    project: Callable[..., Project], tmp_path: Path, everywhere: bool
) -> None:
    """A result whose kind is not its plan's check's (it would be re-decided by its own saved
    limits), or a check of a kind this qualify does not know: the host is INCOMPLETE, named with
    why, never QUALIFIED on its own word. The host's folder is sealed as another host's qualify
    seals it (a forger's seal, made without this host's key, makes the host not sealed)."""
    good = run_on(host_project(project, fail_serving=False), "good-host")
    odd = copy(run_on(host_project(project, fail_serving=False), "odd-host"), tmp_path / "odd")
    of_kind(odd, "teleport", everywhere)
    out = tmp_path / "fleet"
    # A plan of another kind differs from the good host's: merged anyway, to see the host shown.
    code, hosts, fleet = merged_hosts(good, odd, out=out, extra=("--allow-mixed",) if everywhere else ())
    assert code == 3 and fleet == "INCOMPLETE", hosts
    assert hosts == {"good-host": "QUALIFIED", "odd-host": "INCOMPLETE"}
    model = json.loads((out / "report.json").read_text())
    [odd_view] = [h for h in model["hosts"] if h["key"] == "odd-host"]
    assert "not re-judged" in odd_view["verdict_reason"] and "teleport" in odd_view["verdict_reason"]
    assert ("unknown check kind" in odd_view["verdict_reason"]) is everywhere, odd_view["verdict_reason"]
    assert "odd-host" in model["verdict_reason"]
    summary = (out / "summary.md").read_text()
    assert "odd-host" in summary and "not re-judged" in summary
    # Every stage of it is an error in junit.xml: nothing there was judged here.
    suites = {x.get("name"): x for x in ET.parse(out / "junit.xml").getroot()}
    odd_suites = [x for name, x in suites.items() if str(name).startswith("odd-host/")]
    assert len(odd_suites) == 7 and all(x.get("errors") == "1" for x in odd_suites)
    assert all(x.get("errors") == "0" for name, x in suites.items() if str(name).startswith("good-host/"))
    assert ".fleet." not in odd_view["verdict_reason"]  # named where the fleet keeps it
    # Read back from the folder alone, it stays so.
    again = runner.invoke(app, ["report", str(out)])
    assert again.exit_code == 0, again.output
    assert json.loads((out / "report.json").read_text())["verdict"] == "INCOMPLETE"


def two_runs(project: Callable[..., Project]) -> tuple[Project, Path, Path]:
    """One host's runs folder: an older QUALIFIED run, then a newer one whose serving fails."""
    p = host_project(project, fail_serving=False)
    older = run_on(p, "box")
    (p.root / "qualify.toml").write_text(
        (p.root / "qualify.toml").read_text().replace('broken = "none"', 'broken = "serving"')
    )
    newer = run_on(p, "box")
    assert older != newer
    return p, older, newer


@pytest.mark.slow
def test_an_archive_of_several_runs_is_refused_unless_one_is_named(
    project: Callable[..., Project], tmp_path: Path
) -> None:
    """It used to take one of them silently: the older, QUALIFIED one over the newer failure."""
    p, older, newer = two_runs(project)
    archive = tmp_path / "box-runs.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(p.runs, arcname="runs")
    out = tmp_path / "fleet"
    code, said = merge(str(archive), "--out", str(out))
    flat = " ".join(said.split())
    assert code == 4, said
    assert str(archive) in flat and older.name in flat and newer.name in flat and "--run" in flat, flat
    assert not out.exists()
    code, hosts, fleet = merged_hosts(archive, out=out, extra=("--run", newer.name))
    assert code == 1 and fleet == "NOT QUALIFIED" and hosts == {"box": "NOT QUALIFIED"}
    document = json.loads((out / "run.json").read_text())
    assert document["hosts"][0]["run_id"] == newer.name
    code, hosts, fleet = merged_hosts(archive, out=tmp_path / "older", extra=("--run", older.name))
    assert code == 0 and hosts == {"box": "QUALIFIED"}


@pytest.mark.slow
def test_a_folder_of_several_runs_is_refused_unless_one_is_named(
    project: Callable[..., Project], tmp_path: Path
) -> None:
    p, older, newer = two_runs(project)
    code, said = merge(str(p.runs), "--out", str(tmp_path / "fleet"))
    flat = " ".join(said.split())
    assert code == 4 and str(p.runs) in flat and older.name in flat and newer.name in flat, flat
    code, hosts, _ = merged_hosts(p.runs, out=tmp_path / "fleet", extra=("--run", newer.name))
    assert code == 1 and hosts == {"box": "NOT QUALIFIED"}
    # A --run that names no run found is refused, not ignored.
    code, said = merge(str(newer), "--out", str(tmp_path / "x"), "--run", "20991231-000000-typo")
    flat = " ".join(said.split())
    assert code == 4 and "20991231-000000-typo" in flat and newer.name in flat, flat
