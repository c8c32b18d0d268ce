"""The remedy's judgement on the recorded ROCm 6.4 → 7.2 run's own kernel tables (6 550 gfx1151
kernels read from the whole library; examples/llama-cpp-rocm/recorded).

The recorded tables tie each kernel to its code object (`origin`, one per translation unit)
but not yet to its source file's name, so a test names the code object's source itself: what
stands in is the name, never a figure. The units stand in for a variant's build by what the
judgement must say of them: a unit that reproduces pinned's kernels brings back every failure
of its file, one that reproduces the candidate's brings back none, and one whose kernels spill
more than the candidate's breaks what passed.
"""

from __future__ import annotations

import pytest
from remedy_data import recorded_check, unit_like

from qualify.remedy.failing import CompileCheck, failing_sources
from qualify.remedy.judge import judge_variant


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> CompileCheck:
    return recorded_check(tmp_path_factory.mktemp("rocm"))


def test_the_failing_files_are_counted_from_the_checks_own_comparison(recorded: CompileCheck) -> None:
    results, failing = failing_sources(recorded)
    counts = {f.source_file: len(f.failing) for f in failing}
    assert counts["worst.cu"] == len(failing[0].failing) == max(counts.values())  # most failures first
    assert [len(f.failing) for f in failing] == sorted(counts.values(), reverse=True)
    # A kernel built into two files is counted under each; the files together hold every failure.
    held = {key for f in failing for key in f.failing}
    assert held == {r.key for r in results if r.severity == "FAIL" and r.family == "amdgpu"}
    assert len(held) == 254


def test_a_unit_that_builds_what_pinned_built_brings_back_every_failure(recorded: CompileCheck) -> None:
    [outcome] = judge_variant(recorded, {"worst.cu": unit_like(recorded, "pinned")})
    assert outcome.failing_before >= 20
    assert outcome.recovered == outcome.failing_before and outcome.newly_broken == 0
    assert outcome.still_failing == 0 and outcome.missing == outcome.extra == 0
    assert outcome.code_bytes_after is not None and outcome.code_bytes_before is not None
    assert outcome.code_change_pct is not None and outcome.code_change_pct < 0  # 7.2's code is larger here


def test_a_unit_that_builds_what_the_candidate_built_changes_nothing(recorded: CompileCheck) -> None:
    [outcome] = judge_variant(recorded, {"worst.cu": unit_like(recorded, "candidate")})
    assert outcome.recovered == outcome.newly_broken == 0
    assert outcome.still_failing == outcome.failing_before > 0
    assert outcome.code_change_pct == 0


def test_a_unit_whose_kernels_spill_more_breaks_the_ones_that_passed(recorded: CompileCheck) -> None:
    unit = unit_like(recorded, "candidate")
    unit["vgpr_spill_count"] = unit["vgpr_spill_count"] + 8
    [outcome] = judge_variant(recorded, {"worst.cu": unit})
    passed = outcome.kernels - outcome.failing_before
    assert passed > 0 and outcome.newly_broken == passed
    assert outcome.recovered == 0 and len(outcome.newly_broken_keys) == passed


def test_a_unit_missing_a_kernel_of_its_file_says_so(recorded: CompileCheck) -> None:
    unit = unit_like(recorded, "pinned").iloc[1:]
    [outcome] = judge_variant(recorded, {"worst.cu": unit})
    assert outcome.missing == 1 and outcome.extra == 0
