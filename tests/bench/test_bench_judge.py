"""The bench judge on saved units built to prove each finding, and seeded simulations of the
adaptive schedule (false alarms on A/A data, power against a regression twice the margin)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from benchsim import LLAMA_CONFIG, saved_check, simulate, spec, steady
from conftest import Project
from typer.testing import CliRunner

from qualify.bench import check as bench
from qualify.bench.judge import FASTER, INCONCLUSIVE, NO_CHANGE, SLOWER, evaluate
from qualify.checks.base import SavedCheck
from qualify.cli import app
from qualify.core.verdicts import Verdict
from qualify.records.bench import BenchTestFact
from qualify.stats import abtests
from qualify.stats.abtests import look_points


def facts(saved: SavedCheck) -> tuple[Verdict, dict[str, BenchTestFact]]:
    judgement = bench.judge(saved)
    return judgement.verdict, judgement.facts.tests


def test_faster_is_pass(tmp_path: Path) -> None:
    saved = saved_check(tmp_path, {"pp64": steady(9, 100, 110, 0.005)}, looks=[9, 16])
    verdict, tests = facts(saved)
    assert verdict is Verdict.PASS
    assert tests["pp64"].finding == FASTER and tests["pp64"].low > 1
    assert tests["pp64"].ratio == pytest.approx(1.10, abs=0.01)


def test_a_significant_slowdown_beyond_the_margin_is_a_regression_and_fails(tmp_path: Path) -> None:
    saved = saved_check(tmp_path, {"tg128": steady(9, 100, 90, 0.005)}, looks=[9, 16])
    judgement = bench.judge(saved)
    assert judgement.verdict is Verdict.FAIL
    assert judgement.facts.tests["tg128"].finding == SLOWER
    assert judgement.facts.tests["tg128"].regression
    assert "regression" in judgement.reason
    assert judgement.tables[0].rows[0][7] == "SLOWER (regression)"


def test_a_slowdown_within_the_margin_warns(tmp_path: Path) -> None:
    saved = saved_check(tmp_path, {"tg128": steady(9, 100, 99, 0.001)}, looks=[9, 16])
    verdict, tests = facts(saved)
    assert tests["tg128"].finding == SLOWER and not tests["tg128"].regression
    assert verdict is Verdict.WARN


def test_an_interval_inside_the_margin_is_no_change(tmp_path: Path) -> None:
    saved = saved_check(tmp_path, {"pp64": steady(9, 100, 100, 0.003, seed=3)}, looks=[9, 16])
    verdict, tests = facts(saved)
    assert tests["pp64"].finding == NO_CHANGE
    assert tests["pp64"].low >= 0.97 and tests["pp64"].high <= 1.03
    assert verdict is Verdict.PASS


def test_noise_larger_than_the_margin_is_inconclusive(tmp_path: Path) -> None:
    saved = saved_check(tmp_path, {"pp64": steady(16, 100, 100, 0.15, seed=5)}, looks=[9, 16])
    judgement = bench.judge(saved)
    assert judgement.verdict is Verdict.INCONCLUSIVE
    test = judgement.facts.tests["pp64"]
    assert test.finding == INCONCLUSIVE and test.pairs == 16 and test.look == 2


def test_too_few_pairs_can_never_be_significant(tmp_path: Path) -> None:
    # 5 pairs, every one 20 % slower: p = 0.0625 is the best 5 pairs can do, above any level.
    saved = saved_check(tmp_path, {"pp64": steady(5, 100, 80, 0.001)}, looks=[5])
    judgement = bench.judge(saved)
    assert judgement.verdict is Verdict.INCONCLUSIVE
    assert "cannot reach" in judgement.reason


def test_a_finding_reached_at_the_first_look_is_kept(tmp_path: Path) -> None:
    early = steady(9, 100, 110, 0.002)
    late = steady(7, 100, 100, 0.2, seed=9)  # noise added after the decision cannot undo it
    saved = saved_check(tmp_path, {"pp64": early + late}, looks=[9, 16])
    verdict, tests = facts(saved)
    assert tests["pp64"].finding == FASTER and tests["pp64"].look == 1 and tests["pp64"].pairs == 9


def test_judge_is_pure_a_new_margin_rejudges_the_saved_data(tmp_path: Path) -> None:
    saved = saved_check(tmp_path, {"tg128": steady(9, 100, 96, 0.002)}, looks=[9, 16])
    assert bench.judge(saved).verdict is Verdict.FAIL  # 4 % slower, δ 3 %
    wider = SavedCheck(saved.folder, spec({"speed_margin": 0.05}), saved.roles)
    assert bench.judge(wider).verdict is Verdict.WARN


def test_a_candidate_crash_fails_and_a_pinned_crash_is_an_error(tmp_path: Path) -> None:
    data = {"pp64": steady(9, 100, 100, 0.01)}
    crashed = bench.judge(saved_check(tmp_path / "c", data, looks=[9, 16], crash=("candidate", 4)))
    assert crashed.verdict is Verdict.FAIL
    assert any("INVALID" in f.message and "signal 11" in f.message for f in crashed.findings)
    assert crashed.facts.pairs == 3
    baseline = bench.judge(saved_check(tmp_path / "p", data, looks=[9, 16], crash=("pinned", 4)))
    assert baseline.verdict is Verdict.ERROR


def test_no_pair_completed_measured_nothing(tmp_path: Path) -> None:
    saved = saved_check(tmp_path, {"pp64": steady(1, 100, 100, 0.01)}, looks=[9], crash=("pinned", 1))
    judgement = bench.judge(saved)
    assert judgement.verdict is Verdict.ERROR  # the baseline crashed: not the candidate's failure
    assert judgement.facts.pairs == 0


def test_no_pair_and_no_crash_is_fail(tmp_path: Path) -> None:
    saved = saved_check(tmp_path, {"pp64": []}, looks=[9])
    judgement = bench.judge(saved)
    assert judgement.verdict is Verdict.FAIL
    assert any("nothing was measured" in f.message for f in judgement.findings)


def test_a_configuration_mismatch_between_roles_is_invalid(tmp_path: Path) -> None:
    configs = {
        "pinned": {"pp64": LLAMA_CONFIG},
        "candidate": {"pp64": {**LLAMA_CONFIG, "type_k": "q4_0"}},
    }
    saved = saved_check(tmp_path, {"pp64": steady(9, 100, 100, 0.002)}, looks=[9, 16], configs=configs)
    judgement = bench.judge(saved)
    assert judgement.verdict is Verdict.ERROR
    assert judgement.facts.tests["pp64"].finding == "INVALID"
    assert "type_k: f16 → q4_0" in judgement.reason
    allowed = SavedCheck(saved.folder, spec(allow_config_diff=["type_k"]), saved.roles)
    assert bench.judge(allowed).verdict is Verdict.PASS


def test_a_configuration_that_changes_in_a_later_unit_is_invalid(tmp_path: Path) -> None:
    """Both roles start alike; pair 5's candidate unit runs with another thread count. The
    first units agree, so only comparing every unit sees it."""
    saved = saved_check(tmp_path, {"pp64": steady(9, 100, 100, 0.002)}, looks=[9, 16])
    schedule = json.loads((saved.folder / "schedule.json").read_text())
    for unit in schedule["units"]:
        changed = unit["phase"] == "pair" and unit["pair"] == 5 and unit["role"] == "candidate"
        unit["configs"] = {"pp64": {**LLAMA_CONFIG, "n_threads": 3} if changed else LLAMA_CONFIG}
    (saved.folder / "schedule.json").write_text(json.dumps(schedule))
    judgement = bench.judge(saved)
    assert judgement.verdict is Verdict.ERROR, judgement.reason
    assert judgement.facts.tests["pp64"].finding == "INVALID"
    assert "pair 5, candidate" in judgement.reason and "n_threads" in judgement.reason


def test_units_over_the_cv_limit_are_invalid(tmp_path: Path) -> None:
    saved = saved_check(
        tmp_path, {"pp64": steady(9, 100, 100, 0.08)}, looks=[9, 16], limits={"max_unit_cv": 0.02}
    )
    judgement = bench.judge(saved)
    assert judgement.verdict is Verdict.ERROR
    assert "max_unit_cv" in judgement.facts.tests["pp64"].invalid


def test_an_environment_change_during_a_unit_is_invalid(tmp_path: Path) -> None:
    saved = saved_check(tmp_path, {"pp64": steady(9, 100, 110, 0.002)}, looks=[9, 16], env_note=5)
    judgement = bench.judge(saved)
    assert judgement.verdict is Verdict.ERROR
    assert any("co-tenant" in f.message for f in judgement.findings)


def test_a_test_missing_from_one_unit_falls_back_to_mann_whitney(tmp_path: Path) -> None:
    data = steady(12, 100, 110, 0.002)
    data[3] = (data[3][0], [])  # the candidate's unit of pair 4 did not report this test
    saved = saved_check(tmp_path, {"pp64": data, "tg128": steady(12, 50, 55, 0.002)}, looks=[12])
    verdict, tests = facts(saved)
    assert tests["pp64"].method.startswith("Mann–Whitney") and tests["pp64"].finding == FASTER
    assert tests["tg128"].method.startswith("Wilcoxon")
    assert verdict is Verdict.PASS


def test_the_geometric_mean_is_context_not_gated(tmp_path: Path) -> None:
    saved = saved_check(
        tmp_path,
        {"pp64": steady(9, 100, 120, 0.002), "tg128": steady(9, 100, 99, 0.001, seed=2)},
        looks=[9],
    )
    judgement = bench.judge(saved)
    assert judgement.facts.geometric_mean_ratio == pytest.approx((1.2 * 0.99) ** 0.5, abs=0.01)
    assert judgement.verdict is Verdict.WARN  # from tg128's small slowdown, not the mean
    assert judgement.tables[0].rows[-1][0].startswith("geometric mean")


def test_a_schedule_cut_short_spends_the_next_looks_alpha() -> None:
    assert look_points([9, 16], 12) == [9, 12]
    assert look_points([9, 16], 16) == [9, 16]
    assert look_points([9, 16], 5) == [5]
    assert look_points([9], 5) == [5]


# Seeded simulations: what the adaptive schedule promises, checked on many synthetic runs.
PLANNED = abtests.planned_looks(abtests.min_pairs(abtests.first_holm_level(0.05, 1, 2)), 16, 2)


def test_false_alarms_on_a_a_data_with_drift_and_a_position_effect_stay_below_alpha() -> None:
    rng = np.random.default_rng(20261129)
    runs = 400
    alarms = 0
    for _ in range(runs):
        series = simulate(rng, 16, effect=0.0, cv=0.01, drift=0.004, position=0.01)
        [outcome] = evaluate([series], PLANNED, 0.05, 0.03)
        alarms += outcome.finding in (SLOWER, FASTER)
    assert alarms / runs <= 0.05, alarms


def test_a_regression_of_twice_the_margin_at_one_percent_cv_is_found() -> None:
    rng = np.random.default_rng(7)
    runs = 200
    found = 0
    for _ in range(runs):
        series = simulate(rng, 16, effect=-0.06, cv=0.01, drift=0.002, position=0.005)
        [outcome] = evaluate([series], PLANNED, 0.05, 0.03)
        found += outcome.finding == SLOWER and outcome.regression
    assert found / runs >= 0.95, found


def test_the_report_gets_a_dot_plot_of_paired_ratios_and_the_limits_of_evidence(tmp_path: Path) -> None:
    from qualify.report.charts import render_svg

    saved = saved_check(
        tmp_path, {"pp64": steady(5, 100, 100, 0.05)}, looks=[9, 16], arms=("pinned", "pinned")
    )
    judgement = bench.judge(saved)
    [chart] = judgement.charts
    assert chart.kind == "dots" and len(chart.data["pp64"]["candidate"]) == 5
    assert "<svg" in render_svg(chart, 0)
    notes = judgement.facts.limits_of_evidence
    assert any("fewer pairs ran than the" in n for n in notes)  # 5 pairs, 9 planned at least
    assert any(n.startswith("A/A run: the pair noise is the noise floor") for n in notes)


def test_different_devices_or_builds_between_roles_are_shown(tmp_path: Path) -> None:
    saved = saved_check(tmp_path, {"pp64": steady(9, 100, 110, 0.002)}, looks=[9])
    for role, backend in (("pinned", "ROCm"), ("candidate", "CPU")):
        path = tmp_path / role / "measurement.json"
        document = json.loads(path.read_text())
        document["engine"] = {"backends": backend, "build_commit": "0c1e570"}
        path.write_text(json.dumps(document))
    judgement = bench.judge(saved)
    assert judgement.verdict is Verdict.WARN
    assert "backends: 'ROCm' → 'CPU'" in judgement.reason


def test_a_unit_with_other_tests_than_the_first_is_refused(project: Callable[..., Project]) -> None:
    """A bench command that adds a test from its third run on: the pairs and Holm levels were
    planned for one test, so that unit is not kept (INVALID) instead of silently lowering the
    level below what the computed pairs can reach."""
    p = project()
    counter = p.root / "count"
    script = p.script(
        "engine.py",
        f"""
        import json, pathlib, sys
        count = pathlib.Path({str(counter)!r})
        n = int(count.read_text()) + 1 if count.exists() else 1
        count.write_text(str(n))
        metrics = [{{"name": "tg", "unit": "t/s", "higher_is_better": True, "samples": [100.0, 100.1]}}]
        if n >= 3:
            metrics.append({{"name": "pp", "unit": "t/s", "higher_is_better": True, "samples": [50.0]}})
        pathlib.Path(sys.argv[1]).write_text(json.dumps({{"schema_version": 1, "metrics": metrics}}))
        """,
    )
    p.stage(
        "60-bench.toml",
        f"""
[[check]]
kind = "bench"
name = "b"
format = "metrics"
run = "{{py}} {script} {{out_file}}"
looks = 1
max_pairs = 6
warmup = false
""",
    )
    CliRunner().invoke(app, ["run", "--candidate", "cand", "--project", str(p.root)])
    schedule = json.loads((p.run_dirs()[0] / "60-bench" / "b" / "schedule.json").read_text())
    third = schedule["units"][2]
    assert not third["ok"] and "its tests differ from the first unit's (new: pp)" in third["outcome"]
    result = json.loads((p.run_dirs()[0] / "60-bench" / "b" / "result.json").read_text())
    assert result["verdict"] in ("FAIL", "ERROR") and "tests differ" in result["reason"]


@pytest.mark.parametrize("slower", [0.02, 0.025, 0.03])
def test_a_slowdown_within_the_margin_is_rarely_called_a_regression(slower: float) -> None:
    """Truly slower by δ/1.5 to δ (δ = 3 %) at 3 % CV: called a regression (SLOWER beyond δ) in at
    most α of the runs. Deciding on the point estimate did so in 15 % (2 %) to 44 % (2.5 %)."""
    rng = np.random.default_rng(20261201)
    runs = 400
    regressions = 0
    for _ in range(runs):
        series = simulate(rng, 16, effect=-slower, cv=0.03)
        [outcome] = evaluate([series], PLANNED, 0.05, 0.03)
        regressions += outcome.finding == SLOWER and outcome.regression
    # 0.05 plus two Monte Carlo standard errors of a rate of 0.05 over 400 runs.
    assert regressions / runs <= 0.05 + 2 * (0.05 * 0.95 / runs) ** 0.5, regressions


def test_a_slow_first_repetition_is_left_out_when_the_plan_says_so(tmp_path: Path) -> None:
    """As on an H200 (examples/llama-cpp-cuda): each llama-bench process runs its first
    repetition at about half speed, so every unit varies more than max_unit_cv, unless the
    plan leaves that repetition out. The saved repetitions are the same either way."""
    rng = np.random.default_rng(3)
    pairs = [tuple([50.0, *list(100 * (1 + rng.normal(0, 0.004, 4)))] for _ in range(2)) for _ in range(12)]
    saved = saved_check(tmp_path, {"pp512": pairs}, looks=[9, 16], limits={"max_unit_cv": 0.1})
    assert bench.judge(saved).facts.tests["pp512"].finding == "INVALID"
    kept = SavedCheck(
        saved.folder, replace(saved.spec, params={**saved.spec.params, "discard_reps": 1}), saved.roles
    )
    judgement = bench.judge(kept)
    assert judgement.facts.tests["pp512"].finding == NO_CHANGE, judgement.reason
    assert judgement.verdict is Verdict.PASS
