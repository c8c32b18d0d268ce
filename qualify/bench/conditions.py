"""What the machine was doing during each bench unit, in the judgement: flags and a table.

A unit is flagged when the GPU telemetry saw a slowdown reason active in any of its samples
(`gputelemetry.SLOWDOWN`: power cap, thermal or hardware slowdown, AMD's throttle status) or
when other processes took at least `FOREIGN_CORES` of CPU on average while it ran. A flag is a
WARN finding naming every flagged unit: the pairs stay in the test (the interleaving spreads a
slow period over both roles), and a reviewer decides whether the result still stands. Warm-up
units are thrown away and never flagged. Units saved before the telemetry existed have no
record and no flag.
"""

from __future__ import annotations

from typing import Any

from qualify.bench.gputelemetry import SLOWDOWN
from qualify.checks.base import Finding, TableData
from qualify.core.verdicts import Verdict

#: Other processes' CPU, in cores on average over a unit, from which the unit is flagged.
FOREIGN_CORES = 0.5


#: What a unit's flag is about, as `flag_counts` counts them: the GPU slowed itself down, or
#: other processes took CPU while the unit ran.
THROTTLED = "throttled"
FOREIGN_CPU = "foreign CPU"


def _flags_by_cause(unit: dict[str, Any]) -> dict[str, list[str]]:
    flags: dict[str, list[str]] = {}
    for gpu, record in sorted(((unit.get("gpu") or {}).get("gpus") or {}).items()):
        slow = {r: n for r, n in (record.get("reasons") or {}).items() if r in SLOWDOWN}
        if slow:
            seen = ", ".join(
                f"{reason} in {n} of {record.get('samples', '?')} samples" for reason, n in slow.items()
            )
            flags.setdefault(THROTTLED, []).append(f"GPU {gpu} throttled ({seen})")
    host = unit.get("host") or {}
    foreign = host.get("foreign_cores")
    if isinstance(foreign, (int, float)) and foreign >= FOREIGN_CORES:
        who = f": {', '.join(host['top'])}" if host.get("top") else ""
        flags[FOREIGN_CPU] = [f"other processes took {foreign:.2f} CPU cores{who}"]
    return flags


def unit_flags(unit: dict[str, Any]) -> list[str]:
    """Why one unit was measured under conditions a reviewer should weigh (empty: none)."""
    return [flag for flags in _flags_by_cause(unit).values() for flag in flags]


def flag_counts(units: list[dict[str, Any]]) -> dict[str, int]:
    """How many pair units were flagged for each cause (`THROTTLED`, `FOREIGN_CPU`)."""
    counts: dict[str, int] = {}
    for unit in units:
        if unit.get("phase") == "pair":
            for cause in _flags_by_cause(unit):
                counts[cause] = counts.get(cause, 0) + 1
    return counts


def _where(unit: dict[str, Any]) -> str:
    return f"unit {unit['index']} (pair {unit.get('pair')}, {unit['role']})"


def flagged(units: list[dict[str, Any]]) -> dict[str, list[str]]:
    """The flagged pair units, by where they ran ("unit 7 (pair 3, candidate)")."""
    found = {}
    for unit in units:
        if unit.get("phase") == "pair" and (flags := unit_flags(unit)):
            found[_where(unit)] = flags
    return found


def findings(units: list[dict[str, Any]]) -> list[Finding]:
    """One WARN finding naming every flagged unit, or none."""
    found = flagged(units)
    if not found:
        return []
    pairs = sum(1 for u in units if u.get("phase") == "pair")
    listed = "; ".join(f"{where}: {' and '.join(flags)}" for where, flags in found.items())
    return [
        Finding(
            Verdict.WARN,
            f"{len(found)} of {pairs} units ran throttled or under other processes' load "
            f"(weigh their pairs): {listed}",
        )
    ]


def _span(record: dict[str, Any], key: str, index: int | None = None) -> str:
    span = record.get(key)
    if not span:
        return "—"
    if index is not None:
        return f"{span[index]:g}"
    low, _, high = span
    return f"{low:g}" if low == high else f"{low:g}–{high:g}"


def state_table(units: list[dict[str, Any]], telemetry: dict[str, Any] | None) -> TableData:
    """Per unit, next to its pair: the GPU's clocks, power, temperature and throttle reasons
    during it (the first GPU the telemetry saw; all are in schedule.json), the host's load and
    other processes' CPU, and its flags."""
    info = telemetry or {}
    rows = []
    for unit in units:
        gpus = (unit.get("gpu") or {}).get("gpus") or {}
        first = gpus[min(gpus)] if gpus else {}
        host = unit.get("host") or {}
        reasons = first.get("reasons") or {}
        foreign = host.get("foreign_cores")
        rows.append(
            (
                unit["index"],
                unit.get("pair") or unit.get("phase", ""),
                unit["role"],
                _span(first, "sm_mhz"),
                _span(first, "mem_mhz"),
                _span(first, "power_w", 2),
                _span(first, "temp_c", 2),
                ", ".join(f"{r} {n}/{first.get('samples', '?')}" for r, n in reasons.items()) or "—",
                host.get("load_1m", (unit.get("env_before") or {}).get("load", "—")),
                f"{foreign:.2f}" if isinstance(foreign, (int, float)) else "—",
                "; ".join(unit_flags(unit)) if unit.get("phase") == "pair" else "",
            )
        )
    if info.get("source"):
        title = f"Machine state during each unit (GPU from {info.get('described') or info['source']})"
    else:
        reason = info.get("reason") or "not recorded"
        title = f"Machine state during each unit (GPU telemetry {reason})"
    return TableData(
        title,
        (
            "#",
            "pair",
            "role",
            "SM MHz",
            "memory MHz",
            "power W (max)",
            "°C (max)",
            "throttle reasons (samples)",
            "load 1 min",
            "other CPU, cores",
            "flag",
        ),
        tuple(rows),
        collapsed=not flagged(units),
    )
