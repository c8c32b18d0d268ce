"""`max_unit_cv` needs two repetitions per unit after `discard_reps`: with fewer, the plan is
refused before anything runs (llama-bench's `-r` read from the run line and the check's vars),
and a `metrics` command whose units turn out to have one repetition is INVALID, never a pass."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest
from benchsim import saved_check, spec, steady

from qualify.bench import check as bench
from qualify.bench.kind import KIND
from qualify.bench.params import BenchParams
from qualify.bench.repetitions import planned_repetitions
from qualify.core.errors import ConfigError, RunStoreError
from qualify.core.verdicts import Verdict
from qualify.pipeline.plan import load_plan
from qualify.stats import abtests

RUN = "{bin}/llama-bench -m {model} -r {reps} -o jsonl"


@pytest.mark.parametrize(
    ("run", "variables", "expected"),
    [
        (RUN, {"reps": 3}, 3),
        (RUN, {"reps": "4"}, 4),
        ("{bin}/llama-bench -m m -o jsonl", {}, 5),  # llama-bench's default
        ("{bin}/llama-bench --repetitions 2 -o jsonl", {}, 2),
        ("{bin}/llama-bench --repetitions=7 -o jsonl", {}, 7),
        (RUN, {}, None),  # left to an arm's vars: unknown before the run
    ],
)
def test_the_planned_repetitions_are_read_from_the_run_line(
    run: str, variables: dict[str, object], expected: int | None
) -> None:
    assert planned_repetitions(BenchParams.of(spec(run=run)), variables) == expected


@pytest.mark.parametrize(("reps", "discard"), [(1, 0), (3, 2), (2, 5)])
def test_too_few_repetitions_for_the_cv_limit_are_a_plan_error(reps: int, discard: int) -> None:
    s = spec({"max_unit_cv": 0.1}, run=RUN, discard_reps=discard)
    problem = KIND.invalid(replace(s, vars={"reps": reps}))
    assert problem is not None and "max_unit_cv needs at least 2 repetitions" in problem
    assert f"keeps {max(reps - discard, 0)}" in problem


def test_enough_repetitions_or_no_cv_limit_are_accepted() -> None:
    s = spec({"max_unit_cv": 0.1}, run=RUN, discard_reps=1)
    assert KIND.invalid(replace(s, vars={"reps": 3})) is None
    s = spec({"speed_margin": 0.05}, run=RUN, discard_reps=0)
    assert KIND.invalid(replace(s, vars={"reps": 1})) is None


def test_the_plan_is_refused_before_anything_runs(tmp_path: Path) -> None:
    (tmp_path / "60-bench.toml").write_text(
        '[[check]]\nkind = "bench"\nname = "b"\n'
        'run = "{bin}/llama-bench -m {model} -r {reps} -o jsonl"\n'
        "discard_reps = 1\nvars = { reps = 1 }\nlimits = { speed_margin = 0.05, max_unit_cv = 0.1 }\n"
    )
    with pytest.raises(ConfigError, match="max_unit_cv needs at least 2 repetitions"):
        load_plan(tmp_path)


def test_a_unit_cv_is_undefined_for_one_repetition() -> None:
    assert math.isnan(abtests.cv([10.0]))
    assert abtests.cv([9.0, 11.0]) == pytest.approx(math.sqrt(2) / 10)


def test_one_repetition_per_unit_under_a_cv_limit_is_invalid_not_a_pass(tmp_path: Path) -> None:
    """A `metrics` command (its repetitions are known only from what it wrote) that saved one
    value per unit: the limit cannot be judged, so the test is INVALID and the check ERROR."""
    pairs = [((100.0,), (100.0 + 0.1 * (k % 3),)) for k in range(9)]
    saved = saved_check(tmp_path, {"pp64": pairs}, looks=[9, 16], limits={"max_unit_cv": 0.05})
    judgement = bench.judge(saved)
    assert judgement.verdict is Verdict.ERROR, judgement.reason
    assert "needs 2 repetitions" in judgement.facts.tests["pp64"].invalid
    # The same units without the limit are judged on their pairs as usual.
    plain = saved_check(tmp_path / "plain", {"pp64": steady(9, 100, 100, 0.001)}, looks=[9, 16])
    assert bench.judge(plain).verdict is not Verdict.ERROR


def test_a_saved_discard_reps_of_the_wrong_type_is_refused_naming_the_result(tmp_path: Path) -> None:
    """A rejudge reads the parameters a result saved: one of the wrong type names the file and
    the key, never judges by a guess."""
    pairs = [((100.0, 101.0), (100.0, 100.5))] * 9
    saved = saved_check(tmp_path, {"pp64": pairs}, looks=[9, 16])
    wrong = replace(saved, spec=replace(saved.spec, params={**saved.spec.params, "discard_reps": "1"}))
    with pytest.raises(
        RunStoreError, match=r"result\.json: spec\.params\.discard_reps: expected a whole number"
    ):
        bench.judge(wrong)
