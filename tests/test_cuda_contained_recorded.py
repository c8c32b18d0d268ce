"""The CUDA example's first run contained on a GPU host, re-decided from its data.

examples/llama-cpp-cuda/recorded/20261206-192034-cuda135.tar.xz is `qualify run --candidate
cuda135 --profile quick` with the example's controls on one NVIDIA H100 (driver 580.159.04,
Ubuntu 24.04, no bubblewrap in its image: `offline/host.sh` brought Debian's beside nix), both
CUDA arms built on the host, the stages bench, serving and numerics in that order. Every command
of the run ran in a cgroup v2 of its own and a bubblewrap mount namespace that kept the run's
folder read-only but for the check's own; the run records it. Beside it,
`recorded/host-20261206/gpu-contained.json` is `offline/gpu_contained.py` on the same host:
`nvidia-smi`, NVML and llama-bench on the CUDA backend from inside the containment, and a write
into the run's folder refused. CI has no GPU: this test unpacks the set, re-judges it with the
example's plan and checks what the example's README says of it. Nothing stands in for anything.
"""

from __future__ import annotations

import json
import sys
import tarfile
from pathlib import Path

import pytest
from recorded_runs import Rejudge, bench_tests, unpack
from recorded_runs import check_result as result

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "llama-cpp-cuda"
ARCHIVE = EXAMPLE / "recorded" / "20261206-192034-cuda135.tar.xz"
HOST = EXAMPLE / "recorded" / "host-20261206"
REVISION = "c620d712267b7bb94c0e0c037ac379f91a4bc49d"


@pytest.fixture(scope="module")
def rejudged(rejudge_recorded: Rejudge, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return rejudge_recorded(EXAMPLE, unpack(ARCHIVE, tmp_path_factory.mktemp("recorded")))


def test_the_run_was_contained_on_the_gpu_host(rejudged: Path) -> None:
    saved = json.loads((rejudged / "run.json").read_text())
    assert saved["profile"] == "quick"
    assert (saved["provenance"]["git"]["rev"], saved["provenance"]["git"]["dirty"]) == (REVISION, False)
    containment = saved["containment"]
    assert containment["processes"].startswith("cgroup v2 (")
    assert containment["records"].startswith("read-only mount (bubblewrap)")
    report = json.loads((rejudged / "report.json").read_text())
    assert [g["name"] for g in report["gpus"]] == ["NVIDIA H100 80GB HBM3"]


def test_the_gpu_was_reached_from_inside_and_the_run_folder_was_not(rejudged: Path) -> None:
    probe = json.loads((HOST / "gpu-contained.json").read_text())
    assert probe["failed"] == []
    assert probe["containment"]["records"].startswith("read-only mount (bubblewrap)")
    assert "NVIDIA H100 80GB HBM3" in probe["nvidia-smi"]["output"]
    assert probe["nvml"]["output"].startswith("NVIDIA H100 80GB HBM3")
    (row,) = probe["llama-bench"]["rows"]
    assert row["backends"] == "CUDA" and row["gpu_info"] == "NVIDIA H100 80GB HBM3"
    assert row["avg_ts"] > 1000  # a 64-token prompt on the GPU; the CPU managed about 10 t/s
    stray = probe["stray write"]
    assert stray["rc"] != 0 and not stray["landed"] and "Read-only file system" in stray["output"]


def test_the_stages_reached_the_gpu_and_the_controls_behaved(rejudged: Path) -> None:
    """Numerics passes both builds and fails the quantised KV cache; serving warns alike in
    both; the bench calls half the micro-batch SLOWER and leaves pp512 undecided in 12 pairs,
    as on the H200 (the host's two speeds, README "The lease of 2026-12-06")."""
    for member in ("cuda135", "positive-pinned"):
        assert result(rejudged, member, "30-numerics", "matched-token-kld")["verdict"] == "PASS"
        assert result(rejudged, member, "40-serving", "llama-server")["verdict"] == "WARN"
        tests = bench_tests(rejudged, member)
        assert tests["pp512"]["finding"] == "INCONCLUSIVE" and tests["pp512"]["pairs"] == 12
    assert result(rejudged, "negative-kvq4", "30-numerics", "matched-token-kld")["verdict"] == "FAIL"
    pp = bench_tests(rejudged, "negative-ub256")["pp512"]
    assert pp["finding"] == "SLOWER" and pp["regression"] and 0.70 < pp["ratio"] < 0.82


def test_the_two_speeds_are_the_host_s_not_the_process_s() -> None:
    """`process_units.py --long` on the lease's probes: within one llama-bench process pp2048
    switches between the two speeds, and a process can stay slow for 200 repetitions (about
    8 s), so neither a process nor a warm-up within it is a unit of one speed; one thread, one
    CPU, or eight threads that do not spin do not remove it. `offline/vcpu_probe.py` with every
    CPU busy: most of the 16 CPUs stayed slow throughout and a few were fast about half the
    time, switching on their own, so the speed is the CPU's at that moment."""
    sys.path.insert(0, str(EXAMPLE))
    try:
        import process_units as pu
    finally:
        sys.path.remove(str(EXAMPLE))
    states = pu.long_processes(HOST / "state-probes.tar.xz")
    long = {name: s for name, s in states.items() if name.startswith(("long-", "longer-"))}
    assert len(long) == 11
    assert sum("sF" in s or "Fs" in s for s in long.values()) >= 8  # switched within a process
    assert any(len(s) == 200 and "F" not in s for s in long.values())  # slow for 8 s
    for variant in ("v-t1-", "v-t1core4-", "v-t8poll0-"):
        mine = [s for name, s in states.items() if name.startswith(variant)]
        assert len(mine) == 3 and any(s.count("s") > len(s) / 2 for s in mine), variant
    with tarfile.open(HOST / "state-probes.tar.xz") as tar:
        handle = tar.extractfile("vcpu-probe.json")
        assert handle is not None
        probe = json.loads(handle.read())
    every = sorted(v for series in probe.values() for v in series)
    cut = (every[0] + every[-1]) / 2
    fast = {cpu: sum(v > cut for v in series) / len(series) for cpu, series in probe.items()}
    assert len(fast) == 16 and sum(share < 0.05 for share in fast.values()) >= 12
    assert max(fast.values()) > 0.4
