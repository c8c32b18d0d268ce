"""The soak stage on the example's real llama-server: a soak of pinned (gcc) against clang19
with the example's quick profile, through the check kind directly, and the soak stage of the
saved example runs (gcc vs clang with --no-gate, and A/A)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
from soakrig import run_soak

from qualify.plan import load_plan
from qualify.verdicts import Verdict

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "llama-cpp"
DECIDED = {Verdict.PASS, Verdict.WARN, Verdict.INCONCLUSIVE, Verdict.FAIL}


def example_marks(test: Callable[..., None]) -> Callable[..., None]:
    """Marks of a test that needs the example's arms built through nix."""
    for mark in (
        pytest.mark.nix,
        pytest.mark.example,
        pytest.mark.slow,
        pytest.mark.skipif(shutil.which("nix") is None, reason="nix is not installed"),
    ):
        test = mark(test)
    return test


def quick_soak() -> tuple[dict[str, object], dict[str, float], dict[str, object]]:
    [stage] = [s for s in load_plan(EXAMPLE / "stages", "quick").stages if s.name == "soak"]
    [check] = stage.checks
    return dict(check.params), dict(check.limits), dict(check.vars)


@example_marks
def test_quick_soak_of_gcc_against_clang_decides_from_real_data(
    example_outs: dict[str, Path], tmp_path: Path
) -> None:
    """Both servers answer every request of the seeded workload; the telemetry and the request
    table are real; the trend rule decides on anonymous memory, TTFT and TPOT; compaction ran on
    one schedule for both roles (or the check says it could not)."""
    params, limits, check_vars = quick_soak()
    judgement, saved = run_soak(
        tmp_path,
        {"pinned": (str(example_outs["pinned"]), {}), "candidate": (str(example_outs["clang19"]), {})},
        params,
        limits,
        project_vars={
            "model": str(EXAMPLE / "data" / "gemma-3-270m-q4_k_m.gguf"),
            "engine_args": [],
            "threads": 2,
            **check_vars,
        },
    )
    assert judgement.verdict in DECIDED, judgement.reason
    assert judgement.verdict is not Verdict.FAIL, judgement.reason  # two healthy builds
    for role in ("pinned", "candidate"):
        summary = judgement.facts["requests"][role]
        assert summary["ok"] >= 12 and summary["error"] == summary["stalled"] == 0
        measurement = saved.measurement(role)
        assert measurement is not None and measurement["server"]["slots"] == 2
        telemetry = pd.read_parquet(saved.role_dir(role) / "telemetry.parquet")
        assert len(telemetry) >= 40 and telemetry["anon_bytes"].min() > 50 * 1024**2
        requests = pd.read_parquet(saved.role_dir(role) / "requests.parquet")
        done = requests[requests["status"] == "ok"]
        assert (done["ttft_s"] > 0).all() and (done["tokens"] > 0).all()
    series = {t["series"] for t in judgement.facts["trends"]}
    assert {"anon_mib", "ttft_p50_ms", "tpot_p50_ms"} <= series
    compaction = judgement.facts["compaction"]
    assert compaction["pinned"]["planned"] == compaction["candidate"]["planned"]


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
            assert (folder / role / "telemetry.parquet").is_file()
            assert (folder / role / "requests.parquet").is_file()
        report = (run_dir / "report.html").read_text()
        assert "llama-server-soak" in report and "Server RSS during the soak" in report
