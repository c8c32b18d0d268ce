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

from qualify.checks.base import CheckKind, Limit, Param
from qualify.core.ranges import NON_NEGATIVE, OPEN_UNIT, POSITIVE, SECONDS

#: The suites in the order they run (`qualify.serving.suites.SUITES` holds them by these names).
SUITE_NAMES = (
    "readiness",
    "completion",
    "streaming",
    "chat",
    "long-context",
    "prefix-cache",
    "tools",
    "structured-output",
    "sampling",
    "concurrency",
)
DEFAULT_PROMPTS = [
    "The capital of France is",
    "Once upon a time, there was a little robot who",
    "def fibonacci(n):",
]
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
    params=(
        Param("server", "string", required=True, help="the server command template, with {port}"),
        Param("suites", "strings", list(SUITE_NAMES), help="suites to run, of: " + ", ".join(SUITE_NAMES)),
        Param("prompts", "strings", DEFAULT_PROMPTS, help="prompts of the greedy comparisons"),
        Param("n_predict", "integer", 16, help="tokens generated per greedy case", allowed=POSITIVE),
        Param(
            "n_probs",
            "integer",
            2,
            help="top log-probs per token (≥ 2 for the near-tie rule)",
            allowed=POSITIVE,
        ),
        Param(
            "concurrency", "integer", 4, help="parallel requests of the concurrency suite", allowed=POSITIVE
        ),
        Param("slot_save", "boolean", False, help="check slot save/restore (needs --slot-save-path)"),
        Param("ready_timeout", "number", 120, help="seconds to wait for /health", allowed=SECONDS),
        Param("request_timeout", "number", 300, help="seconds per HTTP request", allowed=SECONDS),
        Param("timing", "strings", ["completion", "long-prompt"], help="timing request types ([] for none)"),
        Param("timing_tokens", "integer", 16, help="tokens generated per timing request", allowed=POSITIVE),
        Param(
            "timing_prompt_tokens",
            "integer",
            256,
            help="prompt length of the long-prompt type",
            allowed=POSITIVE,
        ),
        Param(
            "warmup",
            "integer",
            2,
            help="warm-up requests per role and type, thrown away",
            allowed=NON_NEGATIVE,
        ),
        Param(
            "repeats", "integer", None, help="timing pairs (at least the computed minimum)", allowed=POSITIVE
        ),
        Param(
            "alpha", "number", 0.05, help="family-wise level of the timing tests (Holm)", allowed=OPEN_UNIT
        ),
    ),
    verdict_rules=(
        "FAIL if the candidate's server does not start or dies, a case passing in pinned fails in the "
        "candidate, a strict value differs across roles, greedy tokens differ away from a near-tie, or a "
        "timing bound is exceeded significantly; INCONCLUSIVE if a bound is exceeded without significance; "
        "WARN for cases failing in both roles; ERROR if the pinned server or the harness failed"
    ),
    limits=LIMITS,
)
