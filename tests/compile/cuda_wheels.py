"""nvcc for the tests: the one on PATH, else a real CUDA toolchain unpacked from NVIDIA's PyPI
wheels by examples/llama-cpp-cuda/cuda_toolchain.py into test-artifacts/cuda/<version>.

A fresh machine with PyPI and no CUDA gets the wheels (pinned by sha256) on first use and keeps
the tree; a test skips only when no tree is there and PyPI cannot be reached.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path
from types import ModuleType

import httpx
import pytest

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts" / "cuda"
SCRIPT = REPO / "examples" / "llama-cpp-cuda" / "cuda_toolchain.py"


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
