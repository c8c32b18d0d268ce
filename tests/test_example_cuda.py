"""The CUDA example (examples/llama-cpp-cuda): its plan, its flake and its toolchain pins.

Everything here is real and needs no GPU: the plan is loaded by qualify, the flake is evaluated
by nix (instantiating derivations needs none of their inputs in the store), and the toolchain
pins are read from the script that makes the trees. The arms themselves are built and run on a
GPU host; what that showed is in examples/llama-cpp-cuda/recorded/ and test_cuda_recorded.py.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "llama-cpp-cuda"
NIX_CONFIG = "experimental-features = nix-command flakes\nbuild-users-group =\nsubstituters ="


def plan(profile: str) -> dict:
    proc = subprocess.run(
        [sys.executable, "-m", "qualify", "plan", "-C", str(EXAMPLE), "--profile", profile, "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def check(stages: list[dict], stage: str, name: str) -> dict:
    for spec in stages:
        if spec["name"] == stage:
            for chk in spec["checks"]:
                if chk["name"] == name:
                    return chk
    raise AssertionError(f"no check {stage}/{name}")


@pytest.mark.parametrize("profile", ["quick", "full"])
def test_plan_runs_every_stage_on_the_gpu(profile: str) -> None:
    stages = plan(profile)["stages"]
    assert [s["name"] for s in stages] == ["build", "compile", "numerics", "serving", "soak", "bench"]
    kernels = check(stages, "compile", "kernel-resources")["params"]
    assert kernels["paths"] == ["lib/libggml-cuda.so"] and kernels["require"] == ["cuda"]
    assert kernels["ptxas_logs"] == ["{out}/share/ptxas.log"]
    for stage, name, key in (
        ("numerics", "matched-token-kld", "run"),
        ("serving", "llama-server", "server"),
        ("soak", "llama-server-soak", "server"),
        ("bench", "llama-bench", "run"),
    ):
        assert "{gpu_args}" in check(stages, stage, name)["params"][key], (stage, name)
    numerics = check(stages, "numerics", "matched-token-kld")
    assert numerics["roles"] == ["pinned", "candidate", "reference"]
    chunks = numerics["vars"]["chunks"]
    assert chunks >= numerics["params"]["min_chunks"], "fewer chunks than the judgement needs"


def load_toolchains() -> ModuleType:
    spec = importlib.util.spec_from_file_location("cuda_toolchain", EXAMPLE / "cuda_toolchain.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["cuda_toolchain"] = module
    spec.loader.exec_module(module)
    return module


def flake_hashes() -> dict[str, str]:
    text = (EXAMPLE / "flake.nix").read_text()
    return dict(re.findall(r'name = "([^"]+)";\s*hash = "([0-9a-z]+)";', text))


def test_flake_pins_the_trees_the_toolchain_script_makes() -> None:
    module = load_toolchains()
    toolchains = module.TOOLCHAINS
    pinned = flake_hashes()
    assert set(pinned) == {"llama-cpp-src-0.3.36", *(f"cuda_nvcc-{v}" for v in module.SERIES)}
    assert set(toolchains) == set(module.SERIES) and {"13.0.88", "13.5.37"} <= set(module.SERIES)
    for version, toolchain in toolchains.items():
        assert pinned[f"cuda_nvcc-{version}"] == toolchain.nar_sha256, version


@pytest.mark.nix
@pytest.mark.skipif(shutil.which("nix") is None, reason="nix is not installed")
def test_each_arm_holds_its_own_cuda_in_its_build_closure() -> None:
    """The build stage finds CUDA's version by derivation name: each arm's build-time closure
    holds exactly one cuda_nvcc, its own; the CPU reference holds none."""
    env = {**os.environ, "NIX_CONFIG": NIX_CONFIG}
    found = {}
    for attr in ("default", "cuda135", "reference"):
        drv = subprocess.run(
            ["nix", "eval", "--raw", f"path:{EXAMPLE}#{attr}.drvPath"],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        ).stdout
        closure = subprocess.run(
            ["nix-store", "-qR", drv], capture_output=True, text=True, env=env, check=True
        ).stdout.split()
        found[attr] = sorted(
            re.sub(r"^/nix/store/[0-9a-z]{32}-|\.drv$", "", p) for p in closure if "-cuda_nvcc-" in p
        )
    assert found == {
        "default": ["cuda_nvcc-13.0.88"],
        "cuda135": ["cuda_nvcc-13.5.37"],
        "reference": [],
    }


def test_the_gpu_host_gets_every_dependency_qualify_declares() -> None:
    """pack.sh's bundle c1 carries the Python packages the GPU host's image lacks; the rest the
    image holds (pack.sh names them). A dependency in neither list would stop `qualify run` on
    the host at its first import, after the bundles and the builds: this fails first."""
    import tomllib

    from packaging.requirements import Requirement

    project = tomllib.loads((EXAMPLE.parents[1] / "pyproject.toml").read_text())["project"]
    declared = {
        Requirement(r).name.lower()
        for r in [*project["dependencies"], *project["optional-dependencies"]["stages"]]
    }
    text = (EXAMPLE / "offline" / "pack.sh").read_text()
    host_has = set(re.search(r"^# host-has: (.*)$", text, re.M).group(1).split())  # type: ignore[union-attr]
    bundled = set(re.search(r"^bundled=\(([^)]*)\)", text, re.M | re.S).group(1).split())  # type: ignore[union-attr]
    assert declared - host_has - bundled == set()
    assert "nvidia-ml-py" in bundled  # NVML for the bench's GPU telemetry


@pytest.mark.nix
@pytest.mark.skipif(shutil.which("nix-store") is None, reason="nix is not installed")
def test_arms_sent_back_in_pieces_are_imported_whole(tmp_path: Path) -> None:
    """send-arms.sh (on the GPU host) and receive-arms.sh (here) with the real nix-store: a path
    of this store stands in for a built arm (building a CUDA arm takes the host's 16 cores ten
    minutes); it is exported in pieces over three steps' output folders, deleted, and imported
    back from them, and a missing piece stops the import before anything is added."""
    env = {**os.environ, "NIX_CONFIG": NIX_CONFIG, "ARMS_PIECE": "400", "ARMS_PER_STEP": "2"}
    payload = tmp_path / "llama-cpp-cuda-test"
    payload.write_bytes(os.urandom(1500))  # random: xz cannot shrink it below 4 pieces
    path = subprocess.run(
        ["nix-store", "--add", str(payload)], capture_output=True, text=True, check=True, env=env
    ).stdout.strip()
    send, steps = tmp_path / "send", [tmp_path / f"out{i}" for i in range(3)]
    for step in steps:
        done = subprocess.run(
            [str(EXAMPLE / "offline" / "send-arms.sh"), str(send), str(step), f"default={path}"],
            capture_output=True, text=True, check=False, env=env,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    pieces = int((steps[0] / "arms.list").read_text().split()[1])
    assert pieces >= 4 and "0 pieces left" in done.stdout
    assert sorted(p.name for s in steps for p in s.glob("arms.nar.xz.*")) == [
        f"arms.nar.xz.{i:02d}" for i in range(pieces)
    ]
    subprocess.run(["nix-store", "--delete", path], capture_output=True, check=True, env=env)
    receive = str(EXAMPLE / "offline" / "receive-arms.sh")
    missing = subprocess.run([receive, str(steps[0])], capture_output=True, text=True, check=False, env=env)
    assert missing.returncode == 2 and f"counts {pieces} pieces" in missing.stderr
    valid = ["nix-store", "--check-validity", path]
    assert subprocess.run(valid, capture_output=True, check=False, env=env).returncode != 0
    done = subprocess.run(
        [receive, *map(str, reversed(steps))], capture_output=True, text=True, check=False, env=env
    )
    assert done.returncode == 0, done.stderr
    assert path in done.stdout and "(default )" in done.stdout
    assert subprocess.run(valid, capture_output=True, check=False, env=env).returncode == 0
    subprocess.run(["nix-store", "--delete", path], capture_output=True, check=False, env=env)


@pytest.mark.parametrize("profile", ["decide", "decide-strict", "decide-servers"])
def test_the_decide_soak_can_bound_its_budgets_at_the_measured_noise(profile: str) -> None:
    """The decide soaks' sizing (stages/50-soak.toml): the plan's windows after the warm-up, its
    horizon and its 64 MiB budget, with flat memory whose window medians vary by 17 MiB (the
    server's anonymous memory in the recorded quick run), simulated through the soak's judge:
    at least 90 of 100 soaks bound the budget (PASS under bound_budgets) rather than end
    INCONCLUSIVE. The 270-s soak it replaced bounded none."""
    import numpy as np
    import pandas as pd

    from qualify.soak.check import _unbounded
    from qualify.soak.trend import MEMORY_RULES, NO_LEAK, judge_series, trend

    soak = check(plan(profile)["stages"], "soak", "llama-server-soak")
    p, limits = soak["params"], soak["limits"]
    assert p["concurrent"] and p["bound_budgets"]
    width, horizon = float(p["window_s"]), float(p["horizon_s"])
    n = int((p["duration_s"] - p["warmup_s"]) // width)
    index = pd.Index(np.arange(n) * width + width / 2)
    rng = np.random.default_rng(37)
    bounded = 0
    for _ in range(100):
        c, q = (
            trend(
                "anon_mib", role, pd.DataFrame({"anon_mib": rng.normal(0, 17.0, n)}, index=index), p["alpha"]
            )
            for role in ("candidate", "pinned")
        )
        v = judge_series(MEMORY_RULES[0], c, q, limits, horizon)
        bounded += v.finding == NO_LEAK and not _unbounded([v], horizon)
    assert bounded >= 90, (n, bounded)


def test_the_decide_servers_bench_interleaves_resident_servers_and_can_reach_its_level() -> None:
    """The decide-servers profile's bench (stages/60-bench.toml): llama-server on every layer of
    the GPU with the micro-batch the ub256 control changes, a prompt of 2 048 tokens, and a
    first look at no fewer blocks than the exact signed-rank test needs to reach its first Holm
    level with the run set's three bench members sharing alpha."""
    from qualify.stats import abtests

    bench = check(plan("decide-servers")["stages"], "bench", "llama-bench")
    p = bench["params"]
    assert p["format"] == "llama-server" and "{port}" in p["run"] and "-ub {ubatch}" in p["run"]
    assert p["prompt_tokens"] == 2048 and p["discard_reps"] == 0 and "n_ubatch" in p["allow_config_diff"]
    members = 3  # cuda135, the A/A and ub256
    level = abtests.first_holm_level(p["alpha"] / members, 2, p["looks"])
    assert p["min_pairs"] >= abtests.min_pairs(level), (level, abtests.min_pairs(level))
    assert p["max_pairs"] >= 2 * p["min_pairs"] - 1


def test_on_a_two_speed_host_server_blocks_decide_where_llama_bench_units_cannot() -> None:
    """examples/llama-cpp-cuda/host_states.py, the host of the 2026-12-03 noise study (two CPU
    speeds, fast 30 % of the time, switching about once a second, pp 31 % faster in the fast
    one) simulated through the bench's judge, 60 sets a cell: blocks of resident servers valued
    by the mean of their rounds' logs end an A/A's pp NO CHANGE and call a 6 % slowdown a
    regression nearly always; the same blocks valued by their median, and llama-bench units
    seconds apart, do neither reliably."""
    sys.path.insert(0, str(EXAMPLE))
    try:
        import host_states as hs
    finally:
        sys.path.remove(str(EXAMPLE))
    servers = hs.shares(hs.SERVERS, 1.0, runs=60)
    assert servers["pp NO CHANGE"] >= 0.85 and servers["pp −6 % SLOWER"] >= 0.9, servers
    assert servers["tg NO CHANGE"] >= 0.9, servers
    by_median = hs.shares(hs.SERVERS_MEDIAN, 1.0, runs=60)
    units = hs.shares(hs.LLAMA_BENCH, 1.0, runs=60)
    assert by_median["pp NO CHANGE"] <= 0.75 and units["pp NO CHANGE"] <= 0.4, (by_median, units)
