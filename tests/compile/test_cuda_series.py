"""The CUDA example's series of nvcc releases (examples/llama-cpp-cuda/cuda_toolchain.py's SERIES):
every pin against the real tree it makes, PyPI's own list of releases and the flake's pins.

A release's tree is checked where it is already on this machine (the nix store, where
`setup.sh --series` adds it, or test-artifacts/cuda) or cheap to make (every pinned wheel in the
wheel cache: seconds); else that release is skipped, never downloaded here. Each tree is hashed by
nix-hash, nix's own NAR implementation, and its nvcc compiles a real kernel for sm_90: a tree
that hashes right but cannot compile (13.0.48's wheel once put cicc where nvcc does not look)
fails here.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from cuda_wheels import ARTIFACTS, SCRIPT, load_toolchain, pypi_reachable

from qualify.compile.cubin import read_cubin
from qualify.compile.ptxaslog import read_ptxas_log

pytestmark = pytest.mark.slow
TOOLCHAIN = load_toolchain()
SERIES: tuple[str, ...] = TOOLCHAIN.SERIES
KERNEL = Path(__file__).parent / "kernels" / "cuda" / "resources.cu"


def numeric(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def store_tree(version: str) -> Path | None:
    """The tree's fixed-output store path, when it is in the store."""
    if shutil.which("nix-store") is None:
        return None
    name, nar = f"cuda_nvcc-{version}", TOOLCHAIN.TOOLCHAINS[version].nar_sha256
    argv = ["nix-store", "--print-fixed-path", "--recursive", "sha256", nar, name]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    path = Path(proc.stdout.strip())
    return path if proc.returncode == 0 and path.is_dir() else None


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def wheels_cached(version: str) -> bool:
    """Whether every pinned wheel of `version` is in the wheel cache with its pinned sha256."""
    cache = Path(TOOLCHAIN.default_cache())
    for wheel in TOOLCHAIN.TOOLCHAINS[version].wheels:
        stem = f"{wheel.name.replace('-', '_')}-{wheel.version}-"
        if not any(_sha256(p) == wheel.sha256 for p in cache.glob(f"{stem}*.whl")):
            return False
    return True


def local_tree(version: str, scratch: Path) -> Path:
    """A tree of `version` already here, or made from cached wheels; else the test skips."""
    found = store_tree(version)
    if found is not None:
        return found
    artifact = ARTIFACTS / version
    if (artifact / "WHEELS").is_file():
        return artifact
    if not wheels_cached(version):
        pytest.skip(f"no CUDA {version} tree here and its wheels are not all in the cache")
    return Path(TOOLCHAIN.ensure_tree(version, scratch / version))


@pytest.mark.parametrize("version", SERIES)
def test_each_release_makes_its_pinned_tree_and_compiles(version: str, tmp_path: Path) -> None:
    tree = local_tree(version, tmp_path)
    pinned = TOOLCHAIN.TOOLCHAINS[version]
    if shutil.which("nix-hash"):
        argv = ["nix-hash", "--type", "sha256", "--base32", str(tree)]
        nix = subprocess.run(argv, capture_output=True, text=True, check=True)
        assert nix.stdout.strip() == pinned.nar_sha256
    assert TOOLCHAIN.check(version, tree) is None
    listed = (tree / "WHEELS").read_text().splitlines()
    assert [line.split()[0] for line in listed] == [f"{w.name}=={w.version}" for w in pinned.wheels]
    nvcc = str(tree / "bin" / "nvcc")
    said = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=True)
    assert re.search(rf"^Cuda compilation tools, release .*, V{re.escape(version)}$", said.stdout, re.M)
    cubin = tmp_path / "resources.cubin"
    argv = [nvcc, "-arch=sm_90", "-cubin", "-Xptxas", "-v", str(KERNEL), "-o", str(cubin)]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # ptxas reports every kernel the cubin holds, with the cubin's own register count.
    usage = read_ptxas_log(proc.stdout + proc.stderr, version)
    kernels = {k.name: k.registers for k in read_cubin(cubin.read_bytes(), str(cubin))}
    assert kernels and kernels == {name: u.registers for (arch, name), u in usage.items() if u.entry}


def test_list_prints_the_series_oldest_first() -> None:
    proc = subprocess.run([sys.executable, str(SCRIPT), "--list"], capture_output=True, text=True, check=True)
    printed = tuple(proc.stdout.split())
    assert printed == SERIES
    assert list(printed) == sorted(printed, key=numeric) and len(set(printed)) == len(printed)
    assert printed.index(TOOLCHAIN.PINNED) < printed.index(TOOLCHAIN.CANDIDATE) == len(printed) - 1
    assert set(printed) == set(TOOLCHAIN.TOOLCHAINS)


def test_the_flake_pins_every_tree_of_the_series() -> None:
    text = (SCRIPT.parent / "flake.nix").read_text()
    flake = dict(re.findall(r'name = "cuda_nvcc-([^"]+)";\s*hash = "([0-9a-z]+)";', text))
    assert flake == {v: TOOLCHAIN.TOOLCHAINS[v].nar_sha256 for v in SERIES}


def test_the_series_is_every_nvcc_release_on_pypi_with_its_wheels() -> None:
    """PyPI's JSON API: every final nvcc release from the first to the last of the series is in
    it, and every pinned wheel is a manylinux x86_64 file of that version with that sha256."""
    if not pypi_reachable():
        pytest.skip("PyPI is unreachable")
    releases: dict[str, dict[str, list[dict[str, object]]]] = {}
    for name in sorted({w.name for v in SERIES for w in TOOLCHAIN.TOOLCHAINS[v].wheels}):
        reply = httpx.get(f"https://pypi.org/pypi/{name}/json", timeout=60, follow_redirects=True)
        reply.raise_for_status()
        releases[name] = reply.json()["releases"]
    finals = [v for v in releases["nvidia-cuda-nvcc"] if re.fullmatch(r"\d+(\.\d+)+", v)]
    low, high = numeric(SERIES[0]), numeric(SERIES[-1])
    assert sorted((v for v in finals if low <= numeric(v) <= high), key=numeric) == list(SERIES)
    for version in SERIES:
        for wheel in TOOLCHAIN.TOOLCHAINS[version].wheels:
            files = releases[wheel.name][wheel.version]
            (match,) = [f for f in files if f["digests"]["sha256"] == wheel.sha256]  # type: ignore[index]
            filename = str(match["filename"])
            assert "manylinux" in filename and filename.endswith("x86_64.whl"), (version, filename)
            assert not match["yanked"], (version, filename)
