"""A kernel-resources check's facts as their type: every recorded compile result (the CUDA
example's runs and bisections, the ROCm example's run, written before the type existed, some
before the instruction mix was read) reads as `KernelFacts` with nothing lost; the judge, run
again on a recorded bisection's saved scans, writes facts of the type that read back as they
were written; and a fact that does not hold is refused naming the file and the key. Nothing
stands in: the documents are the recorded runs' own."""

from __future__ import annotations

import copy
import json
import tarfile
from pathlib import Path
from typing import Any

import pytest
from evidence_files import field_types, kind_listing, refusal
from recorded_runs import unpack

from qualify.bisect.kernelchanges import kernel_figure
from qualify.checks.base import SavedCheck
from qualify.compile.check import judge
from qualify.compile.kind import KIND
from qualify.pipeline.plan import load_plan
from qualify.records.compile import KernelFacts, MixNotRead, MixRead
from qualify.records.result import CheckResult

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CUDA = EXAMPLES / "llama-cpp-cuda" / "recorded"
ARCHIVES = sorted(
    [
        *CUDA.glob("2026*.tar.xz"),
        *(CUDA / "bisect").glob("*.tar.xz"),
        *(EXAMPLES / "llama-cpp-rocm" / "recorded").glob("*.tar.xz"),
    ]
)
#: The bisection run with every step measured (`--series-mode`), and its project's plan.
SERIES = CUDA / "bisect" / "20261205-112904-bisect-nvcc.tar.xz"
BISECT = EXAMPLES / "llama-cpp-cuda" / "bisect"


def compile_results(archive: Path, where: Path) -> list[Path]:
    """Every result.json of a compile stage in the archive (its run, a run set's members, a
    bisection's steps) whose check is of the kernel-resources kind."""
    with tarfile.open(archive) as tar:
        members = [
            m for m in tar.getmembers() if m.name.endswith("/result.json") and "/20-compile/" in m.name
        ]
        tar.extractall(where, members=members, filter="data")
    paths = [where / m.name for m in members]
    return [p for p in paths if document(p).get("kind") == KIND.name]


def document(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


def test_the_archives_are_found() -> None:
    assert SERIES in ARCHIVES and any("rocm" in a.name for a in ARCHIVES), ARCHIVES


@pytest.mark.parametrize("archive", ARCHIVES, ids=lambda a: a.name.removesuffix(".tar.xz"))
def test_every_recorded_compile_result_reads_whole(archive: Path, tmp_path: Path) -> None:
    paths = compile_results(archive, tmp_path)
    if not paths:
        # A run stopped before its compile stage ended (the stage saved nothing): no result
        # was passed over.
        with tarfile.open(archive) as tar:
            assert not [n for n in tar.getnames() if n.endswith("20-compile/stage.json")], archive
        return
    for path in paths:
        recorded = document(path)["facts"]
        facts = CheckResult.load(path).evidence
        assert isinstance(facts, KernelFacts), path
        assert facts.to_json() == {"version": 1, **recorded}, path
        assert facts.counts == recorded["counts"]
        assert recorded["kernels_by_severity"]["FAIL"] == facts.kernels_by_severity.FAIL
        for role, families in facts.mix.items():
            for family, status in families.items():
                said = recorded["mix"][role][family]
                if isinstance(status, MixNotRead):
                    assert status.not_read == said["not_read"]
                else:
                    assert isinstance(status, MixRead) and status.version == said["version"]


def test_the_judge_writes_its_facts_as_the_type(tmp_path: Path) -> None:
    """Every step of the recorded series judged again with its project's plan: the judge's facts
    are the type, what it writes reads back the same, each step's counts, mix and kernels by
    severity are the recording's, and the bisection's gate reads the step's failing kernels
    from them."""
    run = unpack(SERIES, tmp_path)
    plan = load_plan(BISECT / "stages")
    [spec] = [c for c in plan.stage("compile").checks if c.kind == KIND.name]
    checks = sorted(run.glob(f"steps/*/*/20-compile/{spec.name}"))
    assert checks
    failing = []
    for check in checks:
        judgement = judge(SavedCheck(check, spec, ("pinned", "candidate")))
        facts = judgement.facts
        assert isinstance(facts, KernelFacts), check
        written = json.loads(json.dumps(judgement.as_json()["facts"]))
        assert KernelFacts.load(written, check / "result.json", "facts") == facts
        recorded = KernelFacts.load(document(check / "result.json")["facts"], check, "facts")
        assert (facts.counts, facts.mix) == (recorded.counts, recorded.mix), check
        assert facts.kernels_by_severity == recorded.kernels_by_severity, check
        assert kernel_figure(check, facts).failing == facts.kernels_by_severity.FAIL
        failing.append(facts.kernels_by_severity.FAIL)
    assert max(failing) > 0 and min(failing) == 0  # the series holds steps that pass and fail
    assert kernel_figure(checks[0], None).failing is None  # no facts: no count


def edited(path: Path, change: Any) -> dict[str, Any]:
    saved = copy.deepcopy(document(path))
    change(saved["facts"])
    return saved


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (
            lambda f: f["kernels_by_severity"].update(FAIL="3"),
            "kernels_by_severity.FAIL is a string, not a whole number",
        ),
        (lambda f: f["kernels_by_severity"].pop("same"), "kernels_by_severity.same is missing"),
        (lambda f: f.update(mixx={}), "mixx: not a field this qualify knows"),
        (
            lambda f: f["counts"]["candidate"].update(cuda=1.5),
            "counts.candidate.cuda is a number, not a whole number",
        ),
        (
            lambda f: f["mix"]["candidate"]["amdgpu"].update(kernels="7"),
            "mix.candidate.amdgpu.kernels is a string, not a whole number",
        ),
        (
            lambda f: f["mix"]["pinned"]["cuda"].update(not_read=None),
            "mix.pinned.cuda.not_read is null, not a string",
        ),
    ],
    ids=["wrong-type", "missing", "misspelt", "not-an-integer", "mix-read", "mix-not-read"],
)
def test_a_kernel_fact_that_does_not_hold_names_the_file_and_key(
    tmp_path: Path, change: Any, said: str
) -> None:
    [path, *_] = compile_results(SERIES, tmp_path / "recorded")
    saved = edited(path, change)
    target = tmp_path / "result.json"
    message = refusal(target, saved)
    assert message.startswith(f"{target}: facts.{said}"), message


def test_kinds_json_shows_the_kernel_facts() -> None:
    kind = kind_listing(KIND.name)
    fields = field_types(kind)
    assert fields["counts"] == "dict[str, dict[str, int]]"
    assert fields["kernels_by_severity"] == "Severities" and fields["kernels_by_severity.FAIL"] == "int"
    assert fields["mix"] == "dict[str, dict[str, MixRead | MixNotRead]]"
    assert fields["mix{}{}.version"] == "str" and fields["mix{}{}.not_read"] == "str"
    assert kind["facts"]["version"] == KernelFacts.VERSION
    measured = field_types(kind, "measurement")
    assert measured["mix"] == "dict[str, MixRead | MixNotRead]" and measured["files[].bytes"] == "int"
