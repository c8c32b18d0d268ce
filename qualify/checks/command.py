"""`command`: run a command per role; optionally judge the metrics it reports.

Measures: the command's exit status for each role and, when `metrics = true` or limits are
set, the metrics JSON (docs/design.md) the command writes to `{out_file}`.

Verdict:
- ERROR: a role could not be run (missing tool, unknown placeholder), or the pinned or
  reference role failed (no baseline), or a metric named by a margin is missing in pinned.
- FAIL: the candidate exited non-zero, was killed or timed out; its metrics file is missing or
  invalid, holds no metrics, or lacks a metric a limit names; a `max_*`/`min_*` limit is crossed
  by the candidate's median; or a `<metric>_margin` non-inferiority test fails.
- INCONCLUSIVE: for a `<metric>_margin`, the candidate's samples straddle the boundary (pinned
  median worsened by the margin): the noise is larger than the margin.
- PASS otherwise.

What it cannot prove: it compares medians and sample ranges, no statistics; noisy timings
belong in a `bench` check, which interleaves repetitions and tests significance.
"""

from __future__ import annotations

from qualify.checks.base import CheckKind
from qualify.checks.commandparams import CommandParams
from qualify.core.checkspec import CheckSpec


def _needs_pinned(spec: CheckSpec) -> str | None:
    margins = sorted(k for k in spec.limits if k.endswith("_margin"))
    return f"its limits {', '.join(margins)} compare with pinned" if margins else None


KIND = CheckKind(
    name="command",
    summary="run a command per role; PASS on exit 0; optional metrics judged against limits",
    params=CommandParams.declared(),
    needs_pinned=_needs_pinned,
    verdict_rules=(
        "FAIL if the candidate fails, crosses a max_/min_ limit, or is worse than pinned beyond "
        "a *_margin; INCONCLUSIVE if its samples straddle a margin; ERROR if the baseline or "
        "the harness failed; PASS otherwise"
    ),
)
