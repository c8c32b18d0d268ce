"""The metrics JSON a check command writes, shared by the `command` and `bench` kinds.

{"schema_version": 1,
 "metrics": [{"name": "tokens_per_s", "unit": "tok/s", "higher_is_better": true,
              "samples": [812.5, 809.1]}]}

The file is read up to `MAX_BYTES`; a sample is a finite number no larger in magnitude than
`MAX_MAGNITUDE`, so that a median, a ratio or a mean of samples is a finite number too (JSON
allows integers of any length and `1e400`, which Python reads as infinity).
"""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass
from pathlib import Path

from qualify.core import jsontext
from qualify.core.capped import FileTooLarge, read_capped

METRICS_SCHEMA_VERSION = 1
#: The largest metrics file read (a metrics file lists a few numbers: kilobytes).
MAX_BYTES = 16 << 20
#: The largest magnitude a sample may have: sums and ratios of such samples stay finite.
MAX_MAGNITUDE = 1e300
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
        data = read_capped(path, MAX_BYTES, "the metrics file")
    except FileNotFoundError:
        raise MetricsInvalid(f"{path}: the command wrote no metrics file") from None
    except FileTooLarge as exc:
        raise MetricsInvalid(str(exc)) from None
    except (OSError, ValueError) as exc:
        raise MetricsInvalid(f"{path}: cannot read: {exc}") from None
    try:
        document = jsontext.loads(data.decode("utf-8"))
    except jsontext.TooDeep as exc:
        raise MetricsInvalid(f"{path}: not JSON qualify reads: {exc}") from None
    except ValueError as exc:  # UnicodeDecodeError included
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
        values = [_sample(sample, f"{where} ({name})") for sample in samples]
        metrics[name] = Metric(name, unit, higher, tuple(values))
    return metrics


def _sample(sample: object, where: str) -> float:
    if isinstance(sample, bool) or not isinstance(sample, (int, float)):
        raise MetricsInvalid(f"{where}: sample {_shown(sample)} is not a number")
    try:
        value = float(sample)  # an integer of 309 digits or more has no float
    except OverflowError:
        value = math.inf
    if not math.isfinite(value):
        raise MetricsInvalid(f"{where}: sample {_shown(sample)} is not a finite number")
    if abs(value) > MAX_MAGNITUDE:
        raise MetricsInvalid(
            f"{where}: sample {_shown(sample)} is larger than {MAX_MAGNITUDE:g} in magnitude"
        )
    return value


def _shown(value: object) -> str:
    """A sample as a message can quote it: a number of hundreds of digits shortened."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:20]}…{text[-8:]} ({len(text)} characters)"
