"""ggml's sources from the llama-cpp-python sdist in the nix store (the examples' source), as
the CUDA and the ROCm compile tests read them: where the sdist is, and the part of its ggml
tree a test compiles from, unpacked once under test-artifacts/."""

from __future__ import annotations

import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path

SDIST = "llama_cpp_python-0.3.36.tar.gz"
SDIST_SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
GGML = "llama_cpp_python-0.3.36/vendor/llama.cpp/ggml/"


def sdist_path() -> Path | None:
    """The sdist's store path when it is in the store, else None."""
    if shutil.which("nix-store") is None:
        return None
    argv = ["nix-store", "--print-fixed-path", "sha256", SDIST_SHA256, SDIST]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    path = Path(proc.stdout.strip())
    return path if proc.returncode == 0 and path.is_file() else None


def ggml_tree(sdist: Path, artifacts: Path, wanted: Callable[[str], bool]) -> Path:
    """`artifacts`/ggml-<sha>: the files of the sdist's ggml tree that `wanted` keeps (named
    inside ggml/), unpacked whole or not at all."""
    dest = artifacts / f"ggml-{SDIST_SHA256[:12]}"
    if (dest / ".complete").is_file():
        return dest
    artifacts.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=".ggml.", dir=artifacts))
    try:
        with tarfile.open(sdist) as archive:
            members = [m for m in archive if m.isfile() and m.name.startswith(GGML)]
            members = [m for m in members if wanted(m.name[len(GGML) :])]
            for member in members:
                member.name = member.name[len(GGML) :]
            archive.extractall(partial, members=members, filter="data")
        (partial / ".complete").write_text(f"{SDIST} sha256:{SDIST_SHA256}\n")
        shutil.rmtree(dest, ignore_errors=True)
        partial.rename(dest)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return dest
