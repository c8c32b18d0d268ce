"""No PASS without a judgement: every registered kind, every role set the plan allows, broken and
empty measurements. Judged through `qualify.pipeline.judging`, the one path the stage runner and
`--rejudge` both take, so no kind, role set or rerun can slip past the rule."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from qualify.checks.base import ROLES, CheckKind, Judgement, SavedCheck
from qualify.core.checkspec import CheckSpec
from qualify.core.verdicts import Verdict
from qualify.kinds import KINDS
from qualify.pipeline.judging import judge_saved, no_pass_without_judgement

#: Limits a kind can judge the candidate by on its own, so that a candidate-only role set is
#: allowed for it (the empty limit set is tried too).
OWN_LIMITS: dict[str, dict[str, float]] = {
    "command": {"max_lat": 10.0},
    "kld": {"max_mean_kld": 0.01},
    "soak": {"max_rss_growth_mib": 64.0},
}

ROLE_SETS = [
    tuple(r for r in ROLES if r in chosen)
    for n in range(1, 4)
    for chosen in itertools.combinations(ROLES, n)
    if "candidate" in chosen
]


def _spec(kind: CheckKind, roles: tuple[str, ...], limits: dict[str, float]) -> CheckSpec:
    params: dict[str, Any] = {p.name: p.default for p in kind.params}
    for p in kind.params:
        if p.required:
            params[p.name] = "true"
    return CheckSpec(name="c", kind=kind.name, params=params, limits=limits, roles=roles)


def _write(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


MEASUREMENTS = {
    "none": None,  # the run stopped before anything was saved
    "empty": {},
    "error": {"error": {"message": "could not start", "hint": None}},
    "ok-without-data": {"ok": True, "outcome": "exited 0"},
}


def _cases() -> list[tuple[CheckKind, tuple[str, ...], dict[str, float]]]:
    cases = []
    for kind in KINDS:
        for roles in ROLE_SETS:
            for limits in ({}, OWN_LIMITS.get(kind.name, {})):
                spec = _spec(kind, roles, limits)
                if kind.invalid(spec) or (
                    "pinned" not in roles and not kind.builds_arms and kind.needs_pinned(spec)
                ):
                    continue  # the plan refuses it (tests/pipeline/test_plan_refusals.py)
                cases.append((kind, roles, limits))
    return cases


@pytest.mark.parametrize("measurement", list(MEASUREMENTS))
@pytest.mark.parametrize(
    ("kind", "roles", "limits"),
    _cases(),
    ids=lambda v: v.name if isinstance(v, CheckKind) else ("+".join(v) if isinstance(v, tuple) else str(v)),
)
def test_broken_or_empty_measurements_never_pass(
    tmp_path: Path, kind: CheckKind, roles: tuple[str, ...], limits: dict[str, float], measurement: str
) -> None:
    saved = MEASUREMENTS[measurement]
    if saved is not None:
        for role in roles:
            _write(tmp_path / role / "measurement.json", {"role": role, **saved})
        # Files kinds read besides the measurements, present but holding nothing.
        _write(tmp_path / "schedule.json", {"units": [], "pairs": 0, "plan": None})
        _write(tmp_path / "source.json", {})
    judgement = judge_saved(kind, SavedCheck(tmp_path, _spec(kind, roles, limits), roles))
    assert judgement.verdict not in (Verdict.PASS, Verdict.WARN), (judgement.reason, judgement.judged)


@pytest.mark.parametrize("verdict", [Verdict.PASS, Verdict.WARN])
def test_a_judgement_that_judged_nothing_is_fail(verdict: Verdict) -> None:
    out = no_pass_without_judgement(Judgement(verdict, "0 series without a leak"))
    assert out.verdict is Verdict.FAIL
    assert out.reason.startswith("measured nothing") and "0 series" in out.reason
    kept = Judgement(verdict, "1 limit", judged=("limit max_x",))
    assert no_pass_without_judgement(kept) is kept


def test_a_crashing_judge_is_error(tmp_path: Path) -> None:
    def boom(_saved: SavedCheck) -> Judgement:
        raise ZeroDivisionError("bug")

    kind = CheckKind("boom", "", (), "", implementation=lambda: (lambda _ctx: None, boom))
    spec = CheckSpec(name="c", kind="boom", params={}, limits={}, roles=("candidate",))
    out = judge_saved(kind, SavedCheck(tmp_path, spec, ("candidate",)))
    assert out.verdict is Verdict.ERROR and "ZeroDivisionError" in out.reason
    assert (tmp_path / "logs" / "judge-error.log").is_file()
