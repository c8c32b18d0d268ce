"""The `openai-suite` kind's parameters as a typed value (`qualify.checks.kindparams`): the names,
types and defaults `qualify.serving.kind` declares, read by attribute."""

from __future__ import annotations

from dataclasses import dataclass

from qualify.checks.kindparams import KindParams
from qualify.serving.kind import DEFAULT_PROMPTS, SUITE_NAMES


@dataclass(frozen=True)
class ServingParams(KindParams):
    """An `openai-suite` check's parameters, as `KIND.params` declares them."""

    server: str
    suites: tuple[str, ...] = SUITE_NAMES
    prompts: tuple[str, ...] = tuple(DEFAULT_PROMPTS)
    n_predict: int = 16
    n_probs: int = 2
    concurrency: int = 4
    slot_save: bool = False
    ready_timeout: float = 120
    request_timeout: float = 300
    timing: tuple[str, ...] = ("completion", "long-prompt")
    timing_tokens: int = 16
    timing_prompt_tokens: int = 256
    warmup: int = 2
    repeats: int | None = None
    alpha: float = 0.05
