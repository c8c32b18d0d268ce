"""The ROCm example's fixed-output inputs in the nix store, made from what the compile tests
already hold: the candidate's toolchain root (test-artifacts/rocm/<version>, ggml_rocm.py) and
the trimmed llama.cpp source (from the sdist `make example` adds), as setup.sh adds them.

nix names a path added with `--add-fixed` after the folder it reads, so each tree is presented
under its store name through a folder of hard links beside it (no copy of 1.8 GB); the path it
gets must be the one flake.nix pins, or the test fails.
"""

from __future__ import annotations

import contextlib
import fcntl
import re
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path

from ggml_rocm import ARTIFACTS, EXAMPLE

#: What setup.sh removes from the sdist's llama.cpp tree before it adds it.
_TRIMMED = ("models", "docs", "benches", "media", ".github", "conversion", "gguf-py")


def pinned_hash(name: str, flake: Path = EXAMPLE / "flake.nix") -> str:
    """The NAR hash `flake` (the ROCm example's unless named) gives the fixed tree of that name."""
    text = flake.read_text()
    found = re.search(rf'name = "{re.escape(name)}";\s*hash = "([0-9a-z]+)";', text)
    assert found, f"flake.nix pins no tree named {name}"
    return found[1]


def store_path(name: str, flake: Path = EXAMPLE / "flake.nix") -> str:
    argv = ["nix-store", "--print-fixed-path", "--recursive", "sha256", pinned_hash(name, flake), name]
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout.strip()


@contextlib.contextmanager
def _alone(what: str) -> Iterator[None]:
    """Held while `what` is made: the test modules on other pytest-xdist workers that add the same
    tree wait, then find it in the store, instead of unpacking into one folder at once."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with (ARTIFACTS / f".{what}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def add_tree(name: str, tree: Path, flake: Path = EXAMPLE / "flake.nix") -> str:
    """`tree` in the store as `name` unless it is there; the path `flake` pins, checked."""
    expected = store_path(name, flake)
    with _alone(f"add-{name}"):
        if subprocess.run(["nix-store", "--check-validity", expected], capture_output=True).returncode == 0:
            return expected
        return _add_tree(name, tree, expected)


def _add_tree(name: str, tree: Path, expected: str) -> str:
    # Beside the tree's files (hard links need one file system), in a folder of its own.
    staging = Path(tempfile.mkdtemp(prefix="store-add-", dir=ARTIFACTS))
    try:
        subprocess.run(["cp", "-al", str(tree), str(staging / name)], check=True)
        argv = ["nix-store", "--add-fixed", "--recursive", "sha256", str(staging / name)]
        added = subprocess.run(argv, capture_output=True, text=True, check=True).stdout.strip()
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    assert added == expected, f"{tree} went into the store as {added}, flake.nix pins {expected}"
    return added


def add_source(sdist: Path) -> str:
    """The example's trimmed llama.cpp tree, from the sdist, as setup.sh makes it."""
    name = "llama-cpp-src-0.3.36"
    expected = store_path(name)
    with _alone(f"unpack-{name}"):
        if subprocess.run(["nix-store", "--check-validity", expected], capture_output=True).returncode == 0:
            return expected
        return _add_source(sdist, name)


def _add_source(sdist: Path, name: str) -> str:
    work = Path(tempfile.mkdtemp(prefix="source-add-", dir=ARTIFACTS))
    prefix = "llama_cpp_python-0.3.36/vendor/llama.cpp/"
    with tarfile.open(sdist) as archive:
        members = [m for m in archive.getmembers() if m.name.startswith(prefix)]
        archive.extractall(work, members, filter="data")
    tree = work / prefix
    for name_ in _TRIMMED:
        shutil.rmtree(tree / name_, ignore_errors=True)
    try:
        return add_tree(name, tree)
    finally:
        shutil.rmtree(work, ignore_errors=True)
