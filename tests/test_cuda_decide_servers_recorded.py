"""The recorded decide-servers run set of the CUDA example on an H200, re-decided from its data.

examples/llama-cpp-cuda/recorded/20261204-171520-cuda135.tar.xz is the run set of
`qualify run --candidate cuda135 --profile decide-servers` with the example's three controls on
one NVIDIA H200 (the CUDA arms built beforehand on a machine without a GPU and imported, the CPU
reference built on the host; stages in the order bench, numerics, compile, serving). Every stage
but the soak ran; the soak needs a lease of its own. CI has no GPU: this test unpacks the set,
re-judges every check with the example's plan and checks what the example's README says of it.
Nothing stands in for anything: these are the H200's measurements.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from recorded_runs import Rejudge, assert_provenance, bench_tests, unpack
from recorded_runs import check_result as result

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "llama-cpp-cuda"
ARCHIVE = EXAMPLE / "recorded" / "20261204-171520-cuda135.tar.xz"
REVISION = "7cca46d6669019c7f2a8f7cf06d1f77e2964ec02"


@pytest.fixture(scope="module")
def rejudged(rejudge_recorded: Rejudge, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return rejudge_recorded(EXAMPLE, unpack(ARCHIVE, tmp_path_factory.mktemp("recorded")))


def test_the_set_names_its_revision_and_profile(rejudged: Path) -> None:
    assert_provenance(rejudged, REVISION, "decide-servers")


def test_server_blocks_decide_tg_and_halve_the_pp_noise_without_deciding_pp(rejudged: Path) -> None:
    """tg128 ends NO CHANGE for the candidate and the A/A control; pp2048's pair noise is
    4.5-6 % (llama-bench units had 10-18 %), still too wide for 20 blocks to decide ±3 %."""
    for member in ("cuda135", "positive-pinned"):
        tests = bench_tests(rejudged, member)
        tg, pp = tests["tg128"], tests["pp2048"]
        assert tg["finding"] == "NO CHANGE", (member, tg)
        assert tg["low"] > 0.97 and tg["high"] < 1.03
        assert pp["finding"] == "INCONCLUSIVE" and pp["pairs"] == 20, (member, pp)
        assert pp["low"] < 1.0 < pp["high"] and (pp["low"] < 0.97 or pp["high"] > 1.03)
        assert 0.03 < pp["pair_noise"] < 0.07, (member, pp["pair_noise"])
    assert bench_tests(rejudged, "cuda135")["tg128"]["look"] == 1  # 10 blocks sufficed


def test_the_smaller_micro_batch_is_caught_slower_at_the_first_look(rejudged: Path) -> None:
    tests = bench_tests(rejudged, "negative-ub256")
    pp = tests["pp2048"]
    assert pp["finding"] == "SLOWER" and pp["regression"] and pp["look"] == 1 and pp["pairs"] == 10
    assert 0.84 < pp["ratio"] < 0.92 and pp["high"] < 0.97
    assert tests["tg128"]["finding"] == "NO CHANGE"  # one token at a time: no micro-batches
    # The shared schedule ran on to 20 blocks for the other members' pp2048; this control's own
    # tests were decided, and its reason says so rather than count the others' open tests.
    reason = result(rejudged, "negative-ub256", "60-bench", "llama-bench")["reason"]
    assert "every test of this one was decided" in reason and "still inconclusive" not in reason


def test_numerics_pass_both_builds_and_fail_the_quantised_kv_cache(rejudged: Path) -> None:
    for member in ("cuda135", "positive-pinned"):
        checked = result(rejudged, member, "30-numerics", "matched-token-kld")
        assert checked["verdict"] == "PASS", (member, checked["reason"])
        assert "87 chunks" in checked["reason"]
    kvq4 = result(rejudged, "negative-kvq4", "30-numerics", "matched-token-kld")
    assert kvq4["verdict"] == "FAIL" and "beyond max_mean_kld" in kvq4["reason"]


def test_compile_fails_the_candidate_and_passes_pinned_against_itself(rejudged: Path) -> None:
    kernels = result(rejudged, "cuda135", "20-compile", "kernel-resources")
    assert kernels["verdict"] == "FAIL"
    assert "16 spill more" in kernels["reason"] and "6543 CUDA kernels compared" in kernels["reason"]
    same = result(rejudged, "positive-pinned", "20-compile", "kernel-resources")
    assert same["verdict"] == "PASS" and "6515 unchanged" in same["reason"]
    for member in ("cuda135", "positive-pinned"):
        tests = result(rejudged, member, "20-compile", "operator-tests")
        assert tests["verdict"] == "PASS" and "9/9" in tests["reason"]


def test_serving_warns_alike_in_both_builds(rejudged: Path) -> None:
    for member in ("cuda135", "positive-pinned"):
        served = result(rejudged, member, "40-serving", "llama-server")
        assert served["verdict"] == "WARN", served["reason"]
        assert "24/26" in served["reason"] and "tool-choice-required" in served["reason"]


def test_the_set_is_not_qualified_because_the_gate_could_not_tell(rejudged: Path) -> None:
    """pp undecided for the A/A control means the bench could not have seen a change of the
    size it rules out: never QUALIFIED, and the soak that did not run is no PASS."""
    saved = json.loads((rejudged / "run.json").read_text())
    assert saved["verdict"] == "NOT QUALIFIED"
    assert "positive control pinned got bench INCONCLUSIVE" in saved["verdict_reason"]
    members = saved["member_results"]
    assert members["cuda135"]["stages"]["soak"] not in ("PASS", "WARN")
    assert members["negative-kvq4"]["behaved"] is True
    assert members["negative-ub256"]["behaved"] is True
    assert members["positive-pinned"]["behaved"] is False


def test_every_block_ran_at_full_clock_with_no_throttle_or_foreign_load(rejudged: Path) -> None:
    folder = rejudged / "60-bench" / "llama-bench"
    units = [json.loads(line) for line in (folder / "units.jsonl").read_text().splitlines()]
    pairs = [u for u in units if u["phase"] == "pair"]
    assert len(pairs) == 80  # 20 blocks × 4 roles
    for unit in pairs:
        gpu = unit["gpu"]["gpus"]["0"]
        assert gpu["sm_mhz"] == [1980.0, 1980.0, 1980.0] and not gpu["reasons"], unit["index"]
        assert unit["host"]["foreign_cores"] < 0.1, unit["index"]


def test_the_pp_noise_is_the_rounds_own_and_has_no_heavy_tail(rejudged: Path) -> None:
    """What the README says of `decide_pairs.py --rounds` on this set: a block's noise is what
    its rounds' noise predicts, and with no heavy tail a block's median varies no less than its
    mean, so a robust summary would not decide pp either."""
    proc = subprocess.run(
        [sys.executable, str(EXAMPLE / "decide_pairs.py"), "--rounds", str(rejudged)],
        capture_output=True,
        text=True,
        check=True,
    )
    rows = [line.split() for line in proc.stdout.splitlines() if line.startswith("pp2048")]
    assert len(rows) == 3, proc.stdout
    for row in rows:
        member, per_round, predicted, block = row[1], *(float(v.rstrip("%")) for v in row[2:5])
        kurtosis, medians = float(row[-2]), float(row[-1].rstrip("%"))
        assert 20 < per_round < 25 and abs(block - predicted) < 1.0, (member, row)
        assert kurtosis < 0, (member, kurtosis)
        assert medians > 4.5, (member, medians)
