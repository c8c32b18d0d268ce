"""End to end: the example's serving stage, each role's real llama-server (gcc 12 and clang 19
builds) on Gemma 3 270M, asserted on the saved quick-profile runs (see example_arms.py)."""

from __future__ import annotations

import json
from pathlib import Path

from example_arms import EXAMPLE_MARKS

pytestmark = EXAMPLE_MARKS

CHECK = Path("40-serving") / "llama-server"


def result(run_dir: Path) -> dict:
    return json.loads((run_dir / CHECK / "result.json").read_text())


def test_a_a_serving_passes_with_identical_greedy_tokens(example_runs: dict) -> None:
    code, run_dir, out = example_runs["aa"]
    saved = result(run_dir)
    # Timing on a shared machine may stay undecided (INCONCLUSIVE); it must never fail.
    assert saved["verdict"] in ("PASS", "WARN", "INCONCLUSIVE"), (saved["reason"], saved["findings"])
    assert not [f for f in saved["findings"] if f["verdict"] in ("FAIL", "ERROR")]
    cases = saved["facts"]["cases"]
    assert cases["pinned"] == cases["candidate"] >= 20
    # One build against itself: greedy decoding agrees token for token.
    assert saved["facts"]["greedy"] and all(g["position"] is None for g in saved["facts"]["greedy"])
    # 3 metrics at 0.05 shared by clang19 and the A/A: 1/2^7 ≤ 0.025 / 3 (1/2^6 is not).
    assert saved["facts"]["timing"]["pairs"] == 7


def test_gcc_vs_clang_serving_reaches_a_real_verdict(example_runs: dict) -> None:
    code, run_dir, out = example_runs["clang19"]
    saved = result(run_dir)
    assert saved["verdict"] in ("PASS", "WARN", "FAIL", "INCONCLUSIVE"), saved["reason"]
    for role in ("pinned", "candidate"):
        measurement = json.loads((run_dir / CHECK / role / "measurement.json").read_text())
        server = measurement["server"]
        assert server["build_info"] and server["total_slots"] == 2 and server["n_ctx"] == 512
        assert measurement["not_run"] == [] and measurement["died"] is None
        assert (run_dir / CHECK / "logs" / f"{role}-server.log").stat().st_size > 0
        cases = json.loads((run_dir / CHECK / role / "cases.json").read_text())["cases"]
        by_name = {c["case"]: c for c in cases}
        # Real answers of the real server: the rendered template, the documented over-limit error.
        assert by_name["apply-template"]["strict"]["prompt"].startswith("<|im_start|>system")
        assert by_name["over-limit"]["strict"]["error_type"] == "exceed_context_size_error"
        assert not by_name["invalid-schema-400"]["problems"]
    titles = [t["title"] for t in saved["tables"]]
    assert titles[0].startswith("Serving cases") and any(t.startswith("Timing gate") for t in titles)
    timing = next(t for t in saved["tables"] if t["title"].startswith("Timing gate"))
    assert {row[1] for row in timing["rows"]} == {"ttft_ms", "tpot_ms", "e2e_ms"}
    assert all(row[-1] in ("PASS", "FAIL", "INCONCLUSIVE") for row in timing["rows"])
