"""The numerics stage's judgement of saved per-token vectors: limits and non-inferiority.

A pure function of a ``TokenStats`` (reference, pinned, optionally pinned.2, candidate), the
plan's limits and the bootstrap settings; ``qualify.numerics.kind`` documents the verdict rules
and ``qualify.numerics.tables`` presents what was judged.
Every limit is judged on a one-sided bound (``qualify.numerics.bootstrap``): a point estimate beyond the
limit is FAIL, an estimate within it whose bound is not is INCONCLUSIVE (the data cannot decide
at the stated confidence), both within it passes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from qualify.checks.base import CANDIDATE, Finding
from qualify.core.verdicts import Verdict
from qualify.numerics.bootstrap import BootstrapBound
from qualify.numerics.bounds import judged_bounds
from qualify.numerics.kind import GATES, KIND, Gate
from qualify.numerics.looks import Stop, guard_plan, sequential
from qualify.numerics.noninferiority import FLOOR_FACTOR, MarginTest, decide, margin_tests, quantities
from qualify.numerics.params import NumericsParams
from qualify.numerics.summary import KldSummary, summarize
from qualify.numerics.tokenstats import TokenStats
from qualify.records.numerics import BoundFacts, MarginTestFacts, NoninferiorityFacts, PairSummary, SkewGuard

FLOOR_ROLE = "pinned.2"
DEFAULT_NI_MARGIN = KIND.limit_defaults()["noninferiority_margin"]


@dataclass(frozen=True)
class Settings:
    """What the judgement at one look reads: the plan's bootstrap parameters, taken from the
    check's `NumericsParams` (`of`, which fills every field: none keeps a default of its own),
    and what the look changes (`at_look`: its share of α as `confidence`, and the Cantelli
    guard's confidence and stretch as planned across the looks). Not the parameters type
    itself: a look's confidence is not the plan's, and the judge reads none of the other
    parameters."""

    min_chunks: int
    resamples: int
    seed: int
    confidence: float
    flip_margin: float
    looks: int = 1
    #: At a look: the Cantelli guard's confidence and stretch, as the guard was planned across
    #: the looks (`qualify.numerics.looks.guard_plan`; `confidence` is the look's share of α).
    guard_confidence: float | None = None
    stretch: float = 1.0

    def at_look(self, planned: Sequence[int], chunks: int, confidence: float) -> Settings:
        """These settings at a look of `chunks` of the `planned` ones, its bounds at
        `confidence` (`qualify.numerics.looks.sequential` gives it)."""
        guard_confidence, stretch = guard_plan(planned or (chunks,), self.confidence).at(chunks)
        return replace(self, confidence=confidence, guard_confidence=guard_confidence, stretch=stretch)

    @classmethod
    def of(cls, params: NumericsParams) -> Settings:
        """The judge's settings from a check's parameters."""
        return cls(
            min_chunks=params.min_chunks,
            resamples=params.resamples,
            seed=params.seed,
            confidence=float(params.confidence),
            flip_margin=float(params.flip_margin),
            looks=params.looks,
        )


def g(x: float | None) -> str:
    """A figure for a table cell."""
    if x is None:
        return ""
    if not math.isfinite(x):
        return str(x)
    return f"{x:.4g}"


@dataclass
class Outcome:
    """The judgement of saved per-token vectors (no verdict: the caller folds the findings), and
    the evidence the tables present (`qualify.numerics.tables`)."""

    findings: list[Finding]
    #: The fields of `qualify.records.numerics.KldFacts` this judgement set, typed.
    facts: dict[str, Any]
    #: The limits evaluated on the candidate and the comparisons made (see Judgement.judged).
    judged: list[str] = field(default_factory=list)
    #: The roles compared with the reference (none when nothing was: no tables then).
    roles: list[str] = field(default_factory=list)
    summaries: dict[tuple[str, str], KldSummary] = field(default_factory=dict)
    bounds: dict[str, dict[str, BootstrapBound]] = field(default_factory=dict)
    noninferiority: Noninferiority | None = None


def judge_stats(stats: TokenStats, limits: Mapping[str, float], s: Settings) -> Outcome:
    """Findings, facts and what was judged, for saved per-token vectors and the limits."""
    out = Outcome([], {"n_tokens": stats.n_tokens, "n_chunks": stats.n_chunks, "kl_floor": stats.kl_floor})
    ref = stats.reference
    judged = [r for r in ("pinned", "candidate") if (ref, r) in stats.pair]
    if stats.n_tokens == 0 or "candidate" not in judged:
        out.findings.append(Finding(Verdict.FAIL, "no tokens compared: nothing was measured", "candidate"))
        return out
    out.roles = judged
    for role in stats.roles:
        bad = int(stats.role[role].nonfinite.sum())
        if bad:
            verdict = Verdict.FAIL if role == "candidate" else Verdict.ERROR
            out.findings.append(Finding(verdict, f"{bad} NaN/Inf log-probs (must be 0)", role))
    if any(stats.kld_lower_bound.get((ref, r), False) for r in judged):
        out.findings.append(
            Finding(
                Verdict.WARN,
                "KL from top-K rows is a lower bound: a KL limit met on it is not proven",
                "candidate",
            )
        )
    if stats.n_chunks < s.min_chunks:
        out.findings.append(
            Finding(
                Verdict.INCONCLUSIVE,
                f"{stats.n_chunks} chunks scored, fewer than min_chunks {s.min_chunks}: "
                "too few for the bounds to hold their confidence",
                None,
            )
        )
    summaries = out.summaries = {p: summarize(stats, *p, margin=s.flip_margin) for p in stats.pair}
    out.facts["summaries"] = {f"{a}|{b}": _summary_facts(v) for (a, b), v in summaries.items()}
    finite = {r: _finite(stats, r) for r in judged}
    bounds = out.bounds
    if stats.n_chunks >= 2:
        for role in judged:
            if finite[role]:
                bounds[role] = judged_bounds(
                    stats,
                    role,
                    margin=s.flip_margin,
                    confidence=s.confidence,
                    n_resamples=s.resamples,
                    seed=s.seed,
                    guard_confidence=s.guard_confidence,
                    stretch=s.stretch,
                )
    out.facts["bounds"] = {r: {n: bound_facts(b) for n, b in bs.items()} for r, bs in bounds.items()}
    for gate in GATES:
        if gate.limit in limits:
            out.findings.extend(_gate_findings(gate, limits[gate.limit], bounds, summaries, stats, s))
            if gate.bound in bounds.get(CANDIDATE, {}):
                out.judged.append(f"limit {gate.limit} on the candidate")
    if stats.n_chunks < 2:
        out.findings.append(
            Finding(
                Verdict.INCONCLUSIVE,
                f"{stats.n_chunks} chunk scored: a bound needs at least 2, so no limit was judged",
                None,
            )
        )
    if "pinned" in judged and all(finite.values()) and stats.n_chunks >= 2:
        ni_findings, out.noninferiority = _noninferiority(stats, limits, s)
        out.findings.extend(ni_findings)
        out.facts["noninferiority"] = out.noninferiority.facts()
        out.judged.append("non-inferiority against pinned")
    out.facts["limits_of_evidence"] = [
        f"numerics were scored on one model and one text ({stats.n_tokens} tokens in "
        f"{stats.n_chunks} chunks); other models or prompts may move differently"
    ]
    return out


def decided(outcome: Outcome) -> bool:
    """Whether a look's judgement leaves nothing INCONCLUSIVE (more chunks could not change it)."""
    return not any(f.verdict is Verdict.INCONCLUSIVE for f in outcome.findings)


def judge_in_looks(
    stats: TokenStats, limits: Mapping[str, float], s: Settings, planned: Sequence[int]
) -> Stop[Outcome]:
    """The judgement at the first of the `planned` looks that decides (`qualify.numerics.looks`),
    each look's bounds at its share of the error."""

    def at(chunks: int, confidence: float) -> Outcome:
        return judge_stats(stats.prefix(chunks), limits, s.at_look(planned, chunks, confidence))

    return sequential(planned, stats.n_chunks, s.confidence, at, decided)


def limit_verdict(gate: Gate, estimate: float, bound: float, limit: float) -> str:
    """FAIL when the estimate is beyond the limit, INCONCLUSIVE when only the bound is, else
    PASS."""
    if beyond(gate, estimate, limit):
        return "FAIL"
    return "INCONCLUSIVE" if beyond(gate, bound, limit) else "PASS"


def _finite(stats: TokenStats, role: str) -> bool:
    pv = stats.pair[(stats.reference, role)]
    return bool(np.isfinite(pv.kld).all() and np.isfinite(stats.role[role].nll).all())


def _summary_facts(v: KldSummary) -> PairSummary:
    return PairSummary(
        kld_mean=v.kld_mean,
        kld_median=v.kld_median,
        kld_p90=v.kld_p90,
        kld_p99=v.kld_p99,
        kld_p999=v.kld_p999,
        kld_max=v.kld_max,
        ppl_q=v.ppl_q,
        ppl_base=v.ppl_base,
        dppl_pct=v.dppl_pct,
        same_top_p=v.same_top_p,
        rms_dp=v.rms_dp,
        confident_flips=v.confident_flips,
        confident_flips_per_1e5=v.confident_flips_per_1e5,
        target_at_floor_base=v.target_at_floor_base,
        target_at_floor_other=v.target_at_floor_other,
        kld_lower_bound=v.kld_lower_bound,
    )


def bound_facts(b: BootstrapBound) -> BoundFacts:
    return BoundFacts(
        name=b.name,
        estimate=b.estimate,
        bound=b.bound,
        side=b.side,
        confidence=b.confidence,
        n_units=b.n_units,
        n_resamples=b.n_resamples,
        seed=b.seed,
        z0=b.z0,
        acceleration=b.acceleration,
        method=b.method,
        exact=None if b.exact is None else list(b.exact),
        skew_guard=None if b.guard is None else SkewGuard(skewness=b.guard[0], se=b.guard[1]),
    )


def _test_facts(t: MarginTest) -> MarginTestFacts:
    return MarginTestFacts(
        name=t.name,
        what=t.what,
        estimate=t.upper.estimate,
        upper=t.upper.bound,
        upper_confidence=t.upper.confidence,
        lower=t.lower.bound,
        lower_confidence=t.lower.confidence,
        method=t.upper.method,
    )


def beyond(gate: Gate, value: float, limit: float) -> bool:
    return value > limit if gate.upper else value < limit


def _gate_findings(
    gate: Gate,
    limit: float,
    bounds: Mapping[str, Mapping[str, BootstrapBound]],
    summaries: Mapping[tuple[str, str], KldSummary],
    stats: TokenStats,
    s: Settings,
) -> list[Finding]:
    findings: list[Finding] = []
    side = "upper" if gate.upper else "lower"
    for role in ("pinned", "candidate"):
        b = bounds.get(role, {}).get(gate.bound)
        if b is None:
            continue
        if beyond(gate, b.estimate, limit):
            if role == "candidate":
                findings.append(
                    Finding(
                        Verdict.FAIL,
                        f"{gate.label} {g(b.estimate)} is beyond {gate.limit} {g(limit)} "
                        f"({side} {s.confidence:.0%} bound {g(b.bound)})",
                        role,
                    )
                )
            else:
                findings.append(
                    Finding(
                        Verdict.WARN,
                        f"the pinned build itself is beyond {gate.limit} {g(limit)} ({gate.label} "
                        f"{g(b.estimate)}): the limit is tighter than the baseline meets",
                        role,
                    )
                )
        elif role == "candidate" and beyond(gate, b.bound, limit):
            findings.append(
                Finding(
                    Verdict.INCONCLUSIVE,
                    f"{gate.label} {g(b.estimate)} is within {gate.limit} {g(limit)}, but its {side} "
                    f"{s.confidence:.0%} bound {g(b.bound)} is not (p = {b.p_value(limit):.3f}): "
                    "score more chunks to decide",
                    role,
                )
            )
    return findings


def noninferiority_delta(margin: float, mean_kl_pinned: float, floor: float | None) -> float:
    """δ = max(margin × mean KL_P, 3 × the pinned arm's run-to-run floor): what the tests hold
    θ to, shown beside them (the tests themselves never compare with an estimated δ)."""
    return max(margin * mean_kl_pinned, FLOOR_FACTOR * (floor or 0.0))


@dataclass(frozen=True)
class Noninferiority:
    """The candidate against pinned: θ = mean KL_C − KL_P, the δ it is held to, and the tests
    with the margin inside them (`qualify.numerics.noninferiority`) that decide."""

    theta: float
    tests: tuple[MarginTest, ...]
    delta: float
    margin: float
    mean_kl_pinned: float
    mean_kl_candidate: float
    #: Mean |KL(pinned‖pinned.2)|: the pinned arm's run-to-run floor (None: not rerun).
    floor: float | None
    verdict: str

    def facts(self) -> NoninferiorityFacts:
        return NoninferiorityFacts(
            theta=self.theta,
            tests=[_test_facts(t) for t in self.tests],
            delta=self.delta,
            margin=self.margin,
            mean_kl_pinned=self.mean_kl_pinned,
            mean_kl_candidate=self.mean_kl_candidate,
            floor=self.floor,
            verdict=self.verdict,
        )


def _noninferiority(
    stats: TokenStats, limits: Mapping[str, float], s: Settings
) -> tuple[list[Finding], Noninferiority]:
    ref = stats.reference
    rho = limits.get("noninferiority_margin", DEFAULT_NI_MARGIN)
    kl_pinned, kl_candidate = stats.kld(ref, "pinned"), stats.kld(ref, "candidate")
    rerun = stats.kld("pinned", FLOOR_ROLE) if ("pinned", FLOOR_ROLE) in stats.pair else None
    per_token = quantities(kl_candidate, kl_pinned, rho, rerun)
    sums = {name: (what, stats.chunk_sums(d)) for name, (what, d) in per_token.items()}
    tests = margin_tests(
        sums,
        stats.chunk_sizes().astype(np.float64),
        confidence=s.confidence,
        n_resamples=s.resamples,
        seed=s.seed,
        guard_confidence=s.guard_confidence,
        stretch=s.stretch,
    )
    kl_p, kl_c = float(kl_pinned.mean()), float(kl_candidate.mean())
    theta = float(stats.chunk_sums(kl_candidate - kl_pinned).sum() / stats.chunk_sizes().sum())
    floor = None if rerun is None else float(np.abs(rerun).mean())
    delta = noninferiority_delta(rho, kl_p, floor)
    findings: list[Finding] = []
    if floor is None:
        findings.append(
            Finding(
                Verdict.WARN, "no noise floor measured (pinned not rerun): δ is the margin alone", "pinned"
            )
        )
    if kl_p == 0.0:
        # δ scales pinned's distance from the reference; with none, only the floor is left, and
        # with a still rerun that is 0 too: any difference at all then fails.
        findings.append(
            Finding(
                Verdict.WARN,
                "the reference scored every token exactly as pinned did, so the margin has nothing "
                f"to scale (δ {g(delta)}): non-inferiority asks the candidate for pinned's own scores; "
                "give numerics a reference that computes differently from pinned (another precision "
                "or instruction set)",
                "reference",
            )
        )
    text = f"θ = mean KL(ref‖candidate) − KL(ref‖pinned) = {g(theta)} per token, δ {g(delta)}"
    verdict = decide(tests)
    if verdict == "FAIL":
        shown = "; ".join(
            f"the lower {t.lower.confidence:.0%} bound on mean {t.what} is {g(t.lower.bound)} > 0"
            for t in tests
        )
        findings.append(
            Finding(Verdict.FAIL, f"not non-inferior to pinned (shown): {text}; {shown}", "candidate")
        )
    elif verdict == "INCONCLUSIVE":
        best = min(tests, key=lambda t: t.upper.bound)
        findings.append(
            Finding(
                Verdict.INCONCLUSIVE,
                f"non-inferiority to pinned not shown: {text}; the upper {best.upper.confidence:.1%} bound "
                f"on mean {best.what} is {g(best.upper.bound)} > 0 (p = {best.upper.p_value(0.0):.3f}), "
                "and inferiority is not shown either",
                "candidate",
            )
        )
    return findings, Noninferiority(theta, tests, delta, rho, kl_p, kl_c, floor, verdict)
