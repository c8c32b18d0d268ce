"""The bench stage on real llama-bench output from the example's arms, end to end on the saved
example runs (gcc vs clang, and A/A), and a stand-in engine that proves the gate fails."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
from conftest import Project
from example_arms import example_marks
from typer.testing import CliRunner

from qualify.bench.data import read_llama_bench
from qualify.bench.design import block_order
from qualify.cli import app

MODEL = Path(__file__).resolve().parents[2] / "examples" / "llama-cpp" / "data" / "gemma-3-270m-q4_k_m.gguf"


def llama_bench(out: Path, *args: str) -> str:
    done = subprocess.run(
        [str(out / "bin" / "llama-bench"), "-m", str(MODEL), "-o", "jsonl", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return done.stdout


@example_marks
def test_llama_bench_adapter_reads_real_jsonl(example_outs: dict[str, Path]) -> None:
    """Labels, throughput recomputed from samples_ns, configuration and build facts, on the
    JSONL the example's own llama-bench writes."""
    text = llama_bench(example_outs["pinned"], "-t", "2", "-p", "16", "-n", "4", "-d", "0,32", "-r", "2")
    tests = read_llama_bench(text, "llama-bench")
    assert [t.label for t in tests] == ["pp16", "tg4", "pp16 @ d32", "tg4 @ d32"]
    rows = [json.loads(line) for line in text.splitlines()]
    for test, row in zip(tests, rows, strict=True):
        assert test.unit == "t/s" and test.higher_is_better
        assert len(test.values) == 2 == len(row["samples_ns"])
        tokens = row["n_prompt"] + row["n_gen"]
        assert test.values == pytest.approx([1e9 * tokens / ns for ns in row["samples_ns"]])
        assert test.values == pytest.approx(row["samples_ts"], rel=1e-5)  # llama-bench's 6 digits
        assert test.config["n_threads"] == 2 and "samples_ns" not in test.config
        assert "avg_ts" not in test.config and "test_time" not in test.config
        assert test.engine["backends"] == "CPU" and test.engine["build_commit"]


@example_marks
def test_llama_bench_sweeps_are_told_apart_by_their_configuration(example_outs: dict[str, Path]) -> None:
    text = llama_bench(example_outs["clang19"], "-t", "1,2", "-p", "8", "-n", "0", "-r", "1")
    assert [t.label for t in read_llama_bench(text, "llama-bench")] == [
        "pp8 (n_threads=1)",
        "pp8 (n_threads=2)",
    ]


def bench_result(run_dir: Path) -> tuple[dict, dict]:
    folder = run_dir / "60-bench" / "llama-bench"
    return json.loads((folder / "result.json").read_text()), json.loads(
        (folder / "schedule.json").read_text()
    )


@example_marks
def test_gcc_vs_clang_bench_reaches_a_verdict_with_pairs_recorded(example_runs: dict) -> None:
    code, run_dir, out = example_runs["clang19"]
    result, schedule = bench_result(run_dir)
    assert result["verdict"] in ("PASS", "WARN", "FAIL", "INCONCLUSIVE"), result["reason"]
    plan = schedule["plan"]
    # Four tests, two looks at alpha 0.05 shared by two members (clang19 and the A/A): the first
    # Holm step is 0.025 / 2 / 4 = 0.003125, so 10 pairs at least (9 reach 0.0039 at best).
    assert plan["alpha"] == pytest.approx(0.025)
    assert plan["tests"] == 4 and plan["computed_min_pairs"] == 10 and plan["looks"] == [10, 14]
    pairs = result["facts"]["pairs"]
    assert pairs >= 10 or "budget" in schedule["stop_reason"], schedule["stop_reason"]
    assert schedule["stop_reason"]
    units = schedule["units"]
    assert [u["phase"] for u in units[:2]] == ["warmup", "warmup"]
    paired = [u for u in units if u["phase"] == "pair"]
    # Measured once with the A/A control in a Williams order; clang19's view keeps its units and
    # pinned's in the order they ran, and the set's schedule holds every role of every block.
    assert schedule["measured_with"] == ["pinned", "clang19", "positive-pinned"]
    joint = json.loads((Path(schedule["joint"]) / "schedule.json").read_text())
    for block in {u["pair"] for u in paired}:
        ran = [u["role"] for u in joint["units"] if u["phase"] == "pair" and u["pair"] == block]
        assert ran == block_order(schedule["measured_with"], block), (block, ran)
        mine = [u["role"] for u in paired if u["pair"] == block]
        expected = ["candidate" if r == "clang19" else r for r in ran if r in ("pinned", "clang19")]
        assert mine == expected
    assert all("load" in u["env_before"] and "load" in u["env_after"] for u in units)
    tests = result["facts"]["tests"]
    assert set(tests) == {"pp32", "tg8", "pp32 @ d64", "tg8 @ d64"}
    for role in ("pinned", "candidate"):
        samples = pd.read_parquet(run_dir / "60-bench" / "llama-bench" / role / "samples.parquet")
        assert set(samples["pair"]) == set(range(1, pairs + 1))
        assert (samples.groupby("unit").size() == 4 * 3).all()  # 4 tests × 3 repetitions
    assert result["tables"][0]["columns"][:4] == ["test", "pinned t/s", "candidate t/s", "Δ = R − 1"]


@example_marks
def test_a_a_bench_reports_no_regression(example_runs: dict) -> None:
    code, run_dir, out = example_runs["aa"]
    stage = json.loads((run_dir / "60-bench" / "stage.json").read_text())
    assert stage["verdict"] in ("PASS", "WARN"), (stage, out[-3000:])
    result, schedule = bench_result(run_dir)
    # A false regression needs significance and an estimate beyond δ; if it ever happens, the
    # data are printed so the seedless noise can be read.
    regressions = [t for t, f in result["facts"]["tests"].items() if f["regression"]]
    assert not regressions, json.dumps({"result": result, "units": schedule["units"]}, indent=1)[:20000]
    assert result["facts"]["a_a"] is True


STAND_IN = """
import json, sys, time
# A stand-in engine: it "generates" by sleeping, longer when its arm says so.
out, factor = sys.argv[1], float(sys.argv[2])
if factor < 0:
    sys.exit(3)  # the crashing variant
samples = []
for _ in range(3):
    start = time.perf_counter()
    time.sleep(0.02 * factor)
    samples.append(8 / (time.perf_counter() - start))
json.dump({"schema_version": 1, "metrics": [{"name": "tg8", "unit": "t/s",
           "higher_is_better": True, "samples": samples}]}, open(out, "w"))
"""

STAND_IN_ARMS = """
[arms.pinned]
installable = ".#default"
vars = {{ factor = "1.0" }}
[arms.cand]
installable = ".#cand"
vars = {{ factor = "{factor}" }}
"""


def run_stand_in(make: Callable[..., Project], factor: str) -> dict:
    p = make(STAND_IN_ARMS.format(factor=factor))
    script = p.script("engine.py", STAND_IN)
    p.stage(
        "60-bench.toml",
        f"""
        [[check]]
        kind = "bench"
        name = "stand-in"
        format = "metrics"
        run = "{{py}} {script} {{out_file}} {{factor}}"
        looks = 1
        max_pairs = 6
        limits = {{ speed_margin = 0.05 }}
        """,
    )
    result = CliRunner().invoke(app, ["run", "--candidate", "cand", "--project", str(p.root)])
    assert result.exit_code in (0, 1, 3), result.output
    return json.loads((p.run_dirs()[0] / "60-bench" / "stand-in" / "result.json").read_text())


def test_a_reliably_slower_stand_in_fails_the_gate(project: Callable[..., Project]) -> None:
    """Stands in for an engine: a script whose candidate arm sleeps 40 % longer per "token".
    A regression cannot be made on purpose with the real engine, and the gate must be seen to
    fail; the statistics see only the throughput the script reports."""
    result = run_stand_in(project, "1.4")
    assert result["verdict"] == "FAIL", result["reason"]
    test = result["facts"]["tests"]["tg8"]
    assert test["finding"] == "SLOWER" and test["regression"] and test["ratio"] < 0.8
    # One test, one look: 0.05 needs 6 pairs (5 give at best 0.0625).
    assert test["pairs"] == 6 == result["facts"]["plan"]["computed_min_pairs"]


def test_a_crashing_stand_in_candidate_fails(project: Callable[..., Project]) -> None:
    """Stands in for an engine that crashes: the candidate's script exits 3 after writing."""
    result = run_stand_in(project, "-1")
    assert result["verdict"] == "FAIL", result["reason"]
    assert "INVALID" in result["reason"] and "exit code 3" in result["reason"]
