"""The gate's figure per step as a text chart: a bar per step in bisect.md's table, scaled
between the series' smallest and largest figure, so the flip shows in plain text too."""

from __future__ import annotations

import math
from collections.abc import Sequence

from qualify.records.bisect import Figure, MetricFigure

#: The widest bar, in characters; eighths of a character make the steps between.
WIDTH = 20
_EIGHTHS = " ▏▎▍▌▋▊▉"


def figure_values(figure: Figure | None) -> dict[str, float | None]:
    """A step's figure by name, in the order saved (a metric gate's `candidate` and `pinned`; a
    kernel gate's counts), None where one is missing or not finite; empty without a figure."""
    if figure is None:
        return {}
    return {name: v if v is not None and math.isfinite(v) else None for name, v in figure.values().items()}


def candidate_figure(figure: Figure | None) -> float | None:
    """The figure a step's bar shows: the first saved (the candidate's, for a metric gate)."""
    return next(iter(figure_values(figure).values()), None)


def figure_text(figure: Figure | None) -> str:
    """`101 (pinned 100)`, `kernels spilling 2, …`, or empty for a step without a figure."""
    values = figure_values(figure)
    if isinstance(figure, MetricFigure):
        cand, base = values["candidate"], values["pinned"]
        return ("—" if cand is None else f"{cand:.6g}") + ("" if base is None else f" (pinned {base:.6g})")
    return ", ".join(f"{name} {'—' if v is None else f'{v:.6g}'}" for name, v in values.items())


def bars(figures: Sequence[Figure | None]) -> list[str]:
    """A bar per step's figure, its length the candidate's figure between the smallest and the
    largest of the series (a bar of one eighth at the smallest, so it is never mistaken for
    none); empty for a step without a figure."""
    values = [candidate_figure(f) for f in figures]
    known = [v for v in values if v is not None]
    if not known:
        return ["" for _ in figures]
    low, high = min(known), max(known)
    out = []
    for value in values:
        if value is None:
            out.append("")
            continue
        share = (value - low) / (high - low) if high > low else 1.0
        eighths = max(1, round(share * WIDTH * 8))
        out.append("█" * (eighths // 8) + _EIGHTHS[eighths % 8].strip())
    return out
