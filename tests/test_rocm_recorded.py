"""The recorded run of the ROCm example, re-decided and re-rendered from its saved data.

examples/llama-cpp-rocm/recorded/ holds the run folder of `qualify run --candidate rocm72 -C
examples/llama-cpp-rocm` on a 2-core x86-64 host without an AMD GPU: both gfx1151 arms built
through nix in the example's Debian roots, every kernel of libggml-hip.so read (resources and
instruction mix), and the runtime stages not run for want of the GPU. This test unpacks it,
re-judges every check with the example's plan (`qualify report --rejudge`, no rebuild) and
checks what the report must show. Nothing stands in: these are the host's measurements.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from recorded_runs import Rejudge, unpack

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "llama-cpp-rocm"
ARCHIVES = sorted((EXAMPLE / "recorded").glob("*-rocm72.tar.xz"))


@pytest.fixture(scope="module")
def rejudged(rejudge_recorded: Rejudge, tmp_path_factory: pytest.TempPathFactory) -> Path:
    assert ARCHIVES, "examples/llama-cpp-rocm/recorded/ holds no run"
    return rejudge_recorded(EXAMPLE, unpack(ARCHIVES[-1], tmp_path_factory.mktemp("recorded")))


def report(run: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run / "report.json").read_text())
    return data


def check(data: dict[str, Any], stage: str, name: str) -> dict[str, Any]:
    for s in data["stages"]:
        for c in s.get("checks", []):
            if s["name"] == stage and c["name"] == name:
                return dict(c)
    raise AssertionError(f"no {stage}/{name}")


def table(chk: dict[str, Any], title: str) -> list[dict[str, Any]]:
    found = next(t for t in chk["tables"] if t["title"].startswith(title))
    return [dict(zip(found["columns"], row, strict=True)) for row in found["rows"]]


def test_the_run_is_incomplete_with_the_runtime_stages_waiting_for_an_amd_gpu(rejudged: Path) -> None:
    data = report(rejudged)
    outcomes = {s["name"]: s["outcome"] for s in data["stages"]}
    assert outcomes["build"] in ("PASS", "WARN") and outcomes["compile"] in ("PASS", "WARN", "FAIL")
    for stage in ("numerics", "serving", "soak", "bench"):
        assert outcomes[stage] == "SKIPPED", (stage, outcomes)
    assert data["verdict"] in ("INCOMPLETE", "NOT QUALIFIED") and data["verdict"] != "QUALIFIED"
    skipped = next(s for s in data["stages"] if s["name"] == "numerics")
    assert "no AMD GPU" in json.dumps(skipped), skipped


def test_the_toolchain_table_names_the_move(rejudged: Path) -> None:
    rows = {r["component"]: r for r in table(check(report(rejudged), "build", "arms"), "Toolchain")}
    cells = {name: (list(r.values())[1], list(r.values())[2]) for name, r in rows.items()}
    assert cells["hip"] == ("6.4.3", "7.2.4"), cells
    assert cells["clang"] == ("21.1.8", "22.1.8"), cells


def test_every_gfx1151_kernel_of_the_library_is_judged(rejudged: Path) -> None:
    kernels = json.loads((rejudged / "20-compile" / "kernel-resources" / "result.json").read_text())
    diff = pd.read_parquet(rejudged / "20-compile" / "kernel-resources" / "diff.parquet")
    assert set(diff["target"]) == {"gfx1151"}
    counts = kernels["facts"]["counts"]
    assert counts["pinned"]["amdgpu"] > 5000 and counts["candidate"]["amdgpu"] > 5000, counts
    # Every kernel of both builds has its instruction mix, decoded by the candidate's LLVM.
    for role in ("pinned", "candidate"):
        mix = kernels["facts"]["mix"][role]["amdgpu"]
        assert mix["kernels_read"] == mix["kernels"] == counts[role]["amdgpu"], (role, mix)
        assert mix["version"].endswith("22.1.8"), mix
    both = diff[diff["pinned_instructions"].notna() & diff["candidate_instructions"].notna()]
    assert len(both) > 5000
    # The q4_K MMQ kernels (the slice's known change) spill more under 7.2.4 in the whole build too.
    q4k = diff[diff["key"].str.contains("mul_mat_qIL9ggml_type12E")]
    assert len(q4k) > 0
    grew = q4k[q4k["candidate_vgpr_spill_count"] > q4k["pinned_vgpr_spill_count"]]
    assert len(grew) > 0 and (grew["severity"] == "FAIL").all()


def test_the_report_reads_as_a_reviewer_reads_it(rejudged: Path) -> None:
    kernels = check(report(rejudged), "compile", "kernel-resources")
    families = table(kernels, "Kernel families")
    assert families and all(r["target"] == "gfx1151" for r in families)
    fails = [r["FAIL"] for r in families]
    assert fails == sorted(fails, reverse=True)  # the failing families first
    assert any(r["kernel family"] == "mul_mat_q" for r in families)
    summary = (rejudged / "summary.md").read_text()
    assert len(summary) < 16_384  # well under a comment's 65 536 characters, with 7 079 kernels
    assert "gfx1151" in (rejudged / "report.html").read_text()


def test_stubs_are_set_apart_and_the_headline_names_what_goes_with_the_failures(rejudged: Path) -> None:
    """ggml's NO_DEVICE_CODE stubs (kernels of types gfx1151 does not build) no longer WARN for
    their VGPRs, and the compile stage says what goes with its failures: the kernels that newly
    use true16 high-half registers, counted over the kernels that are not stubs."""
    result = json.loads((rejudged / "20-compile" / "kernel-resources" / "result.json").read_text())
    facts = result["facts"]
    by_severity = facts["kernels_by_severity"]
    assert (by_severity["FAIL"], by_severity["WARN"], by_severity["stub"]) == (254, 719, 2333), by_severity
    assert facts["stubs"] == {"pinned": {"amdgpu": 2333}, "candidate": {"amdgpu": 2333}}
    kernels = check(report(rejudged), "compile", "kernel-resources")
    changed = table(kernels, "AMDGPU kernels: changed")
    assert not [r for r in changed if r["VGPRs"] == "40 → 41"]  # the 797 stubs that warned before
    stubs = table(kernels, "AMDGPU kernels: stubs set apart")
    assert Counter(r["VGPRs"] for r in stubs) == {"40 → 41": 797, "37 → 40": 1536}
    assert {r["severity"] for r in stubs} == {"stub"}
    said = (
        "219 of the 254 failing AMDGPU kernels gained true16 high-half operands (of the 1853 kernels "
        "with this change, 11.8 % fail; of the 2364 without it, 1.5 %; Fisher p ≈ 4e-47)"
    )
    assert said in result["reason"], result["reason"]
    assert "2333 stubs set apart (pinned 2333, candidate 2333)" in result["reason"]
    [named] = [a for a in facts["causes"] if a["lead"]]
    assert (named["change"], named["outcome"], named["both"], named["in_outcome"]) == (
        "high16_gained",
        "FAIL",
        219,
        254,
    )
    # The report opens the check with the table of what goes with its findings, the summary with its line.
    assert kernels["tables"][0]["title"].startswith("What goes with the findings")
    html = (rejudged / "report.html").read_text()
    compile_section = html[html.index('id="stage-compile"') :]
    assert compile_section.index("What goes with the findings (an association") < compile_section.index(
        "Findings: "
    )
    summary = (rejudged / "summary.md").read_text()
    assert f"What goes with compile · kernel-resources (an association, not proof): {said}" in summary
