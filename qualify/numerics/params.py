"""The `kld` kind's parameters as a typed value (`qualify.checks.kindparams`): the names,
types and defaults `qualify.numerics.kind` declares, read by attribute."""

from __future__ import annotations

from dataclasses import dataclass

from qualify.checks.kindparams import KindParams
from qualify.numerics.kind import DEFAULT_CACHE


@dataclass(frozen=True)
class NumericsParams(KindParams):
    """A `kld` check's parameters, as `KIND.params` declares them."""

    run: str
    artifact: str = "{out_file}"
    keep: bool = False
    stream: bool = False
    floor_rerun: bool = True
    cache: str = DEFAULT_CACHE
    artifact_bytes: int | None = None
    min_chunks: int = 48
    looks: int = 4
    resamples: int = 10_000
    seed: int = 0
    confidence: float = 0.95
    flip_margin: float = 0.1
