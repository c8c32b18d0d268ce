"""The ROCm example (examples/llama-cpp-rocm): its plan, its flake, its toolchain pins and the
device probe that keeps the runtime stages off hosts without an AMD GPU of its targets.

Everything here is real and needs no GPU: the plan is loaded by qualify, the flake is evaluated
by nix (instantiating derivations needs none of their inputs in the store), the toolchain pins
are read from the script that makes the roots, and the build stage's own component patterns
are applied to the derivation names nix gives. The probe reads the kernel's KFD topology; the
one test that needs an AMD GPU's topology writes the files the amdgpu driver would (no such GPU
exists here), and says so.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from types import ModuleType

import pytest

from qualify.build.toolchain import components, mixed, versions

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "llama-cpp-rocm"
NIX_CONFIG = "experimental-features = nix-command flakes\nbuild-users-group =\nsubstituters ="
TARGETS = "gfx1151;gfx942;gfx950"


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


def load_toolchain() -> ModuleType:
    spec = importlib.util.spec_from_file_location("rocm_toolchain", EXAMPLE / "rocm_toolchain.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["rocm_toolchain"] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("profile", ["quick", "full"])
def test_plan_reads_every_hip_kernel_and_declares_the_runtime_stages(profile: str) -> None:
    stages = plan(profile)["stages"]
    assert [s["name"] for s in stages] == ["build", "compile", "numerics", "serving", "soak", "bench"]
    kernels = check(stages, "compile", "kernel-resources")["params"]
    assert kernels["paths"] == ["lib/libggml-hip.so"] and kernels["require"] == ["amdgpu"]
    for stage, name, key in (
        ("numerics", "matched-token-kld", "run"),
        ("serving", "llama-server", "server"),
        ("soak", "llama-server-soak", "server"),
        ("bench", "llama-bench", "run"),
    ):
        assert check(stages, stage, name)["params"][key].startswith("{bin}/"), (stage, name)


def flake_hashes() -> dict[str, str]:
    text = (EXAMPLE / "flake.nix").read_text()
    return dict(re.findall(r'name = "([^"]+)";\s*hash = "([0-9a-z]+)";', text))


def test_flake_pins_the_roots_the_toolchain_script_makes() -> None:
    toolchain = load_toolchain()
    pinned = flake_hashes()
    assert set(pinned) == {"llama-cpp-src-0.3.36", "rocm-root-6.4.3", "rocm-root-7.2.4"}
    for version, spec in toolchain.TOOLCHAINS.items():
        assert pinned[f"rocm-root-{version}"] == spec.nar_sha256, version
        assert re.fullmatch(r"[0-9a-z]{52}", spec.nar_sha256), version
    cuda = dict(
        re.findall(
            r'name = "([^"]+)";\s*hash = "([0-9a-z]+)";',
            (EXAMPLE.parent / "llama-cpp-cuda" / "flake.nix").read_text(),
        )
    )
    assert pinned["llama-cpp-src-0.3.36"] == cuda["llama-cpp-src-0.3.36"]  # one source for every example


def test_the_pins_name_each_stack_and_only_rocm_moves_to_experimental() -> None:
    """6.4.3 is sid's; 7.2.4 takes ROCm from experimental and everything else from sid: the two
    roots share libc, cmake and ninja at the same version (what `-t experimental` would have moved)."""
    toolchain = load_toolchain()
    pins = {v: {d.name: d for d in toolchain.debs(v)} for v in toolchain.TOOLCHAINS}
    old, new = pins["6.4.3"], pins["7.2.4"]
    assert old["libamdhip64-dev"].version.startswith("6.4.3")
    assert new["libamdhip64-dev"].version.startswith("7.2.4")
    assert old["hipcc"].version.startswith("7.0.2") and new["hipcc"].version.startswith("7.2.4")
    assert {"clang-21", "rocm-device-libs-21"} <= set(old) and {"clang-22", "rocm-device-libs-22"} <= set(new)
    for name in ("libc6", "libstdc++6", "cmake", "ninja-build"):
        assert old[name].version == new[name].version and old[name].sha256 == new[name].sha256, name
    experimental = {d.name for d in new.values() if "~exp" in d.version}
    assert "libamdhip64-dev" in experimental and "libc6" not in experimental
    for deb in (*old.values(), *new.values()):
        assert re.fullmatch(r"[0-9a-f]{64}", deb.sha256) and deb.filename.startswith("pool/main/"), deb


def build_closure(attr: str) -> list[str]:
    env = {**os.environ, "NIX_CONFIG": NIX_CONFIG}
    drv = subprocess.run(
        ["nix", "eval", "--raw", f"path:{EXAMPLE}#{attr}.drvPath"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout
    closure = subprocess.run(
        ["nix-store", "-qR", drv], capture_output=True, text=True, env=env, check=True
    ).stdout
    return [re.sub(r"^/nix/store/[0-9a-z]{32}-|\.drv$", "", p) for p in closure.split()]


@pytest.mark.nix
@pytest.mark.skipif(shutil.which("nix") is None, reason="nix is not installed")
def test_the_build_stage_names_each_arms_rocm_components() -> None:
    """The toolchain table of the example's build stage, from the components its stage file
    declares applied to each arm's real build-time closure: one version of each, its own."""
    stage = tomllib.loads((EXAMPLE / "stages" / "10-build.toml").read_text())["check"][0]
    parts = components(stage["toolchain"], stage["single_version"])
    found = {attr: versions(build_closure(attr), parts) for attr in ("default", "rocm72")}
    rocm = ("hip", "hipcc", "clang", "rocblas", "hipblas", "rocm-device-libs")
    assert {k: found["default"][k] for k in rocm} == {
        "hip": ["6.4.3"], "hipcc": ["7.0.2"], "clang": ["21.1.8"],
        "rocblas": ["6.4.4"], "hipblas": ["6.4.4"], "rocm-device-libs": ["7.0.2"],
    }  # fmt: skip
    assert {k: found["rocm72"][k] for k in rocm} == {
        "hip": ["7.2.4"], "hipcc": ["7.2.4"], "clang": ["22.1.8"],
        "rocblas": ["7.2.4"], "hipblas": ["7.2.4"], "rocm-device-libs": ["7.2.4"],
    }  # fmt: skip
    assert not mixed(found["default"], parts) and not mixed(found["rocm72"], parts)
    # An arm holding both stacks would fail the mixed-toolchain gate.
    both = {k: sorted(set(found["default"].get(k, [])) | set(found["rocm72"].get(k, []))) for k in rocm}
    assert set(mixed(both, parts)) == {"hip", "hipcc", "rocblas", "hipblas", "rocm-device-libs"}


@pytest.mark.nix
@pytest.mark.skipif(shutil.which("nix") is None, reason="nix is not installed")
def test_each_output_builds_one_target_with_its_toolchain() -> None:
    """One AMDGPU target per output, as the README's table lists them: gfx1151 as default and
    rocm72, the Instinct parts under their names; each with the root of its ROCm, and the arms
    qualify.toml names are the gfx1151 ones."""
    env = {**os.environ, "NIX_CONFIG": NIX_CONFIG}

    def attr(output: str, name: str) -> str:
        return subprocess.run(
            ["nix", "eval", "--raw", f"path:{EXAMPLE}#{output}.{name}"],
            capture_output=True, text=True, env=env, check=True,
        ).stdout  # fmt: skip

    expected = {
        "default": ("gfx1151", "6.4.3"), "rocm72": ("gfx1151", "7.2.4"),
        "gfx942": ("gfx942", "6.4.3"), "gfx942-rocm72": ("gfx942", "7.2.4"),
        "gfx950": ("gfx950", "6.4.3"), "gfx950-rocm72": ("gfx950", "7.2.4"),
    }  # fmt: skip
    readme = (EXAMPLE / "README.md").read_text()
    for output, (target, rocm) in expected.items():
        assert attr(output, "gpus") == target, output
        assert attr(output, "rocm").endswith(f"-rocm-root-{rocm}"), output
        assert f"`{output}`" in readme, output
    arms = tomllib.loads((EXAMPLE / "qualify.toml").read_text())["arms"]
    assert (arms["pinned"]["installable"], arms["rocm72"]["installable"]) == (".#default", ".#rocm72")


def probe(topology: Path | None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ}
    if topology is not None:
        env["AMD_DEVICE_TOPOLOGY"] = str(topology)
    return subprocess.run(
        ["sh", str(EXAMPLE / "amd-device.sh"), TARGETS], capture_output=True, text=True, env=env, check=False
    )


@pytest.mark.skipif(Path("/dev/kfd").exists(), reason="this host has an AMD GPU")
def test_without_an_amd_gpu_the_programs_stop_before_they_start() -> None:
    proc = probe(None)
    assert proc.returncode == 75 and proc.stdout == ""
    assert "no AMD GPU here" in proc.stderr and TARGETS in proc.stderr


def topology(root: Path, versions_: list[int]) -> Path:
    """A KFD topology as the amdgpu driver writes it: node 0 the CPU (gfx_target_version 0)."""
    for node, version in enumerate([0, *versions_]):
        folder = root / "nodes" / str(node)
        folder.mkdir(parents=True)
        (folder / "properties").write_text(
            f"cpu_cores_count 16\ngfx_target_version {version}\nsimd_count 0\n"
        )
    return root


@pytest.mark.parametrize(("found", "name"), [(110501, "gfx1151"), (90402, "gfx942"), (90500, "gfx950")])
def test_a_gpu_of_the_targets_is_found_by_its_gfx_name(tmp_path: Path, found: int, name: str) -> None:
    """Stand-in: the topology files of a host with that GPU (none exists here)."""
    proc = probe(topology(tmp_path, [found]))
    assert proc.returncode == 0 and proc.stdout.strip() == name, proc.stderr


def test_a_gpu_of_another_target_is_named_and_refused(tmp_path: Path) -> None:
    """Stand-in: the topology of an MI210 (gfx90a) and an RX 7900 (gfx1100), not in the targets."""
    proc = probe(topology(tmp_path, [90010, 110000]))
    assert proc.returncode == 75
    assert "found: gfx90a gfx1100" in proc.stderr


def test_each_component_view_names_a_package_the_root_holds() -> None:
    """The views' names carry the versions the toolchain table shows; each view's builder checks
    its package against the root's DEBS (the manifest of the pins), here checked against the pins."""
    toolchain = load_toolchain()
    text = (EXAMPLE / "flake.nix").read_text()
    for attr, version in (("rocm64", "6.4.3"), ("rocm72", "7.2.4")):
        block = text[text.index(f"{attr} = toolchain") :]
        block = block[: block.index("};") + 2]
        fields = dict(re.findall(r'(\w+) = "([^"]+)";', block))
        llvm = fields["llvm"]
        pinned = {d.name: d.version for d in toolchain.debs(version)}
        for deb, key in (
            ("libamdhip64-dev", "hip"),
            ("hipcc", "hipcc"),
            (f"clang-{llvm}", "clang"),
            ("librocblas-dev", "rocblas"),
            ("libhipblas-dev", "hipblas"),
            (f"rocm-device-libs-{llvm}", "devicelibs"),
        ):
            assert pinned[deb] == fields[f"{key}Deb"], (version, deb)
            # The name's version is the Debian version's upstream part (no epoch, no revision).
            upstream = re.sub(r"^\d+:", "", fields[f"{key}Deb"]).split("-")[0].split("+")[0]
            assert fields[key] == upstream, (version, key)


def test_the_runtime_stages_ask_for_an_amd_device_and_are_skipped_without_one(tmp_path: Path) -> None:
    """Numerics, serving, soak and bench each declare `requires` (amd-device.sh for the arms'
    target, the `target` variable: gfx1151 by default); on a host with no such device (this one: a stand-in topology with no GPU node is
    given, so the test holds on any machine) the command fails with its reason, which is what
    makes each check SKIPPED, never run or passed."""
    from qualify.core.config import load_config
    from qualify.pipeline.plan import load_plan

    config = load_config(EXAMPLE)
    plan = load_plan(config.plan_dir)
    asks = {s.name: s.requires for s in plan.stages}
    assert asks["build"] is None and asks["compile"] is None
    for name in ("numerics", "serving", "soak", "bench"):
        assert asks[name] == "{project}/amd-device.sh {target}", name
    assert config.vars["target"] == "gfx1151"
    (tmp_path / "nodes" / "0").mkdir(parents=True)
    (tmp_path / "nodes" / "0" / "properties").write_text("cpu_cores_count 16\ngfx_target_version 0\n")
    done = subprocess.run(
        [str(EXAMPLE / "amd-device.sh"), "gfx1151"],
        env={**os.environ, "AMD_DEVICE_TOPOLOGY": str(tmp_path)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 75 and "gfx1151" in done.stderr
