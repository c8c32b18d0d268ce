"""The `bench` kind's measure and judge.

`qualify.bench.kind` declares the kind (parameters, limits, verdict rules) and documents what it
measures and how it decides; `qualify.kinds` imports this module when such a check first runs
or is judged.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

import pandas as pd

from qualify.bench import conditions, tables, why
from qualify.bench.data import FORMATS, config_differences
from qualify.bench.judge import (
    INCONCLUSIVE,
    INVALID,
    SLOWER,
    Outcome,
    Series,
    evaluate,
    series_from,
    unit_center,
)
from qualify.bench.params import BenchParams
from qualify.bench.schedule import DEFAULT_MARGIN, PLANNED_MAXIMUM, run_schedule
from qualify.checks.base import Finding, Judgement, SavedCheck
from qualify.checks.findings import worst
from qualify.core.context import CheckContext
from qualify.core.errors import QualifyError
from qualify.core.gitstatus import listed
from qualify.core.verdicts import Verdict
from qualify.records.bench import (
    BenchFacts,
    BenchMeasurement,
    BenchSchedule,
    BenchTestFact,
    BenchUnit,
    Machine,
)
from qualify.stats import abtests

#: Processes named in one finding; the rest are counted (schedule.json lists them all).
LISTED_PROCESSES = 5


def measure(ctx: CheckContext) -> None:
    fmt = BenchParams.of(ctx.spec).format
    if fmt not in FORMATS:
        raise QualifyError(f"bench: unknown format {fmt!r}", "use " + " or ".join(FORMATS))
    run_schedule(ctx)


def _load(
    saved: SavedCheck, discard: int
) -> tuple[dict[int, dict[str, tuple[float, ...]]], dict[str, tuple[str, bool]]]:
    values: dict[int, dict[str, tuple[float, ...]]] = defaultdict(dict)
    kinds: dict[str, tuple[str, bool]] = {}
    for role in ("pinned", "candidate"):
        path = saved.role_dir(role) / "samples.parquet"
        if not path.is_file():
            continue
        frame = pd.read_parquet(path)
        if frame.empty:
            continue
        for (unit, test), group in frame.groupby(["unit", "test"], sort=False):
            reps = group[group["rep"] >= discard].sort_values("rep")
            values[int(str(unit))][str(test)] = tuple(float(v) for v in reps["value"])
            kinds.setdefault(
                str(test), (str(group["unit_name"].iloc[0]), bool(group["higher_is_better"].iloc[0]))
            )
    return dict(values), kinds


def _stop_reason(schedule: BenchSchedule, outcomes: list[Outcome], invalid: dict[str, str]) -> str:
    """Why the schedule stopped, as this judgement's reader needs it. A run set's members share
    one schedule, which runs to its planned maximum while any member's test is undecided; a
    member whose own tests were all decided says so, rather than pass on a count of tests that
    are not its own."""
    stop = schedule.stop_reason or "stopped"
    shared = bool(schedule.joint)  # the path of the set's one schedule, when shared
    decided = bool(outcomes) and all(o.finding != INCONCLUSIVE and o.label not in invalid for o in outcomes)
    if shared and decided and stop.startswith(PLANNED_MAXIMUM):
        return f"{PLANNED_MAXIMUM} for other members' tests; every test of this one was decided"
    return stop


def judge(saved: SavedCheck) -> Judgement:
    path = saved.folder / "schedule.json"
    if not path.is_file():
        return Judgement(Verdict.ERROR, "not measured (the run stopped first)")
    schedule = BenchSchedule.read(path)
    units = schedule.units
    params = BenchParams.of_saved(saved)
    rule = schedule.plan  # the stopping rule the schedule ran by
    # The machine's conditions are kept apart: the why counts them in one clause (`why`).
    findings: list[Finding] = []
    machine_findings: list[Finding] = []
    for unit in units:
        where = _where(unit)
        if unit.error is not None:
            hint = unit.error.hint
            findings.append(
                Finding(
                    Verdict.ERROR,
                    f"{where}: {unit.error.message}" + (f" ({hint})" if hint else ""),
                    unit.role,
                )
            )
        elif not unit.ok:
            verdict = Verdict.FAIL if unit.role == "candidate" else Verdict.ERROR
            tail = "\n".join(unit.output_tail[-6:])
            findings.append(Finding(verdict, f"INVALID: {where} {unit.outcome}\n{tail}".rstrip(), unit.role))
        for note in unit.env_notes:
            machine_findings.append(
                Finding(Verdict.ERROR, f"INVALID: environment changed during {where}: {note}", unit.role)
            )
    holders = schedule.baseline_env.gpu_processes if schedule.baseline_env else []
    if holders:
        # A desktop or a shared host can have hundreds: the first few say what they are, the
        # count says how many; schedule.json keeps every one.
        shown = listed(tuple(holders[:LISTED_PROCESSES]), len(holders))
        machine_findings.append(Finding(Verdict.WARN, f"other processes held the GPU throughout: {shown}"))
    machine_findings += conditions.findings(units)

    findings += _engine_differences(saved)
    values, kinds = _load(saved, params.discard_reps)
    series = series_from(units, values, kinds, unit_center(params.format, params.together))
    margin = saved.spec.limits.get("speed_margin", DEFAULT_MARGIN)
    outcomes = evaluate(series, rule.looks, rule.alpha, margin, params.gate) if rule else []
    invalid = _invalid_tests(saved, params, units, values, kinds)
    pairs = schedule.pairs
    # Nothing measured is FAIL, unless a baseline or harness failure already explains it.
    if pairs == 0 and not any(
        f.verdict in (Verdict.FAIL, Verdict.ERROR) for f in findings + machine_findings
    ):
        findings.append(Finding(Verdict.FAIL, "no pair completed: nothing was measured", "candidate"))
    others = list(findings)  # neither a test's nor the machine's
    findings += [_finding(outcome, invalid.get(outcome.label), margin) for outcome in outcomes]
    findings += machine_findings
    verdict = worst(findings)
    schedule = schedule.model_copy(update={"stop_reason": _stop_reason(schedule, outcomes, invalid)})
    result = why.Result(verdict, outcomes, invalid, margin, pairs, schedule.stop_reason)
    reason = why.line(result, others, units, holders)
    by_label = {s.label: s for s in series}
    ratios = [o.shift.ratio for o in outcomes if o.shift is not None]
    aa = _arms(saved)
    return Judgement(
        verdict,
        reason,
        tuple(findings),
        (
            tables.results_table(outcomes, by_label, invalid, ratios, margin),
            tables.ratios_table(outcomes, by_label),
            conditions.state_table(units, schedule.gpu_telemetry),
            tables.schedule_table(units, schedule.shared),
        ),
        charts=(tables.ratios_chart(outcomes, by_label, margin),) if outcomes else (),
        facts=BenchFacts(
            limits_of_evidence=tables.limits_of_evidence(schedule, outcomes, by_label, margin, aa),
            pairs=pairs,
            stop_reason=schedule.stop_reason,
            plan=rule,
            margin=margin,
            a_a=aa,
            machine=Machine(gpu_telemetry=_telemetry(schedule), flagged=conditions.flagged(units)),
            geometric_mean_ratio=abtests.geometric_mean(ratios) if ratios else None,
            tests={o.label: _fact(o, by_label[o.label], invalid.get(o.label)) for o in outcomes},
            shared_measurement=schedule.shared,
        ),
        judged=tuple(
            f"{o.label} against pinned" for o in outcomes if o.shift is not None and o.label not in invalid
        ),
    )


def _telemetry(schedule: BenchSchedule) -> dict[str, Any] | None:
    """Where GPU state was read, as the schedule recorded it (None in runs before it was)."""
    return schedule.gpu_telemetry.to_json() if schedule.gpu_telemetry is not None else None


def _measured(saved: SavedCheck) -> dict[str, BenchMeasurement | None]:
    return {role: saved.measured(role, BenchMeasurement) for role in ("pinned", "candidate")}


def _engine_differences(saved: SavedCheck) -> list[Finding]:
    """Build and device facts (llama-bench's build_commit, backends, gpu_info) that differ
    between roles: legitimate across toolchains at times, always worth a reviewer's look."""
    engines = [m.engine if m else {} for m in _measured(saved).values()]
    changed = [
        f"{key}: {engines[0][key]!r} → {engines[1][key]!r}"
        for key in sorted(set(engines[0]) & set(engines[1]))
        if engines[0][key] != engines[1][key]
    ]
    if not changed:
        return []
    return [Finding(Verdict.WARN, "the roles report different builds or devices: " + "; ".join(changed))]


def _where(unit: BenchUnit) -> str:
    if unit.phase == "pair":
        return f"unit {unit.index} (pair {unit.pair}, {unit.role})"
    return f"unit {unit.index} ({unit.phase}, {unit.role})"


def _arms(saved: SavedCheck) -> bool:
    arms = {role: m.arm if m else None for role, m in _measured(saved).items()}
    return arms["pinned"] is not None and arms["pinned"] == arms["candidate"]


def _invalid_tests(
    saved: SavedCheck,
    params: BenchParams,
    units: list[BenchUnit],
    values: dict[int, dict[str, tuple[float, ...]]],
    kinds: dict[str, tuple[str, bool]],
) -> dict[str, str]:
    """Why a test is INVALID (configuration differs between roles, units too noisy)."""
    reasons: dict[str, str] = {}
    configs = {role: m.configs if m else {} for role, m in _measured(saved).items()}
    allowed = set(params.allow_config_diff)
    for label in kinds:
        if label in configs["pinned"] and label in configs["candidate"]:
            differences = config_differences(configs["pinned"][label], configs["candidate"][label], allowed)
            if differences:
                reasons[label] = "configuration differs between roles: " + "; ".join(differences)
                continue
        # Every unit against pinned's first: another -t or another build later in the run counts.
        base = configs["pinned"].get(label)
        for unit in units:
            config = unit.configs.get(label)
            if base is None or config is None:
                continue
            differences = config_differences(base, config, allowed)
            if differences:
                reasons[label] = (
                    f"configuration of {_where(unit)} differs from pinned's first unit: "
                    + "; ".join(differences)
                )
                break
    limit = saved.spec.limits.get("max_unit_cv")
    if limit is not None:
        for label in kinds:
            cvs = [abtests.cv(v[label]) for u, v in values.items() if label in v]
            noisy = [c for c in cvs if c > limit]
            if any(math.isnan(c) for c in cvs):
                reasons.setdefault(label, "max_unit_cv needs 2 repetitions per unit after discard_reps")
            elif cvs and len(noisy) * 4 > len(cvs):
                reasons.setdefault(
                    label,
                    f"{len(noisy)} of {len(cvs)} units vary more than max_unit_cv = {limit:g} "
                    f"(worst {max(noisy):.1%})",
                )
    return reasons


def _finding(outcome: Outcome, invalid: str | None, margin: float) -> Finding:
    text = f"{outcome.label}: {_describe(outcome)}"
    if invalid:
        return Finding(Verdict.ERROR, f"{outcome.label}: INVALID — {invalid}", "candidate")
    if outcome.finding == SLOWER:
        if outcome.regression:
            return Finding(Verdict.FAIL, f"{text} — a regression beyond {margin:.1%}", "candidate")
        return Finding(Verdict.WARN, f"{text} — slower, within {margin:.1%}", "candidate")
    if outcome.finding == INCONCLUSIVE:
        return Finding(
            Verdict.INCONCLUSIVE, f"{text}" + (f" — {outcome.note}" if outcome.note else ""), "candidate"
        )
    return Finding(Verdict.PASS, text, "candidate")


def _describe(outcome: Outcome) -> str:
    shift = outcome.shift
    if shift is None:
        return f"{outcome.finding} ({outcome.note})"
    return (
        f"{outcome.finding}, R = {shift.ratio:.4f} [{tables.interval(shift)}], p = {shift.p_value:.3g} "
        f"at level {shift.level:.3g}, {outcome.pairs} pairs (look {outcome.look})"
    )


def _fact(outcome: Outcome, series: Series, invalid: str | None) -> BenchTestFact:
    shift = outcome.shift
    return BenchTestFact(
        finding=INVALID if invalid else outcome.finding,
        regression=outcome.regression,
        invalid=invalid,
        ratio=shift.ratio if shift else None,
        low=shift.ratio_low if shift else None,
        high=None if shift is None or math.isinf(shift.ratio_high) else shift.ratio_high,
        p_value=shift.p_value if shift else None,
        level=shift.level if shift else None,
        method=shift.method if shift else None,
        pairs=outcome.pairs,
        look=outcome.look,
        pinned=tables.median_value(series, 0),
        candidate=tables.median_value(series, 1),
        unit=series.unit,
        pair_noise=tables.noise(series),
    )
