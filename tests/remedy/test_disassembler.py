"""Which disassembler reads a remedy's units: the one the compile check read the candidate with,
and, where the check found it on PATH and it is not on this host (a run measured on a GPU host,
remedied on another machine), the one on this PATH, said aloud. A tool the plan named is never
replaced. The tools here are small scripts that answer `--version` as NVIDIA's do."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from qualify.remedy.families import CUDA
from qualify.remedy.units import RemedyError, disassembler

GONE = "/usr/local/cuda/bin/cuobjdump"  # the GPU host's, as a recorded measurement names it


def tool(folder: Path, name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 13.5, V13.5.37'\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def path_with(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A PATH holding cuobjdump and the nvdisasm it runs, and nothing else."""
    bin_dir = tmp_path / "bin"
    tool(bin_dir, "cuobjdump")
    tool(bin_dir, "nvdisasm")
    monkeypatch.setenv("PATH", str(bin_dir))
    return bin_dir


def test_the_checks_own_tool_is_used_where_it_runs(path_with: Path, tmp_path: Path) -> None:
    own = tool(tmp_path / "own", "cuobjdump")
    found, note = disassembler(CUDA, [str(own)], "auto", dict(os.environ))
    assert found is not None and found.argv == (str(own),) and note is None
    assert found.options == ("-sass",)


def test_a_tool_found_on_path_elsewhere_is_found_on_this_path_and_said(path_with: Path) -> None:
    found, note = disassembler(CUDA, [GONE], "auto", dict(os.environ))
    assert found is not None and found.argv == (str(path_with / "cuobjdump"),)
    assert note is not None and GONE in note and str(path_with / "cuobjdump") in note


def test_a_tool_the_plan_named_is_never_replaced(path_with: Path) -> None:
    with pytest.raises(RemedyError, match="the candidate's disassembler"):
        disassembler(CUDA, [GONE], "{out}/bin/cuobjdump", dict(os.environ))


def test_without_nvdisasm_on_path_the_remedy_says_what_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tool(tmp_path / "bin", "cuobjdump")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    with pytest.raises(RemedyError, match="nvdisasm") as raised:
        disassembler(CUDA, [GONE], "auto", dict(os.environ))
    assert "PATH" in (raised.value.hint or "")


def test_a_check_that_read_no_mix_reads_none(path_with: Path) -> None:
    assert disassembler(CUDA, None, "", dict(os.environ)) == (None, None)
