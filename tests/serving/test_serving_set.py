"""The serving stage in a run set: pinned's server, suites and timing requests once, each
member's arm beside it, and every member judged from that one measurement as a run of one.

tests/serving/broken_openai_server.py stands in for the servers (as in test_serving.py): one
healthy candidate and one whose generation is slow (`slow`), so that the timing gate must pass
the one and fail the other from the same rounds. Real llama-servers in a set are exercised by
the example's run set (test_example_serving.py)."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from conftest import Project, qualify_proc
from test_serving import left_behind, serving_project

from qualify.core.context import rounds_order
from qualify.records.serving import ServingTiming
from qualify.serving.memberview import member_timing

CONFIG = """
[arms.pinned]
installable = ".#default"
vars = { faults = [] }

[arms.good]
installable = ".#good"
vars = { faults = [] }

[arms.slow]
installable = ".#slow"
vars = { faults = ["slow"] }
"""


def set_project(project: Callable[..., Project]) -> tuple[Project, str]:
    return serving_project(
        project, [], suites=["readiness", "completion"], timing=["completion"], config=CONFIG
    )


def test_rounds_give_every_role_every_position_and_keep_abba_for_two() -> None:
    assert rounds_order(("p", "c"), 4) == [("p", "c"), ("c", "p"), ("p", "c"), ("c", "p")]
    order = rounds_order(("p", "a", "b"), 6)
    for role in ("p", "a", "b"):
        assert sorted(o.index(role) for o in order) == [0, 0, 1, 1, 2, 2]
    assert order[3] == tuple(reversed(order[0]))


def test_a_member_reads_only_pinned_and_its_own_requests() -> None:
    request = {"type": "completion", "pair": 0, "ok": False, "status": 0, "events": 0, "error": "refused"}
    saved = ServingTiming.load(
        {
            "schema_version": 1,
            "pairs": 1,
            "types": ["completion"],
            "warmup": 0,
            "records": [
                {**request, "role": role, "position": i} for i, role in enumerate(("pinned", "good", "slow"))
            ],
        },
        "timing.json",
    )
    view = member_timing(saved, "slow")
    assert [r.role for r in view.records] == ["pinned", "candidate"] and view.pairs == 1
    assert [r.position for r in view.records] == [0, 2]
    # Written as the member's own timing.json, it reads back as it was.
    assert ServingTiming.load(view.to_json(), "timing.json") == view


@pytest.mark.slow
def test_pinned_is_served_once_and_each_member_judged_from_the_shared_rounds(
    project: Callable[..., Project],
) -> None:
    p, tag = set_project(project)
    proc = qualify_proc("run", "--candidate", "good", "--candidate", "slow", "--project", str(p.root))
    assert left_behind(tag) == [], "a server outlived the run"
    [run] = p.run_dirs()
    joint = run / "40-serving" / "api"
    # One measurement: pinned's server log and cases once, beside each member's.
    logs = sorted(f.name for f in (joint / "logs").iterdir())
    assert logs == ["good-server.log", "pinned-server.log", "slow-server.log"], logs
    timing = json.loads((joint / "timing.json").read_text())
    pinned = [r for r in timing["records"] if r["role"] == "pinned"]
    assert len(pinned) == timing["pairs"], "pinned sent one timing request a round, for every member"
    results = {
        m: json.loads((run / m / "40-serving" / "api" / "result.json").read_text()) for m in ("good", "slow")
    }
    out = proc.stdout + proc.stderr
    assert results["good"]["verdict"] == "PASS", results["good"]["reason"] + out
    assert results["slow"]["verdict"] == "FAIL", results["slow"]["reason"] + out
    assert "timing completion tpot_ms" in json.dumps(results["slow"]["findings"])
    for member, result in results.items():
        assert result["facts"]["cases"]["pinned"] == result["facts"]["cases"]["candidate"] > 0, member
        saved = json.loads((run / member / "40-serving" / "api" / "timing.json").read_text())
        assert {r["role"] for r in saved["records"]} == {"pinned", "candidate"}
        assert len(saved["records"]) == 2 * timing["pairs"]
    # A rejudge of a member reads its own folder alone, and says the same.
    again = qualify_proc("report", "--rejudge", str(run), "--project", str(p.root))
    assert again.returncode == 0, again.stdout + again.stderr
    for member in ("good", "slow"):
        result = json.loads((run / member / "40-serving" / "api" / "result.json").read_text())
        assert result["verdict"] == results[member]["verdict"], member
