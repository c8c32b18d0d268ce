"""The soak stage on the example's real llama-server, as the saved example runs hold it (gcc vs
clang with --no-gate, and A/A, both with the quick profile)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from example_arms import example_marks

from qualify.core.verdicts import Verdict

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "llama-cpp"
DECIDED = {Verdict.PASS, Verdict.WARN, Verdict.INCONCLUSIVE, Verdict.FAIL}


def soak_result(run_dir: Path) -> dict:
    return json.loads((run_dir / "50-soak" / "llama-server-soak" / "result.json").read_text())


@example_marks
def test_example_runs_soak_stage(example_runs: dict[str, tuple[int, Path, str]]) -> None:
    """The saved runs hold the soak stage's result, its per-role data and its report section."""
    for name in ("clang19", "aa"):
        _code, run_dir, output = example_runs[name]
        folder = run_dir / "50-soak" / "llama-server-soak"
        if not folder.is_dir():
            stage = json.loads((run_dir / "50-soak" / "stage.json").read_text())
            assert name == "aa" and stage.get("status") == "blocked", output[-2000:]
            continue
        result = soak_result(run_dir)
        assert Verdict(result["verdict"]) in DECIDED and result["verdict"] != "FAIL", result["reason"]
        assert result["facts"]["requests"]["candidate"]["ok"] > 0
        assert [c["title"] for c in result["charts"]][0] == "Server RSS during the soak"
        assert any(t["title"].startswith("Trends after the warm-up") for t in result["tables"])
        for role in ("pinned", "candidate"):
            # Real telemetry and requests: both servers answered the seeded workload.
            summary = result["facts"]["requests"][role]
            # How many requests finish in the window depends on the machine's speed; none may fail.
            assert summary["ok"] > 0 and summary["error"] == summary["stalled"] == 0, summary
            telemetry = pd.read_parquet(folder / role / "telemetry.parquet")
            assert len(telemetry) >= 20 and telemetry["anon_bytes"].min() > 50 * 1024**2
            requests = pd.read_parquet(folder / role / "requests.parquet")
            done = requests[requests["status"] == "ok"]
            assert len(done) and (done["ttft_s"] > 0).all() and (done["tokens"] > 0).all()
        assert {"anon_mib", "ttft_p50_ms", "tpot_p50_ms"} <= {t["series"] for t in result["facts"]["trends"]}
        # 160 s after the warm-up in 5 s windows: about 30 points per memory series, enough for
        # the trend test to decide (a soak too short would be INCONCLUSIVE, not PASS).
        memory = [t for t in result["facts"]["trends"] if t["series"] == "anon_mib"]
        assert len(memory) == 2 and all(t["points"] >= 28 and t["reachable"] for t in memory), memory
        # The quick profile loads every role at once, each server up for the whole soak
        # (started and stopped once): the set soaks pinned, clang19 and the A/A's arm together,
        # each for the same 180 s of wall time, so the soak takes one duration, not three.
        spans = []
        for role in ("pinned", "candidate"):
            m = json.loads((folder / role / "measurement.json").read_text())
            assert m["schedule"] == "concurrent"
            [block] = m["blocks"]
            assert (block["start_s"], block["end_s"]) == (0, 180)
            spans.append((block["wall_start_s"], block["wall_end_s"]))
            assert (folder / "logs" / f"{role}-server.log").read_text().count("# server stopped") == 1
        (s1, e1), (s2, e2) = spans
        assert min(e1, e2) - max(s1, s2) > 170, spans
        assert any("loaded at once" in note for note in result["facts"]["limits_of_evidence"])
        compaction = result["facts"]["compaction"]
        assert compaction["pinned"]["planned"] == compaction["candidate"]["planned"]
        report = (run_dir / "report.html").read_text()
        assert "llama-server-soak" in report and "Server RSS during the soak" in report
