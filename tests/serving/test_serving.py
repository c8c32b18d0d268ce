"""The serving stage's `openai-suite` kind against a deliberately broken peer.

tests/serving/broken_openai_server.py stands in for a misbehaving inference server (bad tool-call
JSON, a 500 on long prompts, a broken stream, a slow role, a server that never becomes healthy
or dies mid-suite): each suite and the timing gate must fail when it should, and no server
process may outlive a run. Real llama-server binaries are exercised in test_example_serving.py.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import PY, REPO, Project, qualify_proc

from qualify.core.verdicts import Verdict
from qualify.records.serving import GreedyRun, ServingCase, TimingRecord
from qualify.serving.compare import compare_cases, first_divergence
from qualify.serving.timing import judge_timing, pairs_needed

HELPER = Path(__file__).resolve().parent / "broken_openai_server.py"
CONFIG = """
[arms.pinned]
installable = ".#default"
vars = {{ faults = {pinned} }}

[arms.cand]
installable = ".#cand"
vars = {{ faults = {cand} }}
"""


def left_behind(tag: str) -> list[str]:
    """Processes whose command line holds `tag` (a server that outlived its run)."""
    found = subprocess.run(["pgrep", "-af", f"tag={tag}"], capture_output=True, text=True, check=False)
    return [line for line in found.stdout.splitlines() if "pgrep" not in line]


def serving_project(
    project: Callable[..., Project],
    cand: list[str],
    *,
    suites: list[str],
    timing: list[str] | None = None,
    extra: str = "",
    server: str = "{py} {helper} {port} tag={tag} {faults}",
    config: str | None = None,
) -> tuple[Project, str]:
    """A project of one serving check; its arms pinned and cand (`cand` its faults), or
    `config`'s."""
    tag = uuid.uuid4().hex[:12]
    p = project(config if config is not None else CONFIG.format(pinned="[]", cand=json.dumps(cand)))
    p.stage(
        "40-serving.toml",
        f"""
        name = "serving"
        [[check]]
        kind = "openai-suite"
        name = "api"
        server = "{server.replace("{helper}", str(HELPER)).replace("{tag}", tag)}"
        suites = {json.dumps(suites)}
        timing = {json.dumps(timing or [])}
        ready_timeout = 5
        request_timeout = 20
        n_predict = 8
        timing_tokens = 6
        warmup = 1
        {extra}
        """,
    )
    return p, tag


def run_serving(p: Project, tag: str) -> tuple[int, dict, str]:
    proc = qualify_proc("run", "--candidate", "cand", "--project", str(p.root))
    [run] = p.run_dirs()
    result = json.loads((run / "40-serving" / "api" / "result.json").read_text())
    assert left_behind(tag) == [], "a server outlived the run"
    return proc.returncode, result, proc.stdout + proc.stderr


def messages(result: dict) -> str:
    return "\n".join(f"{f['verdict']} {f['role']}: {f['message']}" for f in result["findings"])


def test_pairs_are_computed_so_the_one_sided_test_can_reach_its_level() -> None:
    assert pairs_needed(0.01, 1) == 7  # 5 pairs give at best 1/32 = 0.031, 6 give 0.0156
    assert 0.5**5 > 0.01
    assert pairs_needed(0.05, 3) == 6  # 0.05/3 = 0.0167: 1/64 reaches it, 1/32 does not
    assert pairs_needed(0.05, 9) == 8


def test_greedy_divergence_at_a_near_tie_is_not_a_failure() -> None:
    pinned = GreedyRun(tokens=[1, 2, 3, 4], margins=[2.0, 1.0, 0.01, 3.0])

    def candidate(*tokens: int) -> GreedyRun:
        return GreedyRun(tokens=list(tokens), margins=[None] * len(tokens))

    tie = first_divergence(pinned, candidate(1, 2, 9, 9), tie_margin=0.05)
    assert (tie.position, tie.tie) == (2, True)
    sure = first_divergence(pinned, candidate(1, 7, 3, 4), tie_margin=0.05)
    assert (sure.position, sure.tie) == (1, False)
    assert first_divergence(pinned, candidate(1, 2, 3, 4), 0.05).position is None
    early_stop = first_divergence(pinned, candidate(1, 2), 0.05)
    assert (early_stop.position, early_stop.tie) == (2, True)


def _records(pinned: list[float], candidate: list[float]) -> list[TimingRecord]:
    records = []
    for pair, (p, c) in enumerate(zip(pinned, candidate, strict=True)):
        for position, (role, value) in enumerate((("pinned", p), ("candidate", c))):
            records.append(
                TimingRecord(
                    type="completion",
                    pair=pair,
                    role=role,
                    position=position,
                    ok=True,
                    status=200,
                    events=7,
                    ttft_ms=value,
                    tpot_ms=value / 10,
                    e2e_ms=value * 2,
                    tokens=6,
                )
            )
    return records


def test_timing_gate_needs_both_the_bound_and_significance() -> None:
    pinned = [100.0, 101, 99, 100, 102, 98, 100]
    slower = [p + 30 for p in pinned]
    rows = judge_timing(_records(pinned, slower), ["completion"], 0.05, 5.0, 3.0)
    assert {r.metric: r.result for r in rows} == {"ttft_ms": "FAIL", "tpot_ms": "PASS", "e2e_ms": "FAIL"}
    # 4 % slower is inside the 5 % bound: never a failure, however consistent.
    inside = judge_timing(_records(pinned, [p * 1.04 for p in pinned]), ["completion"], 0.05, 5.0, 3.0)
    assert all(r.result == "PASS" for r in inside)
    # Over the bound in the median but only 3 pairs: cannot reach 0.05/3 one-sided.
    few = judge_timing(_records(pinned[:3], slower[:3]), ["completion"], 0.05, 5.0, 3.0)
    assert few[0].result == "INCONCLUSIVE" and not few[0].reachable


@pytest.mark.slow
def test_healthy_peers_pass_every_suite(project: Callable[..., Project]) -> None:
    p, tag = serving_project(project, [], suites=[], extra="", timing=["completion"])
    # suites = [] would select none: rewrite with every suite (the kind's default).
    stage = p.root / "stages" / "40-serving.toml"
    stage.write_text(stage.read_text().replace("suites = []\n", ""))
    code, result, out = run_serving(p, tag)
    assert result["verdict"] == "PASS", messages(result) + out
    assert result["facts"]["cases"] == {"pinned": 26, "candidate": 26}
    assert result["facts"]["timing"]["pairs"] == 6
    assert all(g["position"] is None for g in result["facts"]["greedy"])
    titles = [t["title"] for t in result["tables"]]
    assert any(t.startswith("Timing gate") for t in titles) and "Servers" in titles


@pytest.mark.slow
@pytest.mark.parametrize(
    ("fault", "suites", "timing", "expected"),
    [
        ("bad-tool-json", ["tools"], [], "tools/tool-choice-required: tool arguments are not JSON"),
        ("long-500", ["long-context"], [], "long-context/near-limit: HTTP 500"),
        ("broken-stream", ["streaming"], [], "streaming/completion-stream: stream events that are not JSON"),
        ("diverge", ["completion"], [], "completion/completion-0: greedy tokens differs at token 2"),
        ("slow", ["readiness"], ["completion"], "timing completion tpot_ms: median"),
    ],
)
def test_each_suite_fails_on_its_fault(
    project: Callable[..., Project], fault: str, suites: list[str], timing: list[str], expected: str
) -> None:
    p, tag = serving_project(project, [fault], suites=suites, timing=timing)
    code, result, out = run_serving(p, tag)
    assert result["verdict"] == "FAIL", messages(result) + out
    assert expected in messages(result), messages(result)
    assert code == 1


@pytest.mark.slow
def test_server_that_never_becomes_healthy_fails_with_its_log(project: Callable[..., Project]) -> None:
    p, tag = serving_project(project, ["never-healthy"], suites=["readiness", "completion"])
    code, result, out = run_serving(p, tag)
    assert result["verdict"] == "FAIL"
    assert "candidate: server did not start: server not ready after 5 s" in result["reason"]
    servers = next(t for t in result["tables"] if t["title"] == "Servers")
    assert [servers["rows"][1][0], servers["rows"][1][6], servers["rows"][1][7]] == [
        "candidate",
        "not started",
        "readiness, completion",
    ]


@pytest.mark.slow
def test_server_dying_mid_suite_fails_and_lists_what_did_not_run(project: Callable[..., Project]) -> None:
    p, tag = serving_project(project, ["die-after=3"], suites=["readiness", "completion", "chat", "sampling"])
    code, result, out = run_serving(p, tag)
    assert result["verdict"] == "FAIL", messages(result)
    assert "server died in suite completion (not run: completion, chat, sampling)" in messages(result)
    assert "GET /props" in messages(result) or "POST" in messages(result)  # the log tail is shown


@pytest.mark.slow
def test_port_in_use_fails_cleanly(project: Callable[..., Project]) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        p, tag = serving_project(
            project, [], suites=["readiness"], server="{py} {helper} {bind_port} tag={tag}"
        )
        config = p.root / "qualify.toml"
        config.write_text(
            config.read_text()
            .replace("vars = { faults = [] }", "vars = { faults = [], bind_port = 0 }", 1)
            .replace("vars = { faults = [] }", f"vars = {{ faults = [], bind_port = {port} }}")
        )
        code, result, out = run_serving(p, tag)
    assert result["verdict"] == "FAIL", messages(result)
    assert "Address already in use" in messages(result)


@pytest.mark.slow
def test_ctrl_c_stops_every_server(project: Callable[..., Project]) -> None:
    p, tag = serving_project(
        project, ["slow"], suites=["readiness"], timing=["completion"], extra="repeats = 400"
    )
    proc = subprocess.Popen(
        [PY, "-m", "qualify", "run", "--candidate", "cand", "--project", str(p.root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + 60
    while len(left_behind(tag)) < 2:
        assert time.monotonic() < deadline, "the servers never started"
        time.sleep(0.1)
    time.sleep(1.0)  # inside the timing pairs
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, out
    assert left_behind(tag) == []
    [run] = p.run_dirs()
    assert json.loads((run / "run.json").read_text())["status"] == "interrupted"


def test_stage_files_load(tmp_path: Path) -> None:
    from qualify.pipeline.plan import load_plan

    default = load_plan(None).stage("serving").checks[0]
    assert default.kind == "openai-suite" and "{port}" in default.params["server"]
    quick = load_plan(REPO / "examples" / "llama-cpp" / "stages", "quick").stage("serving").checks[0]
    assert quick.params["timing"] == ["completion"] and quick.vars["ctx"] == 1024


@pytest.mark.slow
def test_candidate_alone_fails_on_its_own_failing_cases(project: Callable[..., Project]) -> None:
    """With roles = ["candidate"] there is nothing to compare with, yet its failing cases
    (tool arguments that are not JSON, a stream that is not JSON) still fail the check."""
    p, tag = serving_project(
        project,
        ["bad-tool-json", "broken-stream"],
        suites=["tools", "streaming"],
        extra='roles = ["candidate"]',
    )
    code, result, out = run_serving(p, tag)
    assert result["verdict"] == "FAIL", messages(result) + out
    assert "tool arguments are not JSON" in messages(result)
    assert "stream events that are not JSON" in messages(result)
    assert any(j.endswith("candidate cases checked") for j in result["judged"])
    assert code == 1


def test_a_case_pinned_ran_and_the_candidate_did_not_fails() -> None:
    def case(name: str) -> ServingCase:
        return ServingCase(
            suite="tools", case=name, problems=[], strict={}, text={}, greedy=None, greedy_ref=None, note=""
        )

    by_role = {"pinned": [case("a"), case("b")], "candidate": [case("a")]}
    findings, rows, _ = compare_cases(by_role, 0.5)
    [lost] = [f for f in findings if f.verdict is Verdict.FAIL]
    assert lost.role == "candidate" and "tools/b: ran in pinned, not in the candidate" in lost.message
    assert [r.across for r in rows] == ["equal", "one role only"]


def test_the_declared_suites_are_those_that_run_in_their_order() -> None:
    from qualify.serving.params import SUITE_NAMES
    from qualify.serving.suites import SUITES

    assert tuple(SUITES) == SUITE_NAMES
