"""The numerics check's report: the limits against the reference (estimates and bounds), the
non-inferiority against pinned, llama-perplexity's own figures, the KLD distribution, the KLD by
the reference's confidence, and the distribution chart. Pure functions of the judged outcome
(`qualify.numerics.judge`) and the vectors it judged."""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from qualify.checks.figures import Cell, Chart, Table
from qualify.numerics.bootstrap import BootstrapBound
from qualify.numerics.charts import distribution_chart
from qualify.numerics.judge import Noninferiority, Outcome, Settings, g, limit_verdict
from qualify.numerics.kind import GATES
from qualify.numerics.noninferiority import FLOOR_FACTOR
from qualify.numerics.summary import KldSummary
from qualify.numerics.tokenstats import TokenStats

KLD_BINS = (-math.inf, 0.0, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0, math.inf)
CONFIDENCE_BUCKETS = (0.0, 0.25, 0.5, 0.75, 0.95, 1.0 + 1e-12)


def stats_tables(
    stats: TokenStats, outcome: Outcome, limits: Mapping[str, float], s: Settings
) -> tuple[Table, ...]:
    """The tables of a judgement of `stats`; none when nothing was compared."""
    if not outcome.roles:
        return ()
    tables = [metric_table(stats, limits, outcome.bounds, outcome.summaries, s)]
    if outcome.noninferiority is not None:
        tables.append(noninferiority_table(outcome.noninferiority, s))
    tables.append(llama_table(outcome.summaries))
    tables.append(distribution_table(stats, outcome.roles))
    tables.append(confidence_table(stats, outcome.roles))
    return tuple(tables)


def stats_charts(stats: TokenStats, outcome: Outcome, limits: Mapping[str, float]) -> tuple[Chart, ...]:
    return (distribution_chart(stats, outcome.roles, limits),) if outcome.roles else ()


def noninferiority_table(ni: Noninferiority, s: Settings) -> Table:
    rho, kl_p, floor = ni.margin, ni.mean_kl_pinned, ni.floor
    ratio = ni.mean_kl_candidate / kl_p if kl_p > 0 else math.nan
    rows: list[tuple[str, str]] = [("θ̂ = mean KL_C − KL_P per token", g(ni.theta))]
    for t in ni.tests:
        rows += [
            (f"mean {t.what} (0 on the margin)", g(t.upper.estimate)),
            (f"  upper {t.upper.confidence:.1%} bound ({t.upper.method}): ≤ 0 passes", g(t.upper.bound)),
            (f"  lower {t.lower.confidence:.0%} bound: > 0 shows inferiority", g(t.lower.bound)),
        ]
    rows += [
        ("δ = max(margin × mean KL_P, 3 × floor), shown", g(ni.delta)),
        (f"margin {g(rho)} × mean KL_P ({g(kl_p)})", g(rho * kl_p)),
        ("floor = mean |KL(pinned‖pinned.2)|", g(floor) if floor is not None else "not measured"),
        ("3 × floor", g(FLOOR_FACTOR * floor) if floor is not None else ""),
        ("mean KL_C / mean KL_P", g(ratio)),
        ("verdict", ni.verdict),
    ]
    return Table(title="Non-inferiority against pinned", columns=("quantity", "value"), rows=tuple(rows))


def metric_table(
    stats: TokenStats,
    limits: Mapping[str, float],
    bounds: Mapping[str, Mapping[str, BootstrapBound]],
    summaries: Mapping[tuple[str, str], KldSummary],
    s: Settings,
) -> Table:
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
                verdict = limit_verdict(gate, b.estimate, b.bound, limits[gate.limit])
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
    return Table(title=title, columns=(*columns, "candidate verdict"), rows=tuple(rows))


def llama_table(summaries: Mapping[tuple[str, str], KldSummary]) -> Table:
    pairs = list(summaries)
    printed = {p: v.printed() for p, v in summaries.items()}
    lines = list(printed[pairs[0]]) if pairs else []

    def cell(value: tuple[float, float | None]) -> str:
        v, unc = value
        return f"{v:.6g} ± {unc:.3g}" if unc is not None else f"{v:.6g}"

    rows = tuple((line, *(cell(printed[p][line]) for p in pairs)) for line in lines)
    columns = ("llama-perplexity line", *(f"{a} → {b}" for a, b in pairs))
    return Table(
        title="llama-perplexity's --kl-divergence figures per pair (base → Q; ± assumes independent tokens)",
        columns=columns,
        rows=rows,
        collapsed=True,
    )


def distribution_table(stats: TokenStats, roles: list[str]) -> Table:
    edges = np.array(KLD_BINS)
    counts = {r: np.histogram(stats.kld(stats.reference, r), edges)[0] for r in roles}
    rows: list[tuple[Cell, ...]] = []
    for i in range(len(edges) - 1):
        lo, hi = edges[i], edges[i + 1]
        label = "< 0" if math.isinf(lo) else f"≥ {g(lo)}" if math.isinf(hi) else f"[{g(lo)}, {g(hi)})"
        rows.append((label, *(int(counts[r][i]) for r in roles)))
    return Table(
        title="KLD distribution against the reference (tokens per bin)",
        columns=("KLD", *roles),
        rows=tuple(rows),
        collapsed=True,
    )


def confidence_table(stats: TokenStats, roles: list[str]) -> Table:
    ref = stats.reference
    # The reference's top-1 probability: exp(-nll) of its own top token is not stored, but the
    # top-1/top-2 margin is; bucket by the reference's target probability instead.
    p_ref = np.exp(-stats.role[ref].nll)
    rows: list[tuple[Cell, ...]] = []
    for lo, hi in itertools.pairwise(CONFIDENCE_BUCKETS):
        mask = (p_ref >= lo) & (p_ref < hi)
        n = int(mask.sum())
        means = [g(float(stats.kld(ref, r)[mask].mean())) if n else "" for r in roles]
        rows.append((f"[{lo:g}, {min(hi, 1.0):g}{']' if hi > 1 else ')'}", n, *means))
    return Table(
        title="Mean KLD by the reference's probability of the target token",
        columns=("p(target) under the reference", "tokens", *(f"{r} mean KLD" for r in roles)),
        rows=tuple(rows),
        collapsed=True,
    )
