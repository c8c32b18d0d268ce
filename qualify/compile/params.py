"""The `kernel-resources` kind's parameters as a typed value (`qualify.checks.kindparams`): the names,
types and defaults `qualify.compile.kind` declares, read by attribute."""

from __future__ import annotations

from dataclasses import dataclass

from qualify.checks.kindparams import KindParams
from qualify.compile.kind import DEFAULT_PATTERNS


@dataclass(frozen=True)
class CompileParams(KindParams):
    """A `kernel-resources` check's parameters, as `KIND.params` declares them."""

    root: str = "{out}"
    paths: tuple[str, ...] = ("*",)
    host_patterns: tuple[str, ...] = DEFAULT_PATTERNS
    stack_usage: str | None = None
    ptxas_logs: tuple[str, ...] = ()
    require: tuple[str, ...] = ()
    objdump: str = "auto"
    cuobjdump: str = "auto"
    cuda_block_size: int = 256
