"""The `soak` kind's parameters as a typed value (`qualify.checks.kindparams`): the names,
types and defaults `qualify.soak.kind` declares, read by attribute."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from qualify.checks.kindparams import KindParams


@dataclass(frozen=True)
class SoakParams(KindParams):
    """A `soak` check's parameters, as `KIND.params` declares them."""

    server: str
    duration_s: float = 28800
    warmup_s: float = 900
    sample_s: float = 5
    window_s: float = 60
    seed: int = 42
    rate: float = 0.5
    concurrency: int = 4
    turns: int = 4
    prefix_words: int = 120
    turn_words: int = 24
    reply_words: int = 16
    max_tokens: int = 64
    max_requests: int = 100000
    grace_s: float = 30
    stall_s: float = 60
    compact_every_s: float = 600
    compact_path: str = "/proc/sys/vm/compact_memory"
    block_s: float = 0
    concurrent: bool = False
    alpha: float = 0.01
    horizon_s: float | None = None
    bound_budgets: bool = False
    ready_timeout_s: float = 300
    endpoint: str = "/v1/chat/completions"
    health: str = "/health"
    body: dict[str, Any] = field(default_factory=dict)
