"""The numerics stage's judgement of saved per-token vectors: limits, non-inferiority, tables.

A pure function of a ``TokenStats`` (reference, pinned, optionally pinned.2, candidate), the
plan's limits and the bootstrap settings; ``qualify.numerics.kind`` documents the verdict rules.
Every limit is judged on a one-sided bound (``qualify.numerics.bootstrap``): a point estimate beyond the
limit is FAIL, an estimate within it whose bound is not is INCONCLUSIVE (the data cannot decide
at the stated confidence), both within it passes.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from qualify.checks.base import ChartData, Finding, TableData
from qualify.core.verdicts import Verdict
from qualify.numerics.bootstrap import BootstrapBound
from qualify.numerics.bounds import judged_bounds, noninferiority_bound
from qualify.numerics.charts import distribution_chart
from qualify.numerics.kind import GATES, KIND, Gate
from qualify.numerics.summary import KldSummary, summarize
from qualify.numerics.tokenstats import TokenStats

FLOOR_ROLE = "pinned.2"
DEFAULT_NI_MARGIN = KIND.limit_defaults()["noninferiority_margin"]
FLOOR_FACTOR = 3.0  # δ is at least 3 × the pinned arm's run-to-run floor


KLD_BINS = (-math.inf, 0.0, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0, math.inf)
CONFIDENCE_BUCKETS = (0.0, 0.25, 0.5, 0.75, 0.95, 1.0 + 1e-12)


@dataclass(frozen=True)
class Settings:
    min_chunks: int
    resamples: int
    seed: int
    confidence: float
    flip_margin: float


def g(x: float | None) -> str:
    """A figure for a table cell."""
    if x is None:
        return ""
    if not math.isfinite(x):
        return str(x)
    return f"{x:.4g}"


@dataclass
class Outcome:
    findings: list[Finding]
    tables: list[TableData]
    facts: dict[str, Any]
    charts: list[ChartData] = field(default_factory=list)
    #: The limits evaluated on the candidate and the comparisons made (see Judgement.judged).
    judged: list[str] = field(default_factory=list)


def judge_stats(stats: TokenStats, limits: Mapping[str, float], s: Settings) -> Outcome:
    """Findings, tables and facts for saved per-token vectors (no verdict: the caller folds them)."""
    out = Outcome(
        [], [], {"n_tokens": stats.n_tokens, "n_chunks": stats.n_chunks, "kl_floor": stats.kl_floor}
    )
    ref = stats.reference
    judged = [r for r in ("pinned", "candidate") if (ref, r) in stats.pair]
    if stats.n_tokens == 0 or "candidate" not in judged:
        out.findings.append(Finding(Verdict.FAIL, "no tokens compared: nothing was measured", "candidate"))
        return out
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
    summaries = {p: summarize(stats, *p, margin=s.flip_margin) for p in stats.pair}
    out.facts["summaries"] = {f"{a}|{b}": _summary_facts(v) for (a, b), v in summaries.items()}
    finite = {r: _finite(stats, r) for r in judged}
    bounds: dict[str, dict[str, BootstrapBound]] = {}
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
                )
    out.facts["bounds"] = {r: {n: b.to_dict() for n, b in bs.items()} for r, bs in bounds.items()}
    for gate in GATES:
        if gate.limit in limits:
            out.findings.extend(_gate_findings(gate, limits[gate.limit], bounds, summaries, stats, s))
            if gate.bound in bounds.get("candidate", {}):
                out.judged.append(f"limit {gate.limit} on the candidate")
    if stats.n_chunks < 2:
        out.findings.append(
            Finding(
                Verdict.INCONCLUSIVE,
                f"{stats.n_chunks} chunk scored: a bound needs at least 2, so no limit was judged",
                None,
            )
        )
    out.tables.append(_metric_table(stats, limits, bounds, summaries, s))
    if "pinned" in judged and all(finite.values()) and stats.n_chunks >= 2:
        ni_findings, ni_table, ni_facts = _noninferiority(stats, limits, s)
        out.findings.extend(ni_findings)
        out.tables.append(ni_table)
        out.facts["noninferiority"] = ni_facts
        out.judged.append("non-inferiority against pinned")
    out.tables.append(_llama_table(summaries))
    out.tables.append(_distribution_table(stats, judged))
    out.tables.append(_confidence_table(stats, judged))
    out.charts.append(distribution_chart(stats, judged, limits))
    out.facts["limits_of_evidence"] = [
        f"numerics were scored on one model and one text ({stats.n_tokens} tokens in "
        f"{stats.n_chunks} chunks); other models or prompts may move differently"
    ]
    return out


def _finite(stats: TokenStats, role: str) -> bool:
    pv = stats.pair[(stats.reference, role)]
    return bool(np.isfinite(pv.kld).all() and np.isfinite(stats.role[role].nll).all())


def _summary_facts(v: KldSummary) -> dict[str, Any]:
    return {
        "kld_mean": v.kld_mean,
        "kld_median": v.kld_median,
        "kld_p90": v.kld_p90,
        "kld_p99": v.kld_p99,
        "kld_p999": v.kld_p999,
        "kld_max": v.kld_max,
        "ppl_q": v.ppl_q,
        "ppl_base": v.ppl_base,
        "dppl_pct": v.dppl_pct,
        "same_top_p": v.same_top_p,
        "rms_dp": v.rms_dp,
        "confident_flips": v.confident_flips,
        "confident_flips_per_1e5": v.confident_flips_per_1e5,
        "target_at_floor_base": v.target_at_floor_base,
        "target_at_floor_other": v.target_at_floor_other,
        "kld_lower_bound": v.kld_lower_bound,
    }


def _beyond(gate: Gate, value: float, limit: float) -> bool:
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
        if _beyond(gate, b.estimate, limit):
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
        elif role == "candidate" and _beyond(gate, b.bound, limit):
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


def _metric_table(
    stats: TokenStats,
    limits: Mapping[str, float],
    bounds: Mapping[str, Mapping[str, BootstrapBound]],
    summaries: Mapping[tuple[str, str], KldSummary],
    s: Settings,
) -> TableData:
    ref = stats.reference
    roles = [r for r in ("pinned", "candidate") if (ref, r) in summaries]
    rows: list[tuple[Any, ...]] = []
    for gate in GATES:
        row: list[Any] = [gate.label, g(limits.get(gate.limit))]
        verdict = ""
        for role in roles:
            b = bounds.get(role, {}).get(gate.bound)
            row += [g(b.estimate) if b else "", g(b.bound) if b else ""]
            if role == "candidate" and b is not None and gate.limit in limits:
                limit = limits[gate.limit]
                verdict = (
                    "FAIL"
                    if _beyond(gate, b.estimate, limit)
                    else "INCONCLUSIVE"
                    if _beyond(gate, b.bound, limit)
                    else "PASS"
                )
        rows.append((*row, verdict))

    def info(label: str, value: Any) -> None:
        cells: list[Any] = [label, ""]
        for role in roles:
            cells += [value(summaries[(ref, role)]), ""]
        rows.append((*cells, ""))

    info("median KLD", lambda v: g(v.kld_median))
    info("p90 KLD", lambda v: g(v.kld_p90))
    info("p99.9 KLD", lambda v: g(v.kld_p999))
    info("max KLD", lambda v: g(v.kld_max))
    info("PPL (reference's in brackets)", lambda v: f"{v.ppl_q:.4f} ({v.ppl_base:.4f})")
    info("ΔPPL % (all tokens)", lambda v: g(v.dppl_pct))
    info("same top p %", lambda v: f"{100 * v.same_top_p:.3f}")
    info("RMS Δp %", lambda v: g(100 * v.rms_dp))
    info("NaN/Inf log-probs", lambda v: v.nonfinite_other)
    info(
        "targets at a llama.cpp floor (reference's)",
        lambda v: f"{v.target_at_floor_other} ({v.target_at_floor_base})",
    )
    columns = ["metric", "limit"]
    for role in roles:
        columns += [role, f"{role} bound"]
    title = (
        f"Against the reference: estimates and one-sided {s.confidence:.0%} BCa bounds over "
        f"{stats.n_chunks} chunks ({stats.n_tokens} tokens, {s.resamples} resamples, seed {s.seed}); "
        "the means take Cantelli's bound when wider, counts an exact one; the p99 "
        "and |ΔPPL| bounds are BCa alone, approximate"
    )
    return TableData(title, (*columns, "candidate verdict"), tuple(rows))


def noninferiority_delta(margin: float, mean_kl_pinned: float, floor: float | None) -> float:
    """δ = max(margin × mean KL_P, 3 × the pinned arm's run-to-run floor)."""
    return max(margin * mean_kl_pinned, FLOOR_FACTOR * (floor or 0.0))


def noninferiority_verdict(bound: BootstrapBound, delta: float) -> str:
    """FAIL when θ̂ > δ, INCONCLUSIVE when only the upper bound is beyond δ, else PASS."""
    return "FAIL" if bound.estimate > delta else "INCONCLUSIVE" if bound.bound > delta else "PASS"


def _noninferiority(
    stats: TokenStats, limits: Mapping[str, float], s: Settings
) -> tuple[list[Finding], TableData, dict[str, Any]]:
    ref = stats.reference
    rho = limits.get("noninferiority_margin", DEFAULT_NI_MARGIN)
    b = noninferiority_bound(
        stats, "candidate", "pinned", confidence=s.confidence, n_resamples=s.resamples, seed=s.seed
    )
    kl_p = float(stats.kld(ref, "pinned").mean())
    kl_c = float(stats.kld(ref, "candidate").mean())
    floor = None
    if ("pinned", FLOOR_ROLE) in stats.pair:
        floor = float(np.abs(stats.kld("pinned", FLOOR_ROLE)).mean())
    delta = noninferiority_delta(rho, kl_p, floor)
    findings: list[Finding] = []
    if floor is None:
        findings.append(
            Finding(
                Verdict.WARN, "no noise floor measured (pinned not rerun): δ is the margin alone", "pinned"
            )
        )
    text = f"θ = mean KL(ref‖candidate) − KL(ref‖pinned) = {g(b.estimate)} per token"
    verdict = noninferiority_verdict(b, delta)
    if verdict == "FAIL":
        findings.append(
            Finding(Verdict.FAIL, f"not non-inferior to pinned: {text} > δ {g(delta)}", "candidate")
        )
    elif verdict == "INCONCLUSIVE":
        findings.append(
            Finding(
                Verdict.INCONCLUSIVE,
                f"non-inferiority to pinned not shown: {text}, but its upper {s.confidence:.0%} bound "
                f"{g(b.bound)} > δ {g(delta)} (p = {b.p_value(delta):.3f})",
                "candidate",
            )
        )
    ratio = kl_c / kl_p if kl_p > 0 else math.nan
    rows = (
        ("θ̂ = mean KL_C − KL_P per token", g(b.estimate)),
        (f"upper {s.confidence:.0%} bound on θ ({b.method})", g(b.bound)),
        ("δ = max(margin × mean KL_P, 3 × floor)", g(delta)),
        (f"margin {g(rho)} × mean KL_P ({g(kl_p)})", g(rho * kl_p)),
        ("floor = mean |KL(pinned‖pinned.2)|", g(floor) if floor is not None else "not measured"),
        ("3 × floor", g(FLOOR_FACTOR * floor) if floor is not None else ""),
        ("mean KL_C / mean KL_P", g(ratio)),
        ("verdict", verdict),
    )
    facts = {
        "theta": b.estimate,
        "bound": b.bound,
        "method": b.method,
        "delta": delta,
        "margin": rho,
        "mean_kl_pinned": kl_p,
        "mean_kl_candidate": kl_c,
        "floor": floor,
        "verdict": verdict,
    }
    return findings, TableData("Non-inferiority against pinned", ("quantity", "value"), rows), facts


def _llama_table(summaries: Mapping[tuple[str, str], KldSummary]) -> TableData:
    pairs = list(summaries)
    printed = {p: v.printed() for p, v in summaries.items()}
    lines = list(printed[pairs[0]]) if pairs else []

    def cell(value: tuple[float, float | None]) -> str:
        v, unc = value
        return f"{v:.6g} ± {unc:.3g}" if unc is not None else f"{v:.6g}"

    rows = tuple((line, *(cell(printed[p][line]) for p in pairs)) for line in lines)
    columns = ("llama-perplexity line", *(f"{a} → {b}" for a, b in pairs))
    return TableData(
        "llama-perplexity's --kl-divergence figures per pair (base → Q; ± assumes independent tokens)",
        columns,
        rows,
        collapsed=True,
    )


def _distribution_table(stats: TokenStats, roles: list[str]) -> TableData:
    edges = np.array(KLD_BINS)
    counts = {r: np.histogram(stats.kld(stats.reference, r), edges)[0] for r in roles}
    rows = []
    for i in range(len(edges) - 1):
        lo, hi = edges[i], edges[i + 1]
        label = "< 0" if math.isinf(lo) else f"≥ {g(lo)}" if math.isinf(hi) else f"[{g(lo)}, {g(hi)})"
        rows.append((label, *(int(counts[r][i]) for r in roles)))
    return TableData(
        "KLD distribution against the reference (tokens per bin)", ("KLD", *roles), tuple(rows), True
    )


def _confidence_table(stats: TokenStats, roles: list[str]) -> TableData:
    ref = stats.reference
    # The reference's top-1 probability: exp(-nll) of its own top token is not stored, but the
    # top-1/top-2 margin is; bucket by the reference's target probability instead.
    p_ref = np.exp(-stats.role[ref].nll)
    rows = []
    for lo, hi in itertools.pairwise(CONFIDENCE_BUCKETS):
        mask = (p_ref >= lo) & (p_ref < hi)
        n = int(mask.sum())
        means = [g(float(stats.kld(ref, r)[mask].mean())) if n else "" for r in roles]
        rows.append((f"[{lo:g}, {min(hi, 1.0):g}{']' if hi > 1 else ')'}", n, *means))
    return TableData(
        "Mean KLD by the reference's probability of the target token",
        ("p(target) under the reference", "tokens", *(f"{r} mean KLD" for r in roles)),
        tuple(rows),
        True,
    )
