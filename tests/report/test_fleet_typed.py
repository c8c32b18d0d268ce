"""`qualify merge` reads a host's folder through qualify's record types: a field of the wrong
type, or a key qualify does not write, is refused naming the file and the key, never read as
None; a well-formed folder reads as it always did (the plan's digest included)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import Project
from test_fleet import host_project, merge, run_on
from test_merge_trust import copy, sealed_elsewhere
from test_report import HELPERS

from qualify.core.errors import RunStoreError
from qualify.core.runstore import RunDir
from qualify.records.run import RunRecord
from qualify.report.fleet import fleet_model
from qualify.report.fleetinputs import plan_digest


def edit(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    document = json.loads(path.read_text())
    change(document)
    path.write_text(json.dumps(document))


def junit_host(project: Callable[..., Project]) -> Project:
    """Six stages, the compile stage a `tests` check (its facts typed: each role's counts)."""
    p = host_project(project, fail_serving=False)
    p.stage(
        "20-compile.toml",
        f"""name = "compile"
[[check]]
kind = "tests"
name = "ops"
run = "{{py}} {HELPERS / "write_junit.py"} {{out_file}} 'x=passed'"
""",
    )
    return p


@pytest.mark.slow
def test_wrong_typed_facts_leave_the_host_not_rejudged_naming_file_and_key(
    project: Callable[..., Project], tmp_path: Path
) -> None:
    good = run_on(junit_host(project), "good-host")
    odd = copy(run_on(junit_host(project), "odd-host"), tmp_path / "odd")
    result = odd / "20-compile" / "ops" / "result.json"
    edit(result, lambda d: d["facts"]["counts"]["candidate"].update(passed="1"))
    sealed_elsewhere(odd)  # another host's run, sealed with its own key
    out = tmp_path / "fleet"
    code, output = merge(str(good), str(odd), "--out", str(out), "--json")
    assert code == 3, output
    hosts = {h["host"]: h for h in json.loads(output[output.index("{") :])["hosts"]}
    assert hosts["good-host"]["verdict"] == "QUALIFIED"
    why = hosts["odd-host"]["reason"]
    assert hosts["odd-host"]["verdict"] == "INCOMPLETE" and why.startswith("not re-judged"), why
    assert "20-compile/ops/result.json" in why and "facts.counts.candidate.passed" in why, why


@pytest.mark.slow
def test_a_wrong_typed_provenance_field_is_refused_naming_file_and_key(
    project: Callable[..., Project], tmp_path: Path
) -> None:
    good = run_on(host_project(project, fail_serving=False), "good-host")
    odd = copy(run_on(host_project(project, fail_serving=False), "odd-host"), tmp_path / "odd")
    edit(odd / "run.json", lambda d: d["provenance"]["host"].update(hostname=["a", "list"]))
    sealed_elsewhere(odd)  # another host's run, sealed with its own key
    code, output = merge(str(good), str(odd), "--out", str(tmp_path / "fleet"))
    assert code != 0 and not (tmp_path / "fleet").exists(), output
    assert "run.json" in output and "provenance.host.hostname is a list, not a string" in output, output


@pytest.mark.slow
def test_a_misspelt_key_in_a_hosts_plan_is_refused_naming_it(
    project: Callable[..., Project], tmp_path: Path
) -> None:
    good = run_on(host_project(project, fail_serving=False), "good-host")
    odd = copy(run_on(host_project(project, fail_serving=False), "odd-host"), tmp_path / "odd")

    def misspelt(document: dict[str, Any]) -> None:
        check = document["plan"]["stages"][0]["checks"][0]
        check["limts"] = check.pop("limits")

    edit(odd / "run.json", misspelt)
    sealed_elsewhere(odd)  # another host's run, sealed with its own key
    code, output = merge(str(good), str(odd), "--out", str(tmp_path / "fleet"), "--allow-mixed")
    assert code != 0 and not (tmp_path / "fleet").exists(), output
    assert "plan.stages[0].checks[0].limts: not a field this qualify knows" in output, output


@pytest.mark.slow
def test_the_fleets_own_record_is_read_through_its_types(
    project: Callable[..., Project], tmp_path: Path
) -> None:
    one = run_on(host_project(project, fail_serving=False), "one-host")
    out = tmp_path / "fleet"
    code, output = merge(str(one), "--out", str(out))
    assert code == 0, output
    model = fleet_model(out)
    assert [h.key for h in model.hosts] == ["one-host"] and model.verdict == "QUALIFIED"
    saved = json.loads((out / "run.json").read_text())
    assert saved["hosts"] == [{"key": "one-host", "source": str(one), "run_id": saved["hosts"][0]["run_id"]}]
    assert isinstance(saved["hosts"][0]["run_id"], str)
    # A key misspelt in the fleet's own run.json is refused, naming it; not read as None.
    edit(out / "run.json", lambda d: d["hosts"][0].update(not_rejuged="why"))
    with pytest.raises(RunStoreError, match=r"run\.json: hosts\[0\]\.not_rejuged: not a field"):
        fleet_model(out)
    edit(out / "run.json", lambda d: d["hosts"][0].update(key=7, not_rejuged=None))
    with pytest.raises(RunStoreError, match=r"run\.json"):
        fleet_model(out)


def old_digest(plan: dict[str, Any]) -> str:
    """The plan's digest as the merge computed it from the raw run.json."""
    stages = [
        {
            "name": s.get("name"),
            "inconclusive": s.get("inconclusive"),
            "checks": [
                {k: c.get(k) for k in ("name", "kind", "params", "limits", "roles", "vars", "timeout_s")}
                for c in s.get("checks", [])
            ],
        }
        for s in plan.get("stages", [])
    ]
    return hashlib.sha256(json.dumps(stages, sort_keys=True, default=str).encode()).hexdigest()[:16]


def test_the_plan_digest_is_what_it_was(project: Callable[..., Project], tmp_path: Path) -> None:
    run = copy(run_on(host_project(project, fail_serving=False), "a-host"), tmp_path / "a")

    def limits(document: dict[str, Any]) -> None:  # an integer limit stays an integer
        check = document["plan"]["stages"][0]["checks"][0]
        check["limits"], check["timeout_s"] = {"max_x": 2, "min_y": 0.5}, 600

    edit(run / "run.json", limits)
    saved = json.loads((run / "run.json").read_text())
    assert plan_digest(RunRecord.load(RunDir(run))) == old_digest(saved["plan"])
