"""Where a stage the plan does not run goes among those it runs: after the stage that precedes
it in the default order (a matrix's rows, a report's stage chain)."""

from __future__ import annotations

from qualify.pipeline.plan import DEFAULT_ORDER


def with_default_order(stages: list[str]) -> list[str]:
    """`stages` (a plan's, in its order) with every stage of the default order it lacks, each
    after the stage that precedes it in the default order: the rows of a matrix, where a stage
    left out or declared not applicable is shown too."""
    out = list(stages)
    for name in DEFAULT_ORDER:
        if name in out:
            continue
        before = DEFAULT_ORDER[: DEFAULT_ORDER.index(name)]
        index = max((i + 1 for i, existing in enumerate(out) if existing in before), default=0)
        out.insert(index, name)
    return out
