"""`kld`: matched-token KL, NLL and top-1 against a reference; non-inferiority against pinned.

Measures: the plan's `run` command per role — reference, pinned, pinned again (`pinned.2`, the
run-to-run noise floor; `floor_rerun = false` leaves it out) and candidate — each leaving an
artifact at `artifact` (default `{out_file}`): a llama.cpp `--kl-divergence-base` file, a
`qualify.logprobs/v1` directory or a `qualify.topk/v1` file. Before each run the free disk space
is checked against one artifact's size (the plan's `artifact_bytes`, else the size of the first
artifact written): not enough is ERROR with both figures. The reference's artifact is cached under
`cache` keyed by the reference arm's out path and the settings (command, environment, the files
it names), so a second run reuses it. The roles' settings (context, scored window, vocabulary,
chunks, llama-perplexity's batch size and sequences per batch, `-ub`) are recorded and must
match. Then the artifacts are read chunk by chunk into per-token vectors in float64 (KL of every
pair, NLL, top-1, top-1/top-2 margin, Δp, NaN/Inf counts; `qualify.numerics.tokenstats`), saved as
`pertoken.npz` in each role's folder, and every artifact but the reference's is deleted unless
`keep`. pinned.2 is reduced (and deleted) before the candidate runs, so at most three artifacts
exist at once. The KL is llama-perplexity's (truncated at -16 nats, not renormalised) when any
input is a llama.cpp file, the exact KL otherwise.

Judgement (a pure function of the saved vectors and the plan's limits; `qualify.numerics.judge`):
each of `max_mean_kld`, `max_p99_kld`, `min_top1_agreement` (a fraction), `max_abs_dppl_pct`
and `max_confident_flips` (per 100 000 scored tokens; a flip is a top-1 change where the
reference's top-1/top-2 gap exceeds `flip_margin` nats) is judged on a one-sided bound at
`confidence` (95 %) from a seeded BCa bootstrap over chunks (`resamples`, 10 000; chunks are the
units: tokens within a chunk are correlated). Non-inferiority against pinned: is θ = mean
KL(ref‖candidate) − KL(ref‖pinned) per token at most δ = max(`noninferiority_margin` ρ (default
0.10) × mean KL(ref‖pinned), 3 × floor), floor = mean |KL(pinned‖pinned.2)|? δ is estimated from
the same chunks, so the margin goes inside the test (`qualify.numerics.noninferiority`): the
mean of D = KL_C − (1 + ρ)·KL_P per token, and with a floor the mean of KL_C − KL_P −
3·|KL(P‖P2)|, each bounded on both sides (ratio of chunk sums, BCa at least as wide as
Cantelli's). Non-inferiority is shown when some upper bound is at most 0 (each at 1 − α/k for k
statements of the margin); inferiority when every lower bound is above 0.

Looks (`qualify.numerics.looks`): the chunks are judged at `min_chunks`, twice that, … and the
corpus' end (at most `looks` looks), and the judgement is the first look's at which nothing is
INCONCLUSIVE; with `stream = true` the scoring stops there too and the rest of the corpus is
never scored. α is split evenly over the planned looks: every bound at a look is at
1 − α/looks, so stopping early never raises the rate of a wrong PASS or FAIL above α.

`max_abs_dppl_pct` and llama.cpp files: a target more than 16 nats below its row's maximum is
stored at the row's floor, so its NLL (and any PPL) is only a lower bound. |ΔPPL %| is therefore
judged over the tokens whose target is above the floor in both the reference and the judged role
(all tokens for qualify's formats); the table shows how many were left out and llama-perplexity's
own all-token ΔPPL next to it.

Verdict:
- ERROR: a role could not run, the reference or pinned run failed or left an unreadable
  artifact, not enough disk, settings differ between roles, NaN/Inf in the reference or pinned.
- FAIL: the candidate's run failed or left an unreadable artifact; the roles scored different
  tokens (the first mismatch is named); no token compared; NaN/Inf in the candidate; a limit's
  estimate beyond it; inferiority to pinned shown (every lower bound above 0).
- INCONCLUSIVE: fewer than `min_chunks` chunks (48); an estimate within its limit whose bound is
  not; neither non-inferiority nor inferiority shown, at the last look.
- WARN: the pinned build itself beyond a limit (the limit is tighter than the baseline); KL from
  top-K rows (a lower bound); no floor measured.
- PASS otherwise.

What it cannot prove: one text, one model and one context size were scored; the bounds treat
chunks as independent draws from the text (they are consecutive windows of one corpus); a
llama.cpp file's uint16 encoding adds about ±3e-5 nats per token, so tail percentiles below
about 1e-4 are encoding noise; a top-K KL is a lower bound; greedy generation, batch sizes other
than the recorded one and long contexts are not exercised; a candidate that is less
deterministic than pinned from run to run is not detected (only pinned is rerun).
"""

from __future__ import annotations

from dataclasses import dataclass

from qualify.checks.base import CheckKind, Limit
from qualify.core.checkspec import CheckSpec
from qualify.core.ranges import NON_NEGATIVE, UNIT, Range
from qualify.numerics.params import NumericsParams


@dataclass(frozen=True)
class Gate:
    """A model limit: the plan's name, the bound it is judged on, and how it is shown."""

    limit: str
    bound: str
    label: str
    scale: float = 1.0  # shown value = scale × statistic (fractions as %)
    allowed: Range = NON_NEGATIVE

    @property
    def upper(self) -> bool:
        return self.limit.startswith("max_")


GATES = (
    Gate("max_mean_kld", "mean_kld", "mean KLD (nats)"),
    Gate("max_p99_kld", "p99_kld", "p99 KLD (nats)"),
    Gate("min_top1_agreement", "top1_agreement", "top-1 agreement", allowed=UNIT),
    Gate("max_abs_dppl_pct", "abs_dppl_pct", "|ΔPPL| %"),
    Gate("max_confident_flips", "confident_flips", "confident flips per 100 000 tokens"),
)
LIMITS = (
    *(Limit(g.limit, g.allowed, help=f"{g.label}, judged on its one-sided bound") for g in GATES),
    Limit(
        "noninferiority_margin",
        NON_NEGATIVE,
        0.10,
        help="δ as a fraction of mean KL(ref‖pinned) (at least 3 × the noise floor)",
    ),
)


def _needs_pinned(spec: CheckSpec) -> str | None:
    if any(gate.limit in spec.limits for gate in GATES):
        return None
    return "without a limit of its own (max_mean_kld, …) its only judgement is non-inferiority to pinned"


KIND = CheckKind(
    name="kld",
    summary="matched-token KL, NLL and top-1 against a reference within limits; non-inferior to pinned",
    params=NumericsParams.declared(),
    needs_pinned=_needs_pinned,
    verdict_rules=(
        "FAIL if a limit's estimate is beyond it, inferiority to pinned is shown (the margin "
        "inside the test), tokens differ, NaN/Inf appear or the candidate's run fails; "
        "INCONCLUSIVE if a one-sided 95 % bound crosses a limit while the estimate does not, if "
        "neither non-inferiority nor inferiority is shown, or fewer than min_chunks chunks; "
        "ERROR if settings differ, disk is short or the baseline fails; WARN if pinned itself is "
        "beyond a limit; PASS otherwise"
    ),
    default_roles=("pinned", "candidate", "reference"),
    limits=LIMITS,
)
