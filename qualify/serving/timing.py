"""The serving timing gate: per request type, candidate − pinned ≤ max(5 % × pinned, 3 ms) on
TTFT, TPOT and end-to-end time.

Measuring: both roles' servers run at once; after `warmup` requests per role and type (thrown
away), `repeats` pairs are sent in ABBA order (which role goes first alternates), streamed, with
a fixed number of generated tokens (`ignore_eos`) so TPOT compares like with like. TTFT is the
arrival of the first event carrying text, TPOT = (E2E − TTFT) / (tokens − 1), E2E the whole
stream, all measured by the client.

Judging, per request type and metric: the bound is `max(max_slowdown_pct % × median(pinned),
max_slowdown_ms)`. It is exceeded when median(candidate) − median(pinned) passes it. The test
is the exact Wilcoxon signed-rank test (`qualify.stats.abtests`) on the paired excess
dᵢ = cᵢ − pᵢ − max(pct × pᵢ, ms), one-sided (H1: the candidate is slower than the bound
allows), held to Holm's level across all request types and metrics at family-wise `alpha`.
FAIL = exceeded and significant; INCONCLUSIVE = exceeded but not significant, or too few
complete pairs to reach the level; PASS otherwise.

The number of pairs is computed: the one-sided exact test on n pairs can give at best
p = 1/2ⁿ, so n is the smallest with 1/2ⁿ ≤ alpha / tests (the first Holm step); 5 pairs never
reach 0.01.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from qualify.core.context import rounds_order
from qualify.core.progress import Progress
from qualify.records.serving import GateRow, Metric, TimingRecord
from qualify.serving.cases import GREEDY, repeated_tokens
from qualify.serving.client import Client
from qualify.stats import abtests

METRICS: tuple[Metric, ...] = ("ttft_ms", "tpot_ms", "e2e_ms")
REQUEST_TYPES = ("completion", "long-prompt", "chat")


def pairs_needed(alpha: float, tests: int) -> int:
    """The fewest pairs with which a one-sided exact signed-rank test can reach alpha/tests."""
    level = alpha / max(tests, 1)
    n = 1
    while 0.5**n > level:
        n += 1
    return n


@dataclass(frozen=True)
class TimingDesign:
    """How the timing gate is measured: the request types, the tokens generated per request, the
    long prompt's length, the warm-up requests per role and type, and the ABBA pairs per type
    (computed from `alpha` so the one-sided test can reach its first Holm level)."""

    types: tuple[str, ...]
    tokens: int
    prompt_tokens: int
    warmup: int
    pairs: int
    alpha: float


def design_timing(
    types: list[str], tokens: int, prompt_tokens: int, warmup: int, repeats: int | None, alpha: float
) -> TimingDesign:
    needed = pairs_needed(alpha, len(types) * len(METRICS))
    return TimingDesign(tuple(types), tokens, prompt_tokens, warmup, max(needed, repeats or 0), alpha)


def _request(
    client: Client, kind: str, design: TimingDesign, long_prompt: list[int] | None
) -> dict[str, Any]:
    common = {**GREEDY, "ignore_eos": True}
    if kind == "chat":
        body = {
            **common,
            "messages": [{"role": "user", "content": "Count from one to twenty."}],
            "max_tokens": design.tokens,
        }
        streamed = client.stream("/v1/chat/completions", body)
    else:
        prompt: Any = long_prompt if kind == "long-prompt" else "Once upon a time, in a small village,"
        streamed = client.stream("/completion", {**common, "prompt": prompt, "n_predict": design.tokens})
    ttft = streamed.first_content_s()
    tokens = sum(1 for e in streamed.events if e.get("content") or e.get("choices"))
    ok = streamed.status == 200 and not streamed.error and ttft is not None and not streamed.unparsable
    record: dict[str, Any] = {"ok": ok, "status": streamed.status, "events": len(streamed.events)}
    if not ok:
        record["error"] = streamed.error or f"HTTP {streamed.status}: {str(streamed.body)[:160]}"
        return record
    assert ttft is not None
    e2e = streamed.times_s[-1] if streamed.times_s else streamed.seconds
    generated = max(design.tokens, 2)
    record.update(
        ttft_ms=ttft * 1000, e2e_ms=e2e * 1000, tpot_ms=(e2e - ttft) * 1000 / (generated - 1), tokens=tokens
    )
    return record


def run_timing(
    clients: Mapping[str, Client],
    design: TimingDesign,
    progress: Callable[[str | None], None],
    advance: Callable[[Progress], None] = lambda _progress: None,
) -> list[TimingRecord]:
    """Warm-up then rounds for every request type, one request per role each, in ABBA order for
    two roles (`rounds_order` for more: a run set's pinned once beside every member); one record
    per request, its `pair` the round. Pinned's requests, when it is one of the roles, are what
    each other role is paired with."""
    roles = tuple(sorted(clients, key=lambda r: r != "pinned"))
    long_prompt = (
        repeated_tokens(clients[roles[0]], design.prompt_tokens) if "long-prompt" in design.types else None
    )
    records: list[TimingRecord] = []
    for kind in design.types:
        for role in roles:
            for i in range(design.warmup):
                progress(f"timing {kind}: warm-up {role} {i + 1}/{design.warmup}")
                _request(clients[role], kind, design, long_prompt)
        for pair, order in enumerate(rounds_order(roles, design.pairs)):
            progress(f"timing {kind}: pair {pair + 1}/{design.pairs}")
            advance(Progress(done=pair, total=design.pairs, unit=f"{kind} pairs"))
            for position, role in enumerate(order):
                record = _request(clients[role], kind, design, long_prompt)
                records.append(
                    TimingRecord.model_validate(
                        {"type": kind, "pair": pair, "role": role, "position": position, **record}
                    )
                )
    progress(None)
    return records


def judge_timing(
    records: list[TimingRecord], types: list[str], alpha: float, pct: float, floor_ms: float
) -> list[GateRow]:
    """The gate's rows; each a pure function of the saved records and the limits."""
    cells: list[tuple[str, Metric, list[float], list[float]]] = []
    for kind in types:
        by_pair: dict[int, dict[str, TimingRecord]] = {}
        for record in records:
            if record.type == kind and record.ok:
                by_pair.setdefault(record.pair, {})[record.role] = record
        complete = [p for p in by_pair.values() if "pinned" in p and "candidate" in p]
        for metric in METRICS:
            cells.append(
                (
                    kind,
                    metric,
                    [p["pinned"].ms(metric) for p in complete],
                    [p["candidate"].ms(metric) for p in complete],
                )
            )
    tests: list[abtests.ShiftTest | None] = []
    one_sided: list[float] = []
    for _kind, _metric, pinned, candidate in cells:
        if not pinned:
            tests.append(None)
            one_sided.append(1.0)
            continue
        excess = [c - p - max(pct / 100 * p, floor_ms) for p, c in zip(pinned, candidate, strict=True)]
        test = abtests.wilcoxon_signed_rank(excess, level=alpha)
        tests.append(test)
        # The null distribution is symmetric: the upper tail is half the two-sided p-value.
        one_sided.append(test.p_value / 2 if test.estimate > 0 else 1.0 - test.p_value / 2)
    steps = abtests.holm(one_sided, alpha)
    rows: list[GateRow] = []
    for (kind, metric, pinned, candidate), maybe, step in zip(cells, tests, steps, strict=True):
        if not pinned or maybe is None:
            rows.append(
                GateRow(
                    type=kind,
                    metric=metric,
                    pairs=0,
                    pinned_median=None,
                    candidate_median=None,
                    bound=None,
                    exceeded=False,
                    p_value=None,
                    level=step.level,
                    reachable=False,
                    result="INCONCLUSIVE",
                )
            )
            continue
        test = maybe
        p_med, c_med = statistics.median(pinned), statistics.median(candidate)
        bound = max(pct / 100 * p_med, floor_ms)
        exceeded = c_med - p_med > bound
        nonzero = sum(
            1 for p, c in zip(pinned, candidate, strict=True) if c - p - max(pct / 100 * p, floor_ms) != 0
        )
        reachable = 0.5**nonzero <= step.level
        significant = step.p_value <= step.level and test.estimate > 0
        result: Literal["PASS", "FAIL", "INCONCLUSIVE"] = (
            "FAIL" if exceeded and significant else "INCONCLUSIVE" if exceeded else "PASS"
        )
        rows.append(
            GateRow(
                type=kind,
                metric=metric,
                pairs=len(pinned),
                pinned_median=p_med,
                candidate_median=c_med,
                bound=bound,
                exceeded=exceeded,
                p_value=step.p_value,
                level=step.level,
                reachable=reachable,
                result=result,
            )
        )
    return rows
