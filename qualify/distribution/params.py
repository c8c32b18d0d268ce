"""The distribution stage's kinds' parameters as typed values (`qualify.checks.kindparams`): the
names, types and defaults `qualify.distribution.kind` declares, read by attribute."""

from __future__ import annotations

from dataclasses import dataclass

from qualify.checks.kindparams import KindParams


@dataclass(frozen=True)
class InputsParams(KindParams):
    """A `flake-inputs` check's parameters, as `INPUTS.params` declares them."""

    mirror: str | None = None


@dataclass(frozen=True)
class CacheParams(KindParams):
    """A `binary-cache` check's parameters, as `CACHE.params` declares them."""

    cache: str
    secret_key_file: str
    public_key: str | None = None
    closure: str = "runtime"
    compression: str = "zstd"


@dataclass(frozen=True)
class PinMoveParams(KindParams):
    """A `pin-move` check's parameters, as `PIN_MOVE.params` declares them."""

    run: str | None = None
    allow_unqualified: str | None = None
