"""The recorded decide-profile run set of the CUDA example on an H200, re-decided from its data.

examples/llama-cpp-cuda/recorded/20261202-151725-cuda135.tar.xz is the run set of
`qualify run --candidate cuda135 --profile decide` with the example's controls (pinned against
itself, the q4_0 KV cache, half the micro-batch) on one NVIDIA H200, its stages run bench first
(`offline/host.sh` with QUALIFY_ORDER) because a lease of 30 minutes holds the builds, the bench
and the numerics but not the rest; the lease ended during the numerics judgement of two members,
so compile, serving and soak have no verdict. The archive holds the whole run folder but the
logits files and the test trees. CI has no GPU: this test unpacks it, re-judges every check with
the example's plan (`qualify report --rejudge`) and checks what the example's README says of it.
Nothing stands in for anything: these are the H200's measurements.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from recorded_runs import Rejudge, assert_provenance, bench_tests, unpack
from recorded_runs import check_result as result

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "llama-cpp-cuda"
ARCHIVE = EXAMPLE / "recorded" / "20261202-151725-cuda135.tar.xz"
REVISION = "e49ade408a6a4ab2fa3ad79a05693792be59bccf"


@pytest.fixture(scope="module")
def rejudged(rejudge_recorded: Rejudge, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return rejudge_recorded(EXAMPLE, unpack(ARCHIVE, tmp_path_factory.mktemp("recorded")))


def test_the_set_names_the_revision_it_qualified(rejudged: Path) -> None:
    assert_provenance(rejudged, REVISION, "decide")


def test_tg_decides_no_change_and_pp_stays_undecided(rejudged: Path) -> None:
    for member in ("cuda135", "positive-pinned"):
        tests = bench_tests(rejudged, member)
        tg, pp = tests["tg256"], tests["pp2048"]
        assert tg["finding"] == "NO CHANGE", (member, tg)
        assert tg["look"] == 1 and tg["pairs"] == 24
        assert tg["low"] > 0.97 and tg["high"] < 1.03
        assert tg["pair_noise"] < 0.025
        # pp2048 at its planned maximum: the interval holds 1 and reaches past the margin.
        assert pp["finding"] == "INCONCLUSIVE", (member, pp)
        assert pp["pairs"] == 48
        assert pp["low"] < 0.97 and pp["high"] > 1.03
        assert pp["pair_noise"] > 0.08


def test_the_smaller_micro_batch_is_caught_slower(rejudged: Path) -> None:
    tests = bench_tests(rejudged, "negative-ub256")
    pp = tests["pp2048"]
    assert pp["finding"] == "SLOWER" and pp["regression"]
    assert pp["look"] == 1
    assert 0.75 < pp["ratio"] < 0.88 and pp["high"] < 0.97
    assert tests["tg256"]["finding"] == "NO CHANGE"  # one token at a time: no micro-batches


def test_numerics_over_the_whole_corpus_pass_for_the_candidate(rejudged: Path) -> None:
    checked = result(rejudged, "cuda135", "30-numerics", "matched-token-kld")
    assert checked["verdict"] == "PASS", checked["reason"]
    assert "87 chunks" in checked["reason"]


def test_what_the_lease_did_not_reach_is_never_passed(rejudged: Path) -> None:
    saved = json.loads((rejudged / "run.json").read_text())
    assert saved["verdict"] == "NOT QUALIFIED"
    assert "positive control pinned got bench INCONCLUSIVE" in saved["verdict_reason"]
    stages = saved["member_results"]["cuda135"]["stages"]
    for stage in ("compile", "serving", "soak"):
        assert stages[stage] not in ("PASS", "WARN"), (stage, stages[stage])
    kvq4 = saved["member_results"]["negative-kvq4"]
    assert kvq4["behaved"] is None  # measured, never judged: the control proved nothing


def _pair_units(run: Path) -> list[dict[str, Any]]:
    folder = run / "60-bench" / "llama-bench"
    units = [json.loads(line) for line in (folder / "units.jsonl").read_text().splitlines()]
    return [u for u in units if u["phase"] == "pair" and u["ok"]]


def test_the_machine_state_does_not_explain_the_pp_noise(rejudged: Path) -> None:
    """The README's noise study: every pair unit ran at the same SM clock with no throttle
    reason and no foreign load, and yet each llama-bench process lands in one of two pp2048
    speeds, with tight repetitions inside it."""
    units = _pair_units(rejudged)
    assert len(units) == 192  # 48 pairs × 4 roles
    for unit in units:
        gpu = unit["gpu"]["gpus"]["0"]
        assert gpu["sm_mhz"] == [1980.0, 1980.0, 1980.0], unit["index"]
        assert not gpu["reasons"], unit["index"]
        assert unit["host"]["foreign_cores"] < 0.1
    medians, spreads = [], []
    for unit in units:
        if unit["role"] == "negative-ub256":
            continue
        lines = (rejudged / "60-bench" / "llama-bench" / unit["output"]).read_text().splitlines()
        rows = [json.loads(line) for line in lines if line.startswith("{")]
        kept = next(r for r in rows if r["n_prompt"])["samples_ts"][1:]
        medians.append(statistics.median(kept))
        spreads.append(statistics.pstdev(kept) / statistics.fmean(kept))
    fast = [m for m in medians if m >= 52_000]
    slow = [m for m in medians if m < 52_000]
    assert len(fast) > 80 and len(slow) > 30
    assert statistics.median(fast) / statistics.median(slow) > 1.25
    assert statistics.median(spreads) < 0.03


def test_the_speed_is_the_process_s_own_and_the_process_cannot_be_the_unit(rejudged: Path) -> None:
    """examples/llama-cpp-cuda/process_units.py on this set (README, "The process as the unit"):
    a process lands in its speed independently of the one that ran seconds before it, so pairing
    neighbouring processes cannot cancel the state; and drawing processes from the recorded
    mixture through the bench's own judge, an A/A's pp2048 seldom passes at ±3 % even with 96
    short processes a role (8 minutes of four roles), while a candidate slower by exactly the
    margin passes no more often than the level allows."""
    sys.path.insert(0, str(EXAMPLE))
    try:
        import process_units as pu
    finally:
        sys.path.remove(str(EXAMPLE))
    bench = pu.bench_dir(rejudged)
    processes, fast, same, _switched = pu.speed_states(bench)
    assert processes == 144 and 0.55 < fast < 0.8
    independent = fast**2 + (1 - fast) ** 2
    assert abs(same - independent) < 0.08, (same, independent)
    logs = pu.process_logs(bench)
    passes, caught, at_margin = pu.shares(logs, 96, np.random.default_rng(pu.SEED), runs=60)
    assert passes < 0.4 and caught < 0.5, (passes, caught)
    assert at_margin <= 0.05
