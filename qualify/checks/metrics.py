"""The metrics JSON a check command writes, shared by the `command` and `bench` kinds.

{"schema_version": 1,
 "metrics": [{"name": "tokens_per_s", "unit": "tok/s", "higher_is_better": true,
              "samples": [812.5, 809.1]}]}
"""

from __future__ import annotations

import json
import math
import re
import statistics
from dataclasses import dataclass
from pathlib import Path

METRICS_SCHEMA_VERSION = 1
_NAME = re.compile(r"^[a-z0-9_]+$")


class MetricsInvalid(ValueError):
    """The file is missing or does not follow the schema; the message says where."""


@dataclass(frozen=True)
class Metric:
    name: str
    unit: str
    higher_is_better: bool
    samples: tuple[float, ...]

    @property
    def median(self) -> float:
        return float(statistics.median(self.samples))


def read_metrics(path: Path) -> dict[str, Metric]:
    """Parse a metrics file; raise MetricsInvalid naming the file and the offending entry."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise MetricsInvalid(f"{path}: the command wrote no metrics file") from None
    except (OSError, ValueError) as exc:
        raise MetricsInvalid(f"{path}: not JSON: {exc}") from None
    if not isinstance(document, dict):
        raise MetricsInvalid(f"{path}: expected a JSON object")
    if document.get("schema_version") != METRICS_SCHEMA_VERSION:
        raise MetricsInvalid(
            f"{path}: schema_version must be {METRICS_SCHEMA_VERSION}, got {document.get('schema_version')!r}"
        )
    entries = document.get("metrics")
    if not isinstance(entries, list):
        raise MetricsInvalid(f"{path}: 'metrics' must be a list")
    metrics: dict[str, Metric] = {}
    for index, entry in enumerate(entries):
        where = f"{path}: metrics[{index}]"
        if not isinstance(entry, dict):
            raise MetricsInvalid(f"{where}: expected an object")
        name = entry.get("name")
        if not isinstance(name, str) or not _NAME.match(name):
            raise MetricsInvalid(f"{where}: 'name' must match [a-z0-9_]+, got {name!r}")
        if name in metrics:
            raise MetricsInvalid(f"{where}: metric {name!r} appears twice")
        unit = entry.get("unit", "")
        higher = entry.get("higher_is_better")
        samples = entry.get("samples")
        if not isinstance(unit, str):
            raise MetricsInvalid(f"{where} ({name}): 'unit' must be a string")
        if not isinstance(higher, bool):
            raise MetricsInvalid(f"{where} ({name}): 'higher_is_better' must be true or false")
        if not isinstance(samples, list) or not samples:
            raise MetricsInvalid(f"{where} ({name}): 'samples' must be a non-empty list")
        values: list[float] = []
        for sample in samples:
            if isinstance(sample, bool) or not isinstance(sample, (int, float)):
                raise MetricsInvalid(f"{where} ({name}): sample {sample!r} is not a number")
            if not math.isfinite(sample):
                raise MetricsInvalid(f"{where} ({name}): sample {sample!r} is not finite")
            values.append(float(sample))
        metrics[name] = Metric(name, unit, higher, tuple(values))
    return metrics
