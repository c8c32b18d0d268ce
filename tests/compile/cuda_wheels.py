"""nvcc for the tests: the one on PATH, else a real CUDA toolchain unpacked from NVIDIA's PyPI
wheels by examples/llama-cpp-cuda/cuda_toolchain.py into test-artifacts/cuda/<version>; and
nvdisasm, which cuobjdump runs to print SASS and which no toolchain wheel carries, from NVIDIA's
nvidia-cuda-nvdisasm wheel (`NVDISASM`).

A fresh machine with PyPI and no CUDA gets the wheels (pinned by sha256) on first use and keeps
the tree; a test skips only when no tree is there and PyPI cannot be reached.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from types import ModuleType

import httpx
import pytest

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts" / "cuda"
SCRIPT = REPO / "examples" / "llama-cpp-cuda" / "cuda_toolchain.py"
# NVIDIA's nvdisasm wheel (cuobjdump -sass runs it): the candidate toolchain's release, whose
# decoder knows every target the tests build.
NVDISASM = (
    "nvidia-cuda-nvdisasm",
    "13.5.37",
    "d3fdbdd49fa53e2e4aacd3db8259d052bd2b049ececdcb69e92e083c6728e7ca",
)


def load_toolchain() -> ModuleType:
    """examples/llama-cpp-cuda/cuda_toolchain.py as a module (it is a script, not a package)."""
    name = "cuda_toolchain"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, SCRIPT)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def pypi_reachable() -> bool:
    try:
        httpx.head("https://pypi.org/simple/nvidia-cuda-nvcc/", timeout=10, follow_redirects=True)
    except httpx.HTTPError:
        return False
    return True


_OFFLINE: dict[str, str] = {}  # version -> why it was skipped: pip is not asked twice in a run


def wheel_tree(version: str) -> Path:
    """test-artifacts/cuda/<version>, made from the pinned wheels unless it is there and complete."""
    if version in _OFFLINE:
        pytest.skip(_OFFLINE[version])
    toolchain = load_toolchain()
    dest = ARTIFACTS / version
    try:
        return Path(toolchain.ensure_tree(version, dest))
    except toolchain.ToolchainError as exc:
        if not pypi_reachable():
            _OFFLINE[version] = f"no CUDA {version} tree in {dest} and PyPI is unreachable for its wheels"
            pytest.skip(_OFFLINE[version])
        pytest.fail(str(exc))


def find_nvcc() -> str:
    """nvcc on PATH, else the pinned toolchain's (13.0.88) from the wheel tree.

    The tree has lib/ where nvcc.profile links from lib64/ (as the example's flake builds
    them): nvcc takes `-L tree/lib` from NVCC_APPEND_FLAGS for the tests that link programs.
    """
    found = shutil.which("nvcc")
    if found:
        return found
    tree = wheel_tree(load_toolchain().PINNED)
    os.environ["NVCC_APPEND_FLAGS"] = f"-L{tree / 'lib'}"
    return str(tree / "bin" / "nvcc")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def find_nvdisasm() -> Path:
    """nvdisasm on PATH, else the pinned wheel's (`nvdisasm_wheel`)."""
    found = shutil.which("nvdisasm")
    return Path(found) if found else nvdisasm_wheel()


def nvdisasm_wheel() -> Path:
    """The pinned wheel's nvdisasm, unpacked into test-artifacts/cuda (the wheel is fetched by
    pip with --require-hashes into the CUDA wheel cache when not there)."""
    name, version, digest = NVDISASM
    dest = ARTIFACTS / f"nvdisasm-{version}" / "nvdisasm"
    if dest.is_file():
        return dest
    cache = Path(load_toolchain().default_cache())
    stem = f"{name.replace('-', '_')}-{version}-"
    wheels = [p for p in sorted(cache.glob(f"{stem}*.whl")) if _sha256(p) == digest]
    if not wheels:
        cache.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", suffix=".txt") as requirements:
            requirements.write(f"{name}=={version} --hash=sha256:{digest}\n")
            requirements.flush()
            argv = [
                sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary", ":all:",
                "--require-hashes", "--disable-pip-version-check", "-d", str(cache), "-r", requirements.name,
            ]  # fmt: skip
            proc = subprocess.run(argv, capture_output=True, text=True, check=False)
        wheels = [p for p in sorted(cache.glob(f"{stem}*.whl")) if _sha256(p) == digest]
        if not wheels:
            if not pypi_reachable():
                pytest.skip(f"no {name} {version} wheel in {cache} and PyPI is unreachable")
            pytest.fail(f"pip could not download {name} {version}:\n{proc.stdout}{proc.stderr}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheels[0]) as archive:
        data = archive.read("nvidia/cu13/bin/nvdisasm")
    partial = dest.with_name(f".nvdisasm.{os.getpid()}")
    partial.write_bytes(data)
    partial.chmod(0o755)
    partial.rename(dest)
    return dest
