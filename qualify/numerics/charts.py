"""The numerics stage's chart: per-token KLD against the reference, per role, on log bins."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from qualify.checks.figures import Histogram, HistogramChart, Mark
from qualify.numerics.tokenstats import TokenStats


def distribution_chart(stats: TokenStats, roles: list[str], limits: Mapping[str, float]) -> HistogramChart:
    """Per-token KLD against the reference on log-spaced bins, per role."""
    values = {r: stats.kld(stats.reference, r) for r in roles}
    top = max((float(np.max(v)) for v in values.values() if v.size), default=1.0)
    # Log-spaced bins from 1e-7; everything at or below it (exact zeros, the small negatives of
    # a truncated KL) is counted in the first bin, so no token drops out of the picture.
    edges = np.logspace(-7, math.log10(max(top, 1e-5)) + 1e-9, 36)
    data = {
        r: Histogram(
            edges=tuple(edges.tolist()),
            counts=tuple(np.histogram(np.clip(v, edges[0], None), edges)[0].tolist()),
        )
        for r, v in values.items()
    }
    medians = ", ".join(
        f"{r} median {float(np.median(v)):.4g}, max {float(np.max(v)):.4g}" for r, v in values.items()
    )
    marks = tuple(Mark(x=limits[k], label=k) for k in ("max_p99_kld",) if k in limits)
    return HistogramChart(
        title="Per-token KLD against the reference",
        alt=f"Per-token KL divergence from the reference over {stats.n_tokens} tokens: {medians}.",
        data=data,
        x_label="KLD (nats, log scale; values ≤ 1e-7 in the first bin)",
        y_label="tokens",
        log_x=True,
        marks=marks,
    )
