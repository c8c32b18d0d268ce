"""`openai-suite`: functional suites over each role's OpenAI-compatible server, strict
correctness across roles, and a per-request timing gate.

Measures: per role, the plan's `server` template (`{bin}/llama-server -m {model} --host
127.0.0.1 --port {port} ...`) started on a free loopback port and waited on through `/health`
(503 while loading) for `ready_timeout` seconds; `/props` is recorded (build, slots, context).
The selected `suites` run in order (readiness, completion, streaming, chat, long-context,
prefix-cache, tools, structured-output, sampling, concurrency; see `qualify.serving.suites_*`),
greedy (temperature 0, top-k 1, seed 42, no prompt cache) with the top `n_probs` log-probs; the
cases are saved as the role's `cases.json`. With both servers up, `timing` request types are
sent in interleaved pairs (`qualify.serving.timing`), saved as `timing.json`. Every server is
stopped whatever happens (a failing suite, a timeout, Ctrl-C); its log is in `logs/`. In a run
set, pinned's server and suites run once beside every member's, and each timing round sends one
request to pinned and one to each member (`qualify.serving.memberview`): each member is judged
on pinned's requests of the same rounds.

Verdict:
- FAIL: the candidate's server never became ready or died mid-suite (with the log tail; the
  suites it did not reach are listed as not run); a case passing in pinned fails in the
  candidate; a strict value differs across roles (rendered template, prompt token counts,
  status codes, schema validity, counts); greedy tokens differ where the pinned role's top-2
  log-prob margin is at least `tie_margin` (no near-tie), or text-dependent values differ
  while the tokens agree; the timing gate fails (bound exceeded and significant); no case ran.
- ERROR: the pinned server could not start or died (no baseline), or the server binary is
  missing.
- INCONCLUSIVE: a timing bound exceeded without significance, or too few complete pairs.
- WARN: a case failing in both roles (or in pinned only); generated text that differs where
  no log-probs tell a near-tie.
- PASS otherwise. Divergences at near-ties are reported (position, margin), not judged.

What it cannot prove: greedy decoding on one model and a handful of prompts; after a near-tie
only structure is compared; timings are client-side on this machine's load, and a slowdown
inside the bound (or inside the noise) is not detected.
"""

from __future__ import annotations

from qualify.checks.base import CheckKind, Limit
from qualify.core.ranges import NON_NEGATIVE
from qualify.serving.params import ServingParams

LIMITS = (
    Limit(
        "tie_margin",
        NON_NEGATIVE,
        0.05,
        help="pinned's top-2 log-prob margin (nats) below which greedy tokens may differ",
    ),
    Limit("max_slowdown_pct", NON_NEGATIVE, 5.0, help="% of pinned's time a request may take longer"),
    Limit("max_slowdown_ms", NON_NEGATIVE, 3.0, help="ms a request may take longer, whatever pinned's time"),
)


KIND = CheckKind(
    name="openai-suite",
    summary="functional suites over each role's OpenAI-compatible server; strict across roles; timing gate",
    params=ServingParams.declared(),
    verdict_rules=(
        "FAIL if the candidate's server does not start or dies, a case passing in pinned fails in the "
        "candidate, a strict value differs across roles, greedy tokens differ away from a near-tie, or a "
        "timing bound is exceeded significantly; INCONCLUSIVE if a bound is exceeded without significance; "
        "WARN for cases failing in both roles; ERROR if the pinned server or the harness failed"
    ),
    limits=LIMITS,
)
