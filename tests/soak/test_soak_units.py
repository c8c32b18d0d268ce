"""The soak's pure parts: trend statistics against known results, the kernel-log patterns on
real driver lines, the seeded workload and the watchdog's rule."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import theilslopes

from qualify.soak.kernellog import KERNEL_PATTERNS, SERVER_PATTERNS, kmsg_text, line_pid, match_lines
from qualify.soak.trend import trend
from qualify.soak.trendstats import mann_kendall, min_points, mk_min_p, theil_sen
from qualify.soak.watchdog import Watchdog
from qualify.soak.workload import WorkloadSpec, digest, generate


def test_mann_kendall_by_hand() -> None:
    """1..5: S = 10, Var(S) = 5·4·15/18, Z = 9/√Var = 2.205, p = 0.0275 (two-sided)."""
    result = mann_kendall([1, 2, 3, 4, 5], 0.05, correction="none")
    assert result.s == 10 and result.tau == 1.0
    assert result.variance == pytest.approx(50 / 3)
    assert result.z == pytest.approx(9 / math.sqrt(50 / 3))
    assert result.p_value == pytest.approx(0.02749, abs=1e-5)
    # Ties: [1, 1, 2] has one tie pair, Var = (3·2·11 − 2·1·9)/18 = 48/18.
    assert mann_kendall([1, 1, 2], 0.05, correction="none").variance == pytest.approx(48 / 18)


def test_fewest_points_that_reach_the_level() -> None:
    """A monotonic series of 5 points gives at best p = 0.027; 6 reach 0.0085 < 0.01."""
    assert mk_min_p(5) == pytest.approx(0.0275, abs=1e-4)
    assert mk_min_p(6) < 0.01 < mk_min_p(5)
    assert min_points(0.01) == 6 and min_points(0.05) == 5
    short = mann_kendall([1, 2, 3, 4, 5], 0.01)
    assert not short.reachable and not short.significant


@pytest.mark.parametrize("n", [6, 10, 30, 60])
@pytest.mark.parametrize("shape", ["random walk", "trend", "rounded (ties)"])
def test_mann_kendall_matches_pymannkendall(n: int, shape: str) -> None:
    # pip's dev extra installs it; nixpkgs does not package it (the flake's dev shell skips this).
    pymannkendall = pytest.importorskip("pymannkendall")
    rng = np.random.default_rng(n)
    x = np.cumsum(rng.normal(size=n)) * 0.3 + rng.normal(size=n)
    if shape == "trend":
        x += 0.1 * np.arange(n)
    if shape == "rounded (ties)":
        x = np.round(x)
    for level in (0.01, 0.05):
        ours = mann_kendall(list(x), level, correction="hamed-rao")
        theirs = pymannkendall.hamed_rao_modification_test(x, alpha=level)
        assert ours.s == theirs.s
        assert ours.variance == pytest.approx(theirs.var_s)
        assert ours.p_value == pytest.approx(theirs.p, abs=1e-12)
        plain = pymannkendall.original_test(x, alpha=level)
        assert mann_kendall(list(x), level, correction="none").p_value == pytest.approx(plain.p, abs=1e-12)


def test_hamed_rao_widens_the_variance_of_an_autocorrelated_series() -> None:
    rng = np.random.default_rng(3)
    walk = np.cumsum(rng.normal(size=80))
    corrected = mann_kendall(list(walk), 0.01, correction="hamed-rao")
    assert corrected.variance_factor > 2
    assert corrected.p_value > mann_kendall(list(walk), 0.01, correction="none").p_value


@pytest.mark.parametrize("seed", range(4))
def test_theil_sen_matches_scipy(seed: int) -> None:
    rng = np.random.default_rng(seed)
    t = np.sort(rng.uniform(0, 100, size=25))
    t[3] = t[4]  # a tie in time
    y = np.round(0.2 * t + rng.normal(scale=3, size=25))  # ties in y
    for confidence in (0.9, 0.95, 0.99):
        ours = theil_sen(t, y, confidence)
        slope, _intercept, low, high = theilslopes(y, t, confidence)
        assert (ours.slope, ours.low, ours.high) == pytest.approx((slope, low, high))


def test_theil_sen_interval_widens_with_the_correction() -> None:
    t = np.arange(20.0)
    y = t + np.sin(t)
    plain = theil_sen(t, y)
    wide = theil_sen(t, y, variance_factor=4.0)
    assert wide.low <= plain.low <= plain.slope <= plain.high <= wide.high


# Real driver lines, each from the issue thread named beside it .
FAILING_LINES = [
    # ggml-org/llama.cpp#21724 (llama-server on a gfx90c APU, Vulkan)
    ("ring timeout", "amdgpu 0000:c2:00.0: ring gfx_0.0.0 timeout, signaled seq=166926, emitted seq=166928"),
    ("GPU reset", "amdgpu 0000:c2:00.0: Ring gfx_0.0.0 reset succeeded"),
    ("GPU reset", "amdgpu 0000:c2:00.0: [drm] device wedged, but recovered through reset"),
    ("ring timeout", "amdgpu 0000:c2:00.0: Fence fallback timer expired on ring gfx_0.0.0"),
    # freebsd/drm-kmod#387 (llama.cpp's Vulkan backend on a Radeon 780M)
    ("ring timeout", "[drm ERROR :amdgpu_job_timedout] ring gfx_0.0.0 timeout, signaled seq=12174921, "
     "emitted seq=12174923"),
    ("GPU reset", "drmn0: GPU reset begin!"),
    ("MES failure", "[drm ERROR :mes_v11_0_submit_pkt_and_poll_completion] MES failed to response msg=3"),
    ("MES failure", "[drm ERROR :amdgpu_mes_unmap_legacy_queue] failed to unmap legacy queue"),
    # lemonade-sdk/llamacpp-rocm#122 (llama.cpp ROCm on a Radeon 780M)
    ("MES failure", "amdgpu 0000:c4:00.0: MES failed to respond to msg=REMOVE_QUEUE"),
    ("MES failure", "amdgpu 0000:c4:00.0: failed to remove hardware queue from MES, doorbell=0x1002"),
    ("MES failure", "amdgpu 0000:c4:00.0: MES might be in unrecoverable state, issue a GPU reset"),
    ("KFD eviction or preemption failure", "amdgpu 0000:c4:00.0: Failed to evict queue 1"),
    ("KFD eviction or preemption failure", "amdgpu 0000:c4:00.0: Failed to evict process queues"),
    ("GPU reset", "amdgpu 0000:c4:00.0: MODE2 reset"),
    # ROCm/legacy-rocm-build#5724 (Strix Halo, MES 0x83)
    ("KFD eviction or preemption failure", "amdgpu: Freeing queue vital buffer 0x7f2e70800000, queue evicted"),
    # ollama/ollama#738 (ROCm)
    ("KFD eviction or preemption failure",
     "amdgpu 0000:03:00.0: amdgpu: HIQ MQD's queue_doorbell_id0 is not 0, Queue preemption time out"),
    ("KFD eviction or preemption failure", "amdgpu: Failed to quiesce KFD"),
    ("KFD eviction or preemption failure", "amdgpu: Failed to restore process queues"),
    ("GPU page fault", "amdgpu 0000:03:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:24 vmid:8 "
     "pasid:32785, for process ollama pid 933444 thread ollama pid 933506)"),
    ("GPU page fault", "amdgpu 0000:03:00.0: amdgpu: GCVM_L2_PROTECTION_FAULT_STATUS:0x00000000"),
    # ROCm/amdgpu#172
    ("GPU page fault", "amdgpu 0000:c6:00.0: amdgpu: [gfxhub0] no-retry page fault (src_id:0 ring:24 "
     "vmid:3 pasid:32769)"),
    # leptonai/gpud#46 and NVIDIA/NVSentinel#155 (NVIDIA Xid)
    ("NVIDIA Xid", "NVRM: Xid (PCI:0000:cb:00): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp "
     "Exception on (GPC 7, TPC 7, SM 0): Illegal Instruction Parameter"),
    ("NVIDIA Xid", "NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus"),
]  # fmt: skip

BENIGN_LINES = [
    # ROCm/legacy-rocm-build#1399: routine evictions, not failures
    "amdgpu: Started evicting pasid 0x8002",
    "amdgpu: Finished evicting pasid 0x8002",
    # lemonade-sdk/llamacpp-rocm#122 (the recovery, after the reset itself matched)
    "amdgpu 0000:c5:00.0: amdgpu: ring gfx_0.0.0 uses VM inv eng 0 on hub 0",
    "[drm] PCIE GART of 512M enabled (table at 0x0000008000900000).",
    "Linux version 6.18.44 (builder@sandboxing) (gcc (GCC) 15.3.0) #1 SMP PREEMPT_DYNAMIC",
]


@pytest.mark.parametrize(("pattern", "line"), FAILING_LINES)
def test_kernel_patterns_match_real_driver_lines(pattern: str, line: str) -> None:
    [match] = match_lines([line])
    assert match.pattern == pattern and match.line == line and match.source


def test_kernel_patterns_leave_routine_lines_alone() -> None:
    assert match_lines(BENIGN_LINES) == []
    assert {p.name for p in KERNEL_PATTERNS} >= {"GPU page fault", "ring timeout", "NVIDIA Xid"}


def test_server_patterns_catch_the_hsa_runtime_fault() -> None:
    # ROCm/legacy-rocm-build#6139: the HSA runtime writes this to the process's stderr.
    line = "Memory access fault by GPU node-1 (Agent handle: 0x5581d0c3a0e0) on address 0x7f0d. Reason: Page not present"
    assert [m.pattern for m in match_lines([line], SERVER_PATTERNS)] == ["HSA memory access fault"]


def test_the_process_a_driver_line_names() -> None:
    """amdgpu names the process first and the thread second; Xid quotes the pid or says unknown."""
    lines = {line for _name, line in FAILING_LINES}
    fault = next(line for line in lines if "for process ollama" in line)
    assert line_pid(fault) == 933444
    assert line_pid("NVRM: Xid (PCI:0000:3b:00): 31, pid=2416, name=python3, Ch 00000010") == 2416
    assert line_pid("NVRM: Xid (PCI:0000:3b:00): 43, pid='71201', name=llama-server, Ch 00000008") == 71201
    assert [line_pid(line) for line in lines if "pid" not in line] == [None] * sum(
        "pid" not in x for x in lines
    )
    assert line_pid(next(line for line in lines if "pid='<unknown>'" in line)) is None


def test_kmsg_records_are_reduced_to_their_message() -> None:
    record = b"3,1234,5678901,-;amdgpu 0000:c4:00.0: MODE2 reset\n SUBSYSTEM=pci\n DEVICE=+pci:0000:c4:00.0\n"
    assert kmsg_text(record) == "amdgpu 0000:c4:00.0: MODE2 reset"


def test_workload_is_a_pure_function_of_its_seed() -> None:
    spec = WorkloadSpec(seed=7, duration_s=120, rate=2, turns=3)
    first, again = generate(spec), generate(spec)
    assert digest(first) == digest(again)
    assert digest(generate(WorkloadSpec(seed=8, duration_s=120, rate=2, turns=3))) != digest(first)
    assert all(0 < r.at_s < 120 for r in first)
    assert [r.at_s for r in first] == sorted(r.at_s for r in first)
    assert 150 < len(first) < 330  # Poisson, mean 240
    system = first[0].messages[0]
    assert all(r.messages[0] == system for r in first)  # one shared prefix
    for r in first:  # history grows by a user and an assistant message per turn, up to `turns`
        assert r.turn < 3 and len(r.messages) == 2 + 2 * r.turn
        assert r.messages[-1]["role"] == "user"
    followups = [r for r in first if r.turn > 0]
    assert followups
    for r in followups:
        earlier = next(e for e in first if e.conversation == r.conversation and e.turn == r.turn - 1)
        assert r.messages[: len(earlier.messages)] == earlier.messages


def test_workload_stops_at_its_request_count() -> None:
    assert len(generate(WorkloadSpec(duration_s=1000, rate=5, max_requests=17))) == 17


def test_watchdog_flags_only_a_silent_stream() -> None:
    now = [0.0]
    dog = Watchdog(stall_s=10, clock=lambda: now[0])
    dog.start(1)
    dog.start(2)
    now[0] = 8.0
    dog.progress(2)
    now[0] = 12.0
    assert dog.overdue() == [(1, 12.0)]
    dog.finish(1)
    now[0] = 18.5
    assert dog.overdue() == [(2, 10.5)]
    dog.finish(2)
    assert dog.overdue() == [] and dog.in_flight() == 0


@pytest.mark.parametrize(("phi", "n"), [(0.5, 24), (0.8, 12), (0.8, 48)])
def test_trendless_autocorrelated_windows_are_rarely_called_a_trend(phi: float, n: int) -> None:
    """Window medians lean on each other: trendless AR(1) series, judged as the soak judges a
    series at α = 1 %, are called rising at most 1 % of the time (plus two Monte Carlo SDs), and
    the slope interval covers 0 at least 94 % of the time. With the Hamed–Rao correction these
    were 6–10 % (φ 0.5) and 12–24 % (φ 0.8), and Sen's interval covered 63–86 %."""
    rng = np.random.default_rng(20261201)
    runs = 300
    index = pd.Index(np.arange(n) * 60.0 + 30.0)
    rising = covered = 0
    for _ in range(runs):
        e = rng.normal(size=n + 200)
        y = np.zeros(n + 200)
        for i in range(1, n + 200):
            y[i] = phi * y[i - 1] + e[i]
        t = trend("anon_mib", "candidate", pd.DataFrame({"anon_mib": y[200:]}, index=index), 0.01)
        rising += t.rising or (t.test is not None and t.test.significant)
        low, high = t.slope_bounds()
        covered += low <= 0 <= high
    assert rising / runs <= 0.01 + 2 * (0.01 * 0.99 / runs) ** 0.5, rising
    assert covered / runs >= 0.94, covered


def test_the_declared_budgets_and_margins_are_those_the_trend_rules_use() -> None:
    from qualify.soak.kind import BUDGETS, MARGINS
    from qualify.soak.trend import RULES

    assert {r.budget for r in RULES if r.budget} == set(BUDGETS)
    assert {r.margin for r in RULES} == set(MARGINS)
