"""The `command` kind's parameters as a typed value (`qualify.checks.kindparams`): the names,
types and defaults `qualify.checks.command` declares, read by attribute."""

from __future__ import annotations

from dataclasses import dataclass

from qualify.checks.kindparams import KindParams


@dataclass(frozen=True)
class CommandParams(KindParams):
    """A `command` check's parameters, as `KIND.params` declares them."""

    run: str
    metrics: bool = False
