"""`bench`: throughput of the candidate against pinned, interleaved, with paired statistics.

Measures: the check's command run as units, one per role at a time: one warm-up unit per role
(thrown away), then pairs in ABBA order (AB, BA, AB, ...). The output is llama-bench `-o jsonl`
on stdout (`format = "llama-bench"`: one test per line, e.g. `pp512`, `tg128`,
`pp2048 @ d4096`, throughput recomputed from `samples_ns`) or the metrics JSON schema written to
`{out_file}` (`format = "metrics"`). With `format = "llama-server"` the command starts a server
(`{port}`), and a block holds every role's server at once: after `warmup_requests`, `rounds`
rounds of one prompt request (`prompt_tokens`) and one generation request (`gen_tokens`) to each
server in turn, the order rotating every round, so that the roles' measurements lie a fraction
of a second apart rather than seconds (`qualify.bench.serverblocks`); a block is a pair for
every candidate, its rounds the repetitions. With `format = "metrics"` and `together = true`, a
block's units start at the same time, held to one CPU, which the kernel's scheduler shares
between them every few milliseconds (`qualify.bench.together`): their repetitions lie
milliseconds apart; only for an engine that times itself with its thread's CPU time, on one
thread. The number of pairs is computed, not guessed: enough for the
exact signed-rank test to reach the smallest level it is held to (α split evenly across the
planned `looks`, then Holm's first step across the tests). More pairs are added at the planned
looks, up to `max_pairs` or `budget_s`, while a test is INCONCLUSIVE; `schedule.json` records
every unit, the machine's state before and after it, and why the schedule stopped.

In a run set the bench measures every member at once: each block runs pinned and every
member's arm in a row of a Williams design (ABBA for one candidate), pinned's units serve every
member's pairs, and each member is judged on its own pairs at its share of `alpha`
(`qualify.core.designs`, `qualify.bench.sharedschedule`).

Per test, on R = candidate/pinned (throughput; inverted for lower-is-better metrics), from the
log of each unit's median (of a block of servers or of units together: the mean of its
repetitions' logs, which follows the share of each speed of a host that runs at two): an exact
Wilcoxon signed-rank test and Hodges–Lehmann interval over the pairs (Mann–Whitney U when a
pair is incomplete), at the test's Holm- and look-adjusted level; each end of the interval is a
one-sided bound at half that level. The question is the one a toolchain move asks, "not
slower by more than δ" (δ = `speed_margin`), unless the plan asks `gate = "no-change"`.
Findings:
- SLOWER and a regression: the interval lies wholly below 1 − δ (a slowdown shown beyond it).
- INCONCLUSIVE: the interval holds 1 − δ (the data cannot tell a slowdown within the margin from
  one beyond), and always when the pairs cannot reach the level at all.
- Every interval whose lower end is at least 1 − δ answers the question, and says which way it
  moved: FASTER (above 1), SLOWER within the margin (below 1), NO CHANGE (inside [1 − δ, 1 + δ]),
  NOT SLOWER (it holds 1 and reaches past 1 + δ). With `gate = "no-change"` that last one is
  INCONCLUSIVE instead: the plan asked to see the candidate within δ both ways.
- INVALID: a unit crashed, the test's configuration differs between roles (llama-bench fields
  other than build and device descriptions; `allow_config_diff` names exceptions), more than a
  quarter of its units vary more than `max_unit_cv` across repetitions, or the environment
  changed during a unit (a GPU co-tenant came or went, the CPU governor switched).
Build and device facts that differ between roles (llama-bench's build_commit, backends,
gpu_info) and GPU processes present from the start are WARN: a reviewer should read them.
So are pair units measured while the GPU throttled (a power cap, thermal or hardware slowdown)
or while other processes took half a CPU core or more: one WARN names each such unit
(`qualify.bench.conditions`); the GPU's clocks, power, temperature and throttle reasons during
every unit and the host's load are recorded with the unit and shown next to the pairs.

Verdict: a regression is FAIL; a candidate unit that crashed is FAIL; no pair completed is FAIL
(nothing was measured) unless a pinned or harness failure explains it; other INVALID is ERROR;
any INCONCLUSIVE is INCONCLUSIVE; a SLOWER that is not a regression is WARN; else PASS. A
candidate truly slower by exactly δ passes in at most α/2 of runs (each look's lower bound is
one-sided at half its level, and the looks split α): `benchmarks/calibration.py` measures it. The
geometric mean of R across tests is context, never gated.

What it cannot prove: a result holds for this machine, these commands and this model only;
load from other processes on the CPU is recorded but not controlled; a slowdown smaller than
the noise (see the pair noise column, the noise floor in an A/A run) is not detected, and a
finding made at an early look is not revisited with later pairs.
"""

from __future__ import annotations

from qualify.bench.params import BenchParams
from qualify.bench.repetitions import invalid_plan
from qualify.checks.base import CheckKind, Limit
from qualify.core.ranges import Range, above

KIND = CheckKind(
    name="bench",
    summary="interleaved A/B throughput with exact paired tests; FAIL on a significant regression beyond δ",
    params=BenchParams.declared(),
    needs_pinned=lambda _spec: "it compares the candidate's throughput with pinned's, pair by pair",
    invalid=lambda spec: invalid_plan(BenchParams.of(spec), spec),
    verdict_rules=(
        "per test FASTER / SLOWER / NO CHANGE / NOT SLOWER / INCONCLUSIVE / INVALID on the "
        'candidate/pinned ratio (NOT SLOWER is INCONCLUSIVE under gate = "no-change"); '
        "FAIL on a significant slowdown beyond speed_margin, a candidate crash, or no pairs; ERROR on "
        "other INVALID (config mismatch, units over max_unit_cv, environment change, baseline crash); "
        "INCONCLUSIVE if any test is; WARN on a slowdown within the margin or on units measured while "
        "the GPU throttled or other processes took CPU; PASS otherwise"
    ),
    limits=(
        Limit(
            "speed_margin",
            Range(0, 1, high_included=False),
            0.03,
            help="δ: the slowdown, a fraction of pinned's throughput, that makes a regression",
        ),
        Limit(
            "max_unit_cv",
            above(0),
            help="the most a unit's repetitions may vary (coefficient of variation); "
            "more than a quarter of a test's units past it is INVALID",
        ),
    ),
    judge_params=("discard_reps",),
)
