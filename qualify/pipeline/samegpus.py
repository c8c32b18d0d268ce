"""A run's GPUs stay the GPUs it was made on: a resume or a stage rerun on another model is refused.

A run set compares its roles' measurements with one another (the bench's pairs, the soak's
slopes, the serving latencies), and a lease of a GPU host may be another model than the one the
run began on (an H100 where the run was made on an H200). Stages measured on two models would
be compared as one measurement and shown under the model the run recorded. So the GPUs this
host has now are compared, by vendor, model and target, with the ones the run recorded when it
was made, before anything runs; a host of other GPUs starts a run of its own.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from qualify.core.errors import UsageError
from qualify.core.provenance import RecordedGpu


def _model(gpu: Mapping[str, Any]) -> str:
    parts = [gpu.get("vendor"), gpu.get("name"), gpu.get("target")]
    return " ".join(str(p) for p in parts if p) or "a GPU of unknown model"


def models(gpus: Iterable[Mapping[str, Any]]) -> Counter[str]:
    """How many GPUs of each model."""
    return Counter(_model(g) for g in gpus)


def _said(found: Counter[str]) -> str:
    if not found:
        return "no GPU"
    return ", ".join(f"{n} × {model}" if n > 1 else model for model, n in sorted(found.items()))


def require_same_gpus(run: str, recorded: Iterable[RecordedGpu], now: Iterable[Mapping[str, Any]]) -> None:
    """Refuse (exit 4) to go on with `run` on a host whose GPU models differ from the ones it was
    made on. A run that recorded no GPU and a host that has none agree."""
    before = models(g.as_json() for g in recorded)
    after = models(now)
    if before == after:
        return
    raise UsageError(
        f"run {run} was made on {_said(before)}, and this host has {_said(after)}: a run never "
        "mixes GPU models, since its roles' measurements are compared with one another",
        "resume or rerun it on a host of the GPUs it was made on, or start a new run here",
    )
