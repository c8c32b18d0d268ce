"""A `kld` check's limits as metrics a bisect can watch one by one: each limit's verdict on the
candidate and the figure it was judged on, read from the check's saved facts.

`max_mean_kld`, `max_p99_kld`, `min_top1_agreement`, `max_abs_dppl_pct` and
`max_confident_flips` are metrics `mean_kld`, `p99_kld`, `top1_agreement`, `abs_dppl_pct` and
`confident_flips`: the verdict is the judge's rule on the saved estimate and one-sided bound
(FAIL beyond the limit, INCONCLUSIVE when only the bound is, else PASS: `judge.limit_verdict`),
the figure each role's estimate. `noninferiority` is the non-inferiority test's saved verdict,
its figure each role's mean KL from the reference. Nothing is measured again; a check that never
reached its bounds (a failed run, too few chunks to bound) judges none of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from qualify.numerics.judge import limit_verdict
from qualify.numerics.kind import GATES
from qualify.records.numerics import KldFacts

NONINFERIORITY = "noninferiority"


def metric_names(limits: Mapping[str, float]) -> list[str]:
    """The metrics a check with these limits judges one by one, in the kind's order."""
    return [g.bound for g in GATES if g.limit in limits] + [NONINFERIORITY]


@dataclass(frozen=True)
class LimitJudged:
    """One metric of a `kld` check: the verdict word, why, and each role's figure (None where
    the check saved none)."""

    verdict: str
    reason: str
    candidate: float | None
    pinned: float | None


def judged_metric(metric: str, facts: KldFacts | None, limits: Mapping[str, float]) -> LimitJudged | None:
    """The metric's verdict and figures from the check's saved facts; None when the check judged
    no such metric (its run never reached the bounds, or it saved no facts)."""
    if facts is None:
        return None
    if metric == NONINFERIORITY:
        ni = facts.noninferiority
        if ni is None:
            return None
        reason = f"θ {ni.theta:.4g} per token against δ {ni.delta:.4g}"
        return LimitJudged(ni.verdict, reason, ni.mean_kl_candidate, ni.mean_kl_pinned)
    gate = next((g for g in GATES if g.bound == metric), None)
    judged = facts.bound("candidate", metric)
    if gate is None or gate.limit not in limits or judged is None:
        return None
    limit, estimate, bound = limits[gate.limit], judged.estimate, judged.bound
    verdict = limit_verdict(gate, estimate, bound, limit)
    side = "upper" if gate.upper else "lower"
    reason = f"{gate.label} {estimate:.4g} ({side} bound {bound:.4g}) against {gate.limit} {limit:.4g}"
    pinned = facts.bound("pinned", metric)
    return LimitJudged(verdict, reason, estimate, None if pinned is None else pinned.estimate)
