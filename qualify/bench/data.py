"""Reading one bench unit's output into tests: llama-bench JSONL, or the metrics JSON schema.

A unit is one run of the check's command for one role. Each test it reports becomes a
`UnitTest`: a label (`pp512`, `tg128`, `pp2048 @ d4096`, or a metric's name), per-repetition
values in the test's unit (higher is better for throughput), and the configuration that must be
equal between roles for the comparison to mean anything.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from qualify.checks.metrics import MetricsInvalid, read_metrics

#: The bench measured through resident servers, interleaved (`qualify.bench.serverblocks`).
SERVERS = "llama-server"
FORMATS = ("llama-bench", "metrics", SERVERS)

#: llama-bench fields that are results or build facts, never configuration.
_RESULT_FIELDS = frozenset(
    {"samples_ns", "samples_ts", "avg_ns", "stddev_ns", "avg_ts", "stddev_ts", "test_time"}
)
#: Facts that may legitimately differ between toolchains: compared separately, not as config.
ENGINE_FIELDS = ("build_commit", "build_number", "cpu_info", "gpu_info", "backends")


class UnitOutputInvalid(ValueError):
    """The unit's output cannot be read; the message names the file and the line."""


@dataclass(frozen=True)
class UnitTest:
    label: str
    unit: str
    higher_is_better: bool
    values: tuple[float, ...]
    config: dict[str, Any] = field(default_factory=dict)
    engine: dict[str, Any] = field(default_factory=dict)
    ns: tuple[int, ...] = ()  # llama-bench's raw sample durations


def llama_label(n_prompt: int, n_gen: int, n_depth: int) -> str:
    """llama-bench's test name: `pp512`, `tg128`, `pp512+tg128`, with ` @ d4096` for depth."""
    parts = []
    if n_prompt:
        parts.append(f"pp{n_prompt}")
    if n_gen:
        parts.append(f"tg{n_gen}")
    label = "+".join(parts) or "empty"
    return f"{label} @ d{n_depth}" if n_depth else label


def _number(value: Any) -> float:
    """A JSON number, or llama-bench's `nan`/`inf` spelled as strings; NaN when unreadable."""
    if isinstance(value, bool):
        return math.nan
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return float(str(value))
    except ValueError:
        return math.nan


def read_llama_bench(text: str, where: str) -> list[UnitTest]:
    """Tests from llama-bench `-o jsonl` output.

    Fields are looked up by name and unknown ones kept as configuration; throughput is
    recomputed from `samples_ns` (t/s = 1e9 · (n_prompt + n_gen) / ns), never taken from
    `avg_ts`/`stddev_ts`. Lines that are not JSON objects (a banner) are skipped; a JSON line
    without `samples_ns` is an error, because the output is then not what the kind reads.
    """
    rows: list[dict[str, Any]] = []
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped.startswith("{"):
            continue
        try:
            row = json.loads(stripped.replace(": nan", ": NaN").replace(": inf", ": Infinity"))
        except ValueError as exc:
            raise UnitOutputInvalid(
                f"{where}:{number}: not JSON ({exc}); run llama-bench with -o jsonl"
            ) from None
        if not isinstance(row, dict) or not isinstance(row.get("samples_ns"), list):
            raise UnitOutputInvalid(f"{where}:{number}: no samples_ns; run llama-bench with -o jsonl")
        rows.append(row)
    tests: list[UnitTest] = []
    for row in rows:
        n_prompt, n_gen = int(row.get("n_prompt", 0) or 0), int(row.get("n_gen", 0) or 0)
        tokens = n_prompt + n_gen
        ns = tuple(int(v) for v in row["samples_ns"] if math.isfinite(_number(v)) and _number(v) > 0)
        config = {k: v for k, v in row.items() if k not in _RESULT_FIELDS and k not in ENGINE_FIELDS}
        tests.append(
            UnitTest(
                label=llama_label(n_prompt, n_gen, int(row.get("n_depth", 0) or 0)),
                unit="t/s",
                higher_is_better=True,
                values=tuple(1e9 * tokens / v for v in ns) if tokens else (),
                config=config,
                engine={k: row[k] for k in ENGINE_FIELDS if k in row},
                ns=ns,
            )
        )
    return _disambiguate(tests)


def _disambiguate(tests: list[UnitTest]) -> list[UnitTest]:
    """Tests sharing a label (a sweep over -t 1,2) get the configuration that tells them apart."""
    out: list[UnitTest] = []
    for test in tests:
        same = [t for t in tests if t.label == test.label]
        if len(same) == 1:
            out.append(test)
            continue
        keys = sorted(k for k in test.config if len({json.dumps(t.config.get(k)) for t in same}) > 1)
        suffix = ", ".join(f"{k}={test.config[k]}" for k in keys) or f"#{same.index(test) + 1}"
        out.append(replace(test, label=f"{test.label} ({suffix})"))
    return out


def read_metrics_unit(path: Path) -> list[UnitTest]:
    """Tests from the metrics JSON schema (docs/design.md): each metric is a test, its samples the
    unit's repetitions."""
    try:
        metrics = read_metrics(path)
    except MetricsInvalid as exc:
        raise UnitOutputInvalid(str(exc)) from None
    return [
        UnitTest(
            m.name,
            m.unit,
            m.higher_is_better,
            m.samples,
            {"unit": m.unit, "higher_is_better": m.higher_is_better},
        )
        for m in metrics.values()
    ]


def config_differences(pinned: dict[str, Any], candidate: dict[str, Any], allowed: set[str]) -> list[str]:
    """`field: pinned → candidate` for configuration that differs and is not allowed to."""
    keys = sorted((set(pinned) | set(candidate)) - allowed)
    return [
        f"{k}: {pinned.get(k, '—')} → {candidate.get(k, '—')}"
        for k in keys
        if json.dumps(pinned.get(k), sort_keys=True) != json.dumps(candidate.get(k), sort_keys=True)
    ]


def tests_differ(tests: list[UnitTest], first: set[str]) -> str | None:
    """How a unit's `tests` differ from the labels of the first unit that measured any
    (`first`), as "new: …; missing: …"; None when they are the same."""
    labels = {t.label for t in tests}
    if labels == first:
        return None
    parts = []
    if labels - first:
        parts.append("new: " + ", ".join(sorted(labels - first)))
    if first - labels:
        parts.append("missing: " + ", ".join(sorted(first - labels)))
    return "; ".join(parts)
