"""The `command` kind's parameters, declared once (`qualify.checks.kindparams`): the plan's
names, types, defaults and help, and the typed value `measure` and `judge` read them through."""

from __future__ import annotations

from dataclasses import dataclass

from qualify.checks.kindparams import KindParams, param


@dataclass(frozen=True)
class CommandParams(KindParams):
    """A `command` check's parameters."""

    run: str = param(help="the command template")
    metrics: bool = param(False, help="read the metrics JSON written to {out_file}")
