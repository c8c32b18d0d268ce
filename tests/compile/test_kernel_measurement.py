"""A kernel-resources role's measurement as its type: every recorded one (the CUDA example's
runs and bisections, the ROCm example's run, some written before the instruction mix was read)
reads as `KernelMeasurement` and writes back as it was; one that does not hold is refused
naming the file and the key, a family's mix that says why it was not read included."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from evidence_files import document, unpacked
from test_kernel_facts import ARCHIVES, SERIES

from qualify.checks.base import SavedCheck
from qualify.compile.check import judge
from qualify.compile.kind import KIND
from qualify.core.errors import RunStoreError
from qualify.core.verdicts import Verdict
from qualify.records.compile import KernelMeasurement, MixNotRead, MixRead


def measurements(archive: Path, where: Path) -> list[Path]:
    """Every role's measurement.json of a kernel-resources check in the archive."""
    return unpacked(
        archive,
        where,
        lambda name: name.endswith("/measurement.json") and "/20-compile/kernel-resources/" in name,
    )


@pytest.mark.parametrize("archive", ARCHIVES, ids=lambda a: a.name.removesuffix(".tar.xz"))
def test_every_recorded_measurement_reads_whole(archive: Path, tmp_path: Path) -> None:
    for path in measurements(archive, tmp_path):
        recorded = document(path)
        recorded.pop("schema_version")
        m = KernelMeasurement.read(path)
        assert m.to_json() == {"version": 1, **recorded}, path
        assert m.error is None and m.counts == recorded["counts"]
        assert [f.file for f in m.files] == [f["file"] for f in recorded["files"]]
        for family, status in m.mix.items():
            said = recorded["mix"][family]
            if "not_read" in said:
                assert isinstance(status, MixNotRead) and status.not_read == said["not_read"]
            else:
                assert isinstance(status, MixRead) and status.kernels_read == said["kernels_read"]


def _scanned() -> dict[str, Any]:
    return {
        "role": "candidate",
        "arm": "new",
        "root": "/out",
        "counts": {"amdgpu": 1, "cuda": 0, "host": 0},
        "files": [{"file": "lib/a.so", "bytes": 10, "amdgpu": 1, "cuda": 0, "host": 0}],
        "unreadable": [{"file": "lib/b.so", "reader": "amdgpu", "message": "truncated"}],
        "tables": {"amdgpu": "amdgpu.parquet"},
        "mix": {"cuda": {"not_read": "`cuobjdump` is empty"}},
        "seconds": 0.5,
    }


def test_a_role_not_scanned_holds_its_error_alone() -> None:
    m = KernelMeasurement.load(
        {"role": "pinned", "arm": "old", "error": {"message": "no", "hint": None}}, "m"
    )
    assert m.error is not None and m.error.message == "no" and m.counts == {} and m.mix == {}
    assert KernelMeasurement.load(_scanned(), "m").unreadable[0].reader == "amdgpu"


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda m: m["mix"]["cuda"].update(not_read=5), "mix.cuda.not_read is a number, not a string"),
        (lambda m: m["mix"]["cuda"].update(tool=["x"]), "mix.cuda.tool: not a field this qualify knows"),
        (lambda m: m["mix"].update(amdgpu={"tool": ["x"]}), "mix.amdgpu.version is missing"),
        (lambda m: m["files"][0].update(bytes="10"), "files[0].bytes is a string, not a whole number"),
        (lambda m: m["unreadable"][0].pop("message"), "unreadable[0].message is missing"),
        (lambda m: m.update(kernels=[]), "kernels: not a field this qualify knows"),
        (
            lambda m: m.pop("counts"),
            "the document lacks counts, and no error says why the role was not scanned",
        ),
        (lambda m: m.update(version=2), "KernelMeasurement is version 2"),
    ],
    ids=["not-read", "not-read-and-read", "read", "file", "unreadable", "misspelt", "half-scanned", "newer"],
)
def test_a_measurement_that_does_not_hold_names_the_file_and_key(
    tmp_path: Path, change: Any, said: str
) -> None:
    saved = copy.deepcopy(_scanned())
    change(saved)
    path = tmp_path / "measurement.json"
    path.write_text(json.dumps({"schema_version": 1, **saved}))
    with pytest.raises(RunStoreError) as refused:
        KernelMeasurement.read(path)
    assert refused.value.message.startswith(f"{path}: {said}"), refused.value.message


def test_the_judge_refuses_a_recorded_measurement_edited_wrong(tmp_path: Path) -> None:
    """The judge reads each role through the type: a wrong entry in a recorded scan stops the
    judgement naming the file, never a judgement made from it."""
    [path, *_] = sorted(p for p in measurements(SERIES, tmp_path) if p.parent.name == "candidate")
    check = path.parent.parent
    spec = _spec()
    assert judge(SavedCheck(check, spec, ("pinned", "candidate"))).verdict in tuple(Verdict)
    edited = document(path)
    edited["unreadable"] = [{"file": "lib/x.so", "message": "bad"}]
    path.write_text(json.dumps(edited))
    with pytest.raises(RunStoreError, match=r"unreadable\[0\].reader is missing"):
        judge(SavedCheck(check, spec, ("pinned", "candidate")))


def _spec() -> Any:
    from test_kernel_facts import BISECT

    from qualify.pipeline.plan import load_plan

    [spec] = [c for c in load_plan(BISECT / "stages").stage("compile").checks if c.kind == KIND.name]
    return spec
