"""End to end on the bundled example: llama.cpp built by gcc 12 and clang 19 through real nix,
qualified with the quick profile (the runs are made once per session, see example_arms.py)."""

from __future__ import annotations

import csv
import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

pytestmark = [
    pytest.mark.nix,
    pytest.mark.example,
    pytest.mark.skipif(shutil.which("nix") is None, reason="nix is not installed"),
]


def stage(run_dir: Path, folder: str) -> dict:
    return json.loads((run_dir / folder / "stage.json").read_text())


def test_arms_hold_real_llama_cpp_binaries(example_outs: dict[str, Path]) -> None:
    for arm in ("pinned", "clang19"):
        out = example_outs[arm]
        for tool in ("llama-bench", "llama-perplexity", "llama-server"):
            assert (out / "bin" / tool).stat().st_size > 100_000, (arm, tool)
        assert (out / "share" / "tests" / "CTestTestfile.cmake").read_text().count("add_test(") >= 3
        assert any((out / "share" / "stack-usage").rglob("*.su"))
    assert "clang version 19.1.7" in (example_outs["clang19"] / "share" / "compiler-version").read_text()
    assert "12.2.0" in (example_outs["pinned"] / "share" / "compiler-version").read_text()
    reference = example_outs["reference"]
    assert (reference / "bin" / "llama-perplexity").is_file() and not (
        reference / "bin" / "llama-server"
    ).exists()


def test_the_operator_tests_split_mul_mat_into_halves_that_cover_it_once(
    example_outs: dict[str, Path],
) -> None:
    """MUL_MAT's cases are two ctest entries, so that two run at once (build-llama.sh): each
    case of the operator falls in exactly one half. Counted by test-backend-ops itself, listing
    the cases each entry's filter selects (`support` mode: no case runs)."""
    for arm in ("pinned", "clang19"):
        tests = example_outs[arm] / "share" / "tests" / "CTestTestfile.cmake"
        entries = {
            name: shlex.split(words)
            for name, words in re.findall(r"^add_test\((\S+) (.*)\)$", tests.read_text(), re.M)
        }
        halves = [words for name, words in entries.items() if name.startswith("test-backend-ops-MUL_MAT")]
        assert len(halves) == 2, sorted(entries)
        program = halves[0][0]

        def cases(*words: str, program: str = program) -> list[str]:
            listed = subprocess.run([program, "support", *words], capture_output=True, text=True, check=True)
            return re.findall(r"^\s+(MUL_MAT\(.*?\)):", listed.stdout, re.M)

        whole = cases("-b", "CPU", "-o", "MUL_MAT")
        parts = [cases(*words[1:]) for words in halves]
        assert len(whole) > 1000 and all(parts), [len(p) for p in parts]
        assert sorted(parts[0] + parts[1]) == sorted(whole), arm  # each case once, none left out


def test_gcc_vs_clang_run_is_made_of_real_measurements(
    example_runs: dict, example_outs: dict[str, Path]
) -> None:
    code, run_dir, out = example_runs["clang19"]
    saved = json.loads((run_dir / "run.json").read_text())
    assert saved["status"] == "complete", out
    # Every configured stage reached a verdict of its own (none blocked: --no-gate).
    for spec in saved["plan"]["stages"]:
        verdict = stage(run_dir, spec["folder"])["verdict"]
        assert verdict in ("PASS", "WARN", "FAIL", "INCONCLUSIVE"), (spec["name"], verdict, out)
    # Build: the store paths exist and are the ones built here.
    for role, arm in (("pinned", "pinned"), ("candidate", "clang19")):
        assert saved["roles"][role]["out"] == str(example_outs[arm])
        assert Path(saved["roles"][role]["out"]).is_dir()
    with (run_dir / "10-build" / "arms" / "build-closure-diff.csv").open() as handle:
        rows = {r["pname"]: r for r in csv.DictReader(handle)}
    assert rows["gcc"]["change"] == "removed" and rows["gcc"]["left_versions"] == "12.2.0"
    assert rows["clang"]["change"] == "added" and rows["clang"]["right_versions"] == "19.1.7"
    assert rows["llama-cpp"]["change"] == "rebuilt"  # same source and version, other toolchain
    # Compile: operator tests really ran in both roles.
    tests = json.loads((run_dir / "20-compile" / "operator-tests" / "result.json").read_text())
    counts = tests["facts"]["counts"]
    for role in ("pinned", "candidate"):
        assert counts[role]["passed"] + counts[role]["failed"] + counts[role]["error"] > 0, tests
    # Compile: ggml's host kernels read from both builds' programs, compared at most as WARN.
    kernels = json.loads((run_dir / "20-compile" / "kernel-resources" / "result.json").read_text())
    assert kernels["verdict"] in ("PASS", "WARN"), kernels["reason"]
    for role in ("pinned", "candidate"):
        found = kernels["facts"]["counts"][role]
        assert found["host"] > 100 and found["amdgpu"] == found["cuda"] == 0, found
        assert (run_dir / "20-compile" / "kernel-resources" / role / "host.parquet").is_file()
    by_severity = kernels["facts"]["kernels_by_severity"]
    assert by_severity["FAIL"] == by_severity["ERROR"] == 0
    # gcc and clang inline and lay out frames differently: some host kernels must differ.
    assert by_severity["WARN"] + by_severity["INFO"] > 0, by_severity
    for name in ("report.html", "summary.md", "report.json"):
        assert (run_dir / name).is_file()
    # Every stage is configured: the verdict (and its exit code) is whatever the stages decided.
    assert (saved["verdict"], code) in (("QUALIFIED", 0), ("NOT QUALIFIED", 1)), out[-3000:]


def test_the_set_qualifies_clang19_with_controls_that_behaved(example_runs: dict) -> None:
    """One run: clang19 against pinned, the A/A positive control and the kvq4 negative control
    measured together; the controls show the gates could tell on the day."""
    code, run_dir, out = example_runs["set"]
    saved = json.loads((run_dir / "run.json").read_text())
    assert saved["kind"] == "set" and saved["status"] == "complete", out[-3000:]
    assert [(m["label"], m["role"]) for m in saved["members"]] == [
        ("clang19", "candidate"),
        ("positive-pinned", "positive"),
        ("negative-kvq4", "negative"),
    ]
    assert saved["controls_behaved"] is True, saved["member_results"]
    clang19 = saved["member_results"]["clang19"]["verdict"]
    assert saved["verdict"] == clang19 and code == (0 if clang19 == "QUALIFIED" else 1), out[-3000:]
    # kvq4 ran the build and the stage it must fail, nothing else.
    stages = saved["member_results"]["negative-kvq4"]["stages"]
    assert [n for n, o in stages.items() if o != "NOT CONFIGURED"] == ["build", "numerics"], stages
    assert stages["numerics"] == "FAIL"
    summary = (run_dir / "summary.md").read_text()
    assert "| stage | clang19 (candidate) | positive-pinned (positive control) |" in summary
    assert "Controls behaved" in summary
    # Pinned was built once: every member's pinned role is the same store path.
    outs = {
        json.loads((run_dir / m["label"] / "run.json").read_text())["roles"]["pinned"]["out"]
        for m in saved["members"]
    }
    assert len(outs) == 1


def test_a_a_run_passes_every_configured_stage(example_runs: dict) -> None:
    code, run_dir, out = example_runs["aa"]
    saved = json.loads((run_dir / "run.json").read_text())
    for spec in saved["plan"]["stages"]:
        assert stage(run_dir, spec["folder"])["verdict"] in ("PASS", "WARN"), (spec["name"], out)
    assert saved["verdict"] == "QUALIFIED" and code == 0, out[-3000:]  # a build against itself
    kernels = json.loads((run_dir / "20-compile" / "kernel-resources" / "result.json").read_text())
    assert kernels["verdict"] == "PASS", kernels["reason"]
    by_severity = kernels["facts"]["kernels_by_severity"]
    assert by_severity["same"] > 100 and by_severity["same"] == sum(by_severity.values()), by_severity
    assert (run_dir / "20-compile" / "operator-tests" / "pinned").is_dir()
    assert (run_dir / "20-compile" / "operator-tests" / "candidate").is_dir()


NUMERICS = Path("30-numerics") / "matched-token-kld"


def numerics(run_dir: Path) -> dict:
    return json.loads((run_dir / NUMERICS / "result.json").read_text())


def saved_vectors(run_dir: Path, role: str) -> dict:
    with np.load(run_dir / NUMERICS / role / "pertoken.npz") as z:
        return {k: z[k] for k in z.files}


def check_numerics_saved(run_dir: Path) -> dict:
    """What every numerics result must hold: real llama-perplexity runs of one text with one
    set of settings, reduced to per-token vectors whose means are the figures judged."""
    result = numerics(run_dir)
    facts = result["facts"]
    settings = facts["settings"]
    assert set(settings) == {"reference", "pinned", "pinned.2", "candidate"}, settings
    assert len({json.dumps(s, sort_keys=True) for s in settings.values()}) == 1, settings
    one = settings["reference"]
    assert one["n_vocab"] == 262144 and one["n_chunk"] >= 30 and one["batch_size"] > 0
    assert facts["n_chunks"] == one["n_chunk"] >= 30 and facts["kl_floor"] == -16.0
    assert facts["n_tokens"] == one["n_chunk"] * (one["n_ctx"] - 1 - one["n_ctx"] // 2)
    for role in ("pinned", "candidate"):
        kld = saved_vectors(run_dir, role)[f"pair:reference:{role}:kld"]
        assert kld.size == facts["n_tokens"] and np.isfinite(kld).all()
        assert facts["summaries"][f"reference|{role}"]["kld_mean"] == pytest.approx(float(kld.mean()))
        m = json.loads((run_dir / NUMERICS / role / "measurement.json").read_text())
        assert (
            m["ok"] and m["format"] == "llama.cpp _logits_" and "llama-perplexity" in m["command"]["argv"][0]
        )
        assert not Path(m["artifact"]).exists()  # reduced to per-token vectors, then deleted
    reference = json.loads((run_dir / NUMERICS / "reference" / "measurement.json").read_text())
    assert Path(reference["artifact"]).is_file() and ".cache" in reference["artifact"]
    titles = [t["title"] for t in result["tables"]]
    assert any(t.startswith("Against the reference") for t in titles)
    assert "Non-inferiority against pinned" in titles
    return result


def test_numerics_gcc_vs_clang_reaches_a_verdict_from_real_scores(example_runs: dict) -> None:
    code, run_dir, out = example_runs["clang19"]
    result = check_numerics_saved(run_dir)
    assert result["verdict"] in ("PASS", "WARN", "FAIL", "INCONCLUSIVE"), (result["reason"], out)
    assert not [f for f in result["findings"] if f["verdict"] == "ERROR"], result["findings"]
    ni = result["facts"]["noninferiority"]
    # The reference (SSE 4.2 and AVX only) computes differently from a native build on every
    # x86-64 host, so pinned is some distance from it and δ has something to scale.
    ref_pinned = saved_vectors(run_dir, "pinned")["pair:reference:pinned:kld"]
    assert np.abs(ref_pinned).max() > 0 and ni["mean_kl_pinned"] > 0 and ni["delta"] > 0
    # The margin inside the test: the mean of KL_C − (1 + ρ)·KL_P per token, bounded on both
    # sides, and, where pinned's two scorings differ, the same with its rerun floor.
    tests = {t["name"]: t for t in ni["tests"]}
    floor = saved_vectors(run_dir, "pinned.2")["pair:pinned:pinned.2:kld"]
    assert set(tests) == ({"margin", "floor"} if np.any(floor != 0) else {"margin"})
    kl_c = saved_vectors(run_dir, "candidate")["pair:reference:candidate:kld"]
    rho = ni["margin"]
    assert tests["margin"]["estimate"] == pytest.approx(
        float((kl_c - (1 + rho) * ref_pinned).mean()), rel=1e-9
    )
    for t in tests.values():
        assert t["lower"] <= t["estimate"] <= t["upper"], t
    kld_pc = saved_vectors(run_dir, "candidate")["pair:pinned:candidate:kld"]
    if np.abs(kld_pc).max() == 0:
        # Bit for bit alike (on hosts where both take the same vector kernels, gcc and clang
        # compute the same): θ is exactly 0, the margin's mean is −ρ·mean KL_P, within it.
        assert ni["theta"] == 0.0 and ni["verdict"] == "PASS"


def test_numerics_a_a_passes(example_runs: dict) -> None:
    code, run_dir, out = example_runs["aa"]
    result = check_numerics_saved(run_dir)
    assert result["verdict"] == "PASS", (result["reason"], out)
    ni = result["facts"]["noninferiority"]
    pinned = saved_vectors(run_dir, "pinned")["pair:reference:pinned:kld"]
    candidate = saved_vectors(run_dir, "candidate")["pair:reference:candidate:kld"]
    assert ni["theta"] == pytest.approx(float((candidate - pinned).mean()), abs=1e-12)
    floor = saved_vectors(run_dir, "pinned.2")["pair:pinned:pinned.2:kld"]
    assert ni["floor"] == pytest.approx(float(np.abs(floor).mean()))
    assert min(t["upper"] for t in ni["tests"]) <= 0  # non-inferiority shown


def test_numerics_negative_control_kvq4_fails_on_its_limits(example_kvq4_run: tuple) -> None:
    code, run_dir, out = example_kvq4_run
    assert code == 1, out  # NOT QUALIFIED
    result = check_numerics_saved(run_dir)
    assert result["verdict"] == "FAIL", (result["reason"], out)
    failed = [f for f in result["findings"] if f["verdict"] == "FAIL"]
    assert failed and all(f["role"] == "candidate" for f in failed), failed
    # On the limits and non-inferiority, not a crash: no ERROR and no run failure.
    assert not [f for f in result["findings"] if f["verdict"] == "ERROR"], result["findings"]
    assert any("not non-inferior" in f["message"] for f in failed), failed
    # The reference was scored once for the whole set: every member reads the same measurement.
    reference = json.loads((run_dir / NUMERICS / "reference" / "measurement.json").read_text())
    theirs = json.loads(
        (run_dir.parent / "clang19" / NUMERICS / "reference" / "measurement.json").read_text()
    )
    assert reference["measured_as"] == "reference" and reference["artifact"] == theirs["artifact"]
    assert reference.get("command") == theirs.get("command")


def test_a_negative_control_that_slips_through_makes_the_set_not_qualified(
    example_runs: dict, tmp_path: Path
) -> None:
    """Numerics limits too loose for kvq4's quantised KV cache: the negative control passes the
    stage it must fail, so the run is NOT QUALIFIED whatever clang19 did. Real engines, real
    scores: a copy of the session's run set, re-decided with the loose plan (as `qualify report
    --rejudge` re-decides a run with its project's plan)."""
    from example_arms import numerics_project

    from qualify.core.runstore import RunDir
    from qualify.pipeline.plan import load_plan
    from qualify.pipeline.rejudge import rejudge_set

    loose = "max_mean_kld = 10.0, min_top1_agreement = 0.0, noninferiority_margin = 100.0"
    project = numerics_project(tmp_path / "loose", loose)
    run_dir = Path(shutil.copytree(example_runs["set"][1], tmp_path / "runs" / "set", symlinks=True))
    before = json.loads((run_dir / "run.json").read_text())
    assert before["member_results"]["negative-kvq4"]["stages"]["numerics"] == "FAIL", before["verdict_reason"]
    rejudge_set(RunDir(run_dir), load_plan(project / "stages", "quick"))
    saved = json.loads((run_dir / "run.json").read_text())
    assert saved["verdict"] == "NOT QUALIFIED" and saved["exit_code"] == 1, saved["verdict_reason"]
    assert saved["controls_behaved"] is False
    assert "the gate could not tell" in saved["verdict_reason"] and "kvq4" in saved["verdict_reason"]
    assert saved["member_results"]["negative-kvq4"]["stages"]["numerics"] in ("PASS", "WARN", "INCONCLUSIVE")
