"""The `bench` kind's parameters as a typed value (`qualify.checks.kindparams`): the names,
types and defaults `qualify.bench.kind` declares, read by attribute."""

from __future__ import annotations

from dataclasses import dataclass

from qualify.checks.kindparams import KindParams

#: The question a bench check answers (its `gate` parameter). "not-slower", the default: is the
#: candidate no slower than pinned by more than the margin (non-inferiority), which is what a
#: toolchain move must show. "no-change": is it within the margin both ways (equivalence), for a
#: plan that gates on "nothing moved", faster included.
NOT_SLOWER = "not-slower"
NO_CHANGE_GATE = "no-change"
GATES = (NOT_SLOWER, NO_CHANGE_GATE)


@dataclass(frozen=True)
class BenchParams(KindParams):
    """A `bench` check's parameters, as `KIND.params` declares them."""

    run: str
    format: str = "llama-bench"
    alpha: float = 0.05
    gate: str = NOT_SLOWER
    looks: int = 2
    max_pairs: int = 16
    min_pairs: int | None = None
    budget_s: float | None = None
    warmup: bool = True
    discard_reps: int = 0
    allow_config_diff: tuple[str, ...] = ()
    prompt_tokens: int = 512
    gen_tokens: int = 128
    rounds: int = 10
    warmup_requests: int = 2
    ready_timeout: float = 300
    request_timeout: float = 300
