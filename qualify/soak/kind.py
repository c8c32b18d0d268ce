"""`soak`: long concurrent load under memory pressure, with telemetry, the kernel log and drift.

Measures: per role, the plan's `server` template started on a free loopback port, then for
`duration_s` seconds of the role's clock an agent-like workload generated from `seed`
(shared-prefix multi-turn conversations, Poisson arrivals at `rate`, at most `concurrency` in
flight, capped at the server's slots) streamed through its OpenAI-compatible chat endpoint
(`qualify.soak.driver`). Meanwhile: telemetry every `sample_s` seconds (`qualify.soak.telemetry`:
RSS/PSS, GPU memory where present, memory PSI, compaction counters), `1` written to
`/proc/sys/vm/compact_memory` every `compact_every_s` seconds after the warm-up on the same
schedule for both roles (`qualify.soak.compaction`), the kernel log saved (`qualify.soak.kernellog`),
and an application watchdog on every in-flight stream (`stall_s`). The roles run one after
the other (pinned first), or, with `block_s`, interleaved in ABBA blocks with both servers up
(`qualify.soak.blocks`), or, with `concurrent`, all at once, each role loaded by its own copy of
the workload for the whole duration (one duration instead of one per role).

Verdict (`qualify.soak.trend` for the rule on series):
- FAIL: a candidate request failed or stalled; its server never became ready, or exited; no
  candidate request completed (nothing measured); a kernel-log line written during the
  candidate's soak (its blocks, when interleaved, unless the line names a process of pinned's
  server, which is up too; a line naming a candidate process during pinned's block counts for
  the candidate; run concurrently, a line counts for the role whose process it names, and for
  every role when it names none) or a line of the candidate server's log matched a GPU driver pattern; a
  candidate series leaks or drifts: Mann–Kendall (AR(1) corrected) significant at its Holm
  level among the budgeted series (family-wise `alpha`) AND the
  Theil–Sen lower bound × horizon over the plan's budget AND the candidate's slope above
  pinned's by more than the margin.
- ERROR: the same failures of the pinned role (no baseline), or the harness could not run the
  server (a missing binary or placeholder).
- INCONCLUSIVE: too few windows after the warm-up for Mann–Kendall to reach `alpha` in a role
  (a soak too short to decide drift); with `bound_budgets`, also a budgeted memory series whose
  growth over the horizon the soak cannot bound within its budget (the upper end of the
  candidate's slope interval × the horizon above the budget): a leak of the budget's size would
  have gone unseen, so "no leak" would say more than was measured.
- WARN: memory pressure could not be applied (compact_memory not writable) or the kernel log
  could not be read — the check then says so and cannot PASS; a series grew past its budget in
  the candidate but no faster than in pinned.
- PASS otherwise.

What it cannot prove: one soak per role of the planned length on this machine and this
workload; drift slower than the interval can see over that length, faults that need more
hours, other models or other traffic are not covered; run one after the other, the roles run at
different times, so a change in the machine between them shows as a difference between roles
(blocks spread such a change over both); run concurrently, the roles contend for the machine, so
each role's latencies include the others' load (alike for all, so drift is still compared), and
a driver fault that names no process cannot be told apart by role.
"""

from __future__ import annotations

from qualify.checks.base import CheckKind, Limit
from qualify.core.checkspec import CheckSpec
from qualify.core.ranges import NON_NEGATIVE
from qualify.soak.params import SoakParams

#: Each a series' most growth over the horizon (`qualify.soak.trend.RULES` names which series).
BUDGETS = ("max_rss_growth_mib", "max_gpu_growth_mib", "max_ttft_drift_ms", "max_tpot_drift_ms")
#: The most a candidate's slope may exceed pinned's, for memory and for latency series.
MARGINS = ("leak_margin", "drift_margin")
_BUDGET_HELP = {
    "max_rss_growth_mib": "MiB the server's memory may grow over the horizon",
    "max_gpu_growth_mib": "MiB the GPU memory may grow over the horizon",
    "max_ttft_drift_ms": "ms time to first token may drift over the horizon",
    "max_tpot_drift_ms": "ms time per output token may drift over the horizon",
}
_MARGIN_HELP = {
    "leak_margin": "how much faster (MiB per hour) the candidate's memory may grow than pinned's",
    "drift_margin": "how much faster (ms per hour) the candidate's latency may drift than pinned's",
}
LIMITS = (
    *(Limit(name, NON_NEGATIVE, help=_BUDGET_HELP[name]) for name in BUDGETS),
    *(Limit(name, NON_NEGATIVE, 0.0, help=_MARGIN_HELP[name]) for name in MARGINS),
)


def _invalid(spec: CheckSpec) -> str | None:
    params = SoakParams.of(spec)
    if params.concurrent and params.block_s > 0:
        return "it sets both concurrent and block_s: run the roles at once or in blocks, not both"
    if any(name in spec.limits for name in BUDGETS):
        return None
    return f"it has no budget ({', '.join(sorted(BUDGETS))}): a series is judged only against one"


KIND = CheckKind(
    name="soak",
    summary="long concurrent load under memory pressure; FAIL on failed or stalled requests, GPU driver "
    "errors in the kernel log, or a leak or drift beyond budget and beyond pinned's",
    params=SoakParams.declared(),
    invalid=_invalid,
    verdict_rules=(
        "FAIL on a failed or stalled candidate request, a candidate server that never started or exited, "
        "no completed request, a GPU driver line in the kernel or server log, or a leak/drift (Mann–Kendall "
        "AR(1)-corrected p ≤ its Holm level AND Theil–Sen lower bound × horizon > budget AND "
        "slope > pinned's + margin); "
        "ERROR on the same for pinned or a harness failure; INCONCLUSIVE when too few windows reach "
        "alpha, or (bound_budgets) when a memory series' upper growth over the horizon exceeds its budget; "
        "WARN when compaction or the kernel log was unavailable, a series grows past budget like pinned's, "
        "or an NVIDIA host's nvidia-smi never listed a server's processes (its own GPU memory unjudged)"
    ),
    limits=LIMITS,
)
