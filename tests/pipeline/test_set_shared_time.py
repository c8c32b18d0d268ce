"""Where a run set's time went: a check whose measurement the set made once for several members
shows that measurement's duration, marked as shared and with whom, never the moment its member
took to read it.

The set is real: a `metrics` bench whose units are a small Python script (it stands in for an
engine, which this machine cannot run), measured once for a candidate and the positive control,
with command checks at the other stages.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from conftest import Project
from metricsets import bench_set
from typer.testing import CliRunner

from qualify.cli import app

runner = CliRunner()


def make(project: Callable[..., Project]) -> Project:
    return bench_set(project, ("cand", "cand2"))


def cli(p: Project, *args: str) -> tuple[int, str]:
    result = runner.invoke(app, [*args, "--project", str(p.root)], env={"COLUMNS": "250"})
    return result.exit_code, result.stdout if "--json" in args else result.output


def bench_check(model: dict[str, Any]) -> dict[str, Any]:
    (stage,) = [s for s in model["stages"] if s["name"] == "bench"]
    (check,) = stage["checks"]
    return dict(check)


@pytest.mark.slow
def test_a_shared_bench_shows_the_time_of_the_set_s_measurement_and_with_whom(
    project: Callable[..., Project],
) -> None:
    """Before, each member's bench showed the moment it took to read the set's schedule (0.0 s
    in the report, about 0.01 s in the JSON), and nothing said the time had gone into one
    measurement for every member: `qualify show` printed no time and its JSON had no such field."""
    p = make(project)
    code, out = cli(p, "run", "--candidate", "cand", "--candidate", "cand2")
    assert code == 0, out
    (run,) = (d for d in p.runs.iterdir() if (d / "run.json").is_file())
    joint = json.loads((run / "60-bench" / "speed" / "schedule.json").read_text())
    members = joint["roles"][1:]
    assert sorted(members) == ["cand", "cand2", "positive-pinned"]
    # Ten pairs of three roles, 50 ms a unit at least: the joint schedule took over 1.5 s.
    assert joint["duration_s"] > 1.5
    for label in members:
        own = json.loads((run / label / "60-bench" / "speed" / "result.json").read_text())
        assert own["duration_s"] < joint["duration_s"] / 5  # the member only read it
        code, shown = cli(p, "show", str(run / label), "--json")
        assert code == 0, shown
        check = bench_check(json.loads(shown))
        others = [m for m in members if m != label]
        assert check["shared"]["duration_s"] == joint["duration_s"]
        assert check["shared"]["with_members"] == others
        said = f"{joint['duration_s']:.1f} s, shared with 2 members ({', '.join(others)})"
        assert check["duration"] == said
        # `qualify show` prints the same words in the bench's row.
        code, table = cli(p, "show", str(run / label))
        assert code == 0, table
        row = next(line for line in table.splitlines() if "speed" in line)
        assert said[:30] in row and not re.search(r"\b0\.0 s\b", row), row
        # The member's stage says its own moment and where the time went.
        (stage,) = [s for s in json.loads(shown)["stages"] if s["name"] == "bench"]
        assert stage["duration"].endswith(
            f"here, after {joint['duration_s']:.1f} s measuring speed once for it and 2 members ({', '.join(others)})"
        )
    # The set's show --json and its report.json carry each member's view the same way.
    code, shown = cli(p, "show", run.name, "--json")
    assert code == 0, shown
    report = json.loads((run / "report.json").read_text())
    for document in (json.loads(shown), report):
        for model in document["members"]:
            check = bench_check(model)
            assert check["shared"]["duration_s"] == joint["duration_s"], model["run_id"]
            assert model["run_id"] not in check["shared"]["with_members"]
            assert check["duration"].startswith(f"{joint['duration_s']:.1f} s, shared with 2 members")


@pytest.mark.slow
def test_junit_gives_a_shared_bench_the_time_of_the_set_s_measurement(
    project: Callable[..., Project],
) -> None:
    """Before, the bench suite of each member in junit.xml said `time="0.144"`: the moment the
    member took to read the set's measurement, read by CI tools as how long the bench took."""
    import xml.etree.ElementTree as ET

    p = make(project)
    code, out = cli(p, "run", "--candidate", "cand")
    assert code == 0, out
    (run,) = (d for d in p.runs.iterdir() if (d / "run.json").is_file())
    joint = json.loads((run / "60-bench" / "speed" / "schedule.json").read_text())
    suites = {s.get("name"): s for s in ET.parse(run / "junit.xml").getroot().iter("testsuite")}
    benches = {name: s for name, s in suites.items() if name and name.endswith("/bench")}
    assert sorted(benches) == ["cand/bench"], sorted(suites)  # a candidate's suites; the controls have none
    for suite in benches.values():
        [case] = suite.iter("testcase")
        assert float(case.get("time", "nan")) == round(joint["duration_s"], 3)
        assert float(suite.get("time", "nan")) >= round(joint["duration_s"], 3), suite.attrib
