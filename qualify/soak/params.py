"""The `soak` kind's parameters, declared once (`qualify.checks.kindparams`): the plan's names,
types, defaults, ranges and help, and the typed value `measure` and `judge` read them through."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from qualify.checks.kindparams import KindParams, param
from qualify.core.ranges import NON_NEGATIVE, OPEN_UNIT, POSITIVE, SECONDS, above


@dataclass(frozen=True)
class SoakParams(KindParams):
    """A `soak` check's parameters."""

    server: str = param(help="the server template, with {port}")
    duration_s: float = param(28800, help="seconds of load per role", allowed=SECONDS)
    warmup_s: float = param(900, help="seconds left out of the trend tests", allowed=NON_NEGATIVE)
    sample_s: float = param(5, help="seconds between telemetry samples", allowed=SECONDS)
    window_s: float = param(
        60, help="seconds per window of the trend tests (medians, p50/p99)", allowed=SECONDS
    )
    seed: int = param(42, help="the workload's seed (the same requests on every role)", allowed=NON_NEGATIVE)
    rate: float = param(
        0.5, help="mean arrivals per second (Poisson): keep below saturation", allowed=above(0)
    )
    concurrency: int = param(
        4, help="most requests in flight (capped at the server's slots)", allowed=POSITIVE
    )
    turns: int = param(4, help="turns per conversation", allowed=POSITIVE)
    prefix_words: int = param(120, help="words of the shared system prompt", allowed=NON_NEGATIVE)
    turn_words: int = param(24, help="words per user message", allowed=POSITIVE)
    reply_words: int = param(
        16, help="words per generated assistant message in the history", allowed=NON_NEGATIVE
    )
    max_tokens: int = param(64, help="tokens generated per request", allowed=POSITIVE)
    max_requests: int = param(100000, help="the most requests per role", allowed=POSITIVE)
    grace_s: float = param(
        30, help="seconds after the soak for requests in flight to finish", allowed=NON_NEGATIVE
    )
    stall_s: float = param(60, help="seconds without stream progress that count as a stall", allowed=SECONDS)
    compact_every_s: float = param(
        600, help="seconds between compactions after the warm-up; 0: none", allowed=NON_NEGATIVE
    )
    compact_path: str = param("/proc/sys/vm/compact_memory", help="where compaction is asked for")
    block_s: float = param(
        0,
        help="interleave the roles in ABBA blocks of this many seconds of each role's soak "
        "(both servers stay up); 0: one role after the other",
        allowed=NON_NEGATIVE,
    )
    concurrent: bool = param(
        False,
        help="load every role at once for the whole duration (one duration instead of one per "
        "role); the roles then contend for the machine",
    )
    alpha: float = param(0.01, help="level of the Mann–Kendall tests", allowed=OPEN_UNIT)
    horizon_s: float | None = param(
        None, help="budgets apply over this many seconds (default: the soak)", allowed=SECONDS
    )
    bound_budgets: bool = param(
        False,
        help="INCONCLUSIVE unless the soak bounds each memory budget: the candidate's upper "
        "growth over the horizon at most the budget",
    )
    ready_timeout_s: float = param(
        300, help="seconds for the server to answer its health check", allowed=SECONDS
    )
    endpoint: str = param("/v1/chat/completions", help="the streaming chat endpoint")
    health: str = param("/health", help="the readiness endpoint (200 when ready)")
    body: dict[str, Any] = param(factory=dict, help="extra fields of every request body")
