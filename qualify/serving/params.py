"""The `openai-suite` kind's parameters, declared once (`qualify.checks.kindparams`): the plan's
names, types, defaults, ranges and help, and the typed value `measure` and `judge` read them
through."""

from __future__ import annotations

from dataclasses import dataclass

from qualify.checks.kindparams import KindParams, param
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
DEFAULT_PROMPTS = (
    "The capital of France is",
    "Once upon a time, there was a little robot who",
    "def fibonacci(n):",
)


@dataclass(frozen=True)
class ServingParams(KindParams):
    """An `openai-suite` check's parameters."""

    server: str = param(help="the server command template, with {port}")
    suites: tuple[str, ...] = param(SUITE_NAMES, help="suites to run, of: " + ", ".join(SUITE_NAMES))
    prompts: tuple[str, ...] = param(DEFAULT_PROMPTS, help="prompts of the greedy comparisons")
    n_predict: int = param(16, help="tokens generated per greedy case", allowed=POSITIVE)
    n_probs: int = param(2, help="top log-probs per token (≥ 2 for the near-tie rule)", allowed=POSITIVE)
    concurrency: int = param(4, help="parallel requests of the concurrency suite", allowed=POSITIVE)
    slot_save: bool = param(False, help="check slot save/restore (needs --slot-save-path)")
    ready_timeout: float = param(120, help="seconds to wait for /health", allowed=SECONDS)
    request_timeout: float = param(300, help="seconds per HTTP request", allowed=SECONDS)
    timing: tuple[str, ...] = param(("completion", "long-prompt"), help="timing request types ([] for none)")
    timing_tokens: int = param(16, help="tokens generated per timing request", allowed=POSITIVE)
    timing_prompt_tokens: int = param(256, help="prompt length of the long-prompt type", allowed=POSITIVE)
    warmup: int = param(2, help="warm-up requests per role and type, thrown away", allowed=NON_NEGATIVE)
    repeats: int | None = param(None, help="timing pairs (at least the computed minimum)", allowed=POSITIVE)
    alpha: float = param(0.05, help="family-wise level of the timing tests (Holm)", allowed=OPEN_UNIT)
