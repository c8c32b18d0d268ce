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

from qualify.bench.gputelemetry import SLOWDOWN
from qualify.checks.base import Finding
from qualify.checks.figures import Cell, Table
from qualify.core.verdicts import Verdict
from qualify.records.bench import BenchUnit, GpuSeen, Telemetry

#: Other processes' CPU, in cores on average over a unit, from which the unit is flagged.
FOREIGN_CORES = 0.5


#: What a unit's flag is about, as `flag_counts` counts them: the GPU slowed itself down, or
#: other processes took CPU while the unit ran.
THROTTLED = "throttled"
FOREIGN_CPU = "foreign CPU"
#: Flagged units named in the finding; the others are counted.
LISTED_UNITS = 3


def _flags_by_cause(unit: BenchUnit) -> dict[str, list[str]]:
    flags: dict[str, list[str]] = {}
    for gpu, record in sorted((unit.gpu.gpus if unit.gpu else {}).items()):
        slow = {r: n for r, n in record.reasons.items() if r in SLOWDOWN}
        if slow:
            seen = ", ".join(f"{reason} in {n} of {record.samples} samples" for reason, n in slow.items())
            flags.setdefault(THROTTLED, []).append(f"GPU {gpu} throttled ({seen})")
    foreign = unit.host.foreign_cores if unit.host else None
    if unit.host is not None and foreign is not None and foreign >= FOREIGN_CORES:
        who = f": {', '.join(unit.host.top)}" if unit.host.top else ""
        flags[FOREIGN_CPU] = [f"other processes took {foreign:.2f} CPU cores{who}"]
    return flags


def unit_flags(unit: BenchUnit) -> list[str]:
    """Why one unit was measured under conditions a reviewer should weigh (empty: none)."""
    return [flag for flags in _flags_by_cause(unit).values() for flag in flags]


def flag_counts(units: list[BenchUnit]) -> dict[str, int]:
    """How many pair units were flagged for each cause (`THROTTLED`, `FOREIGN_CPU`)."""
    counts: dict[str, int] = {}
    for unit in units:
        if unit.phase == "pair":
            for cause in _flags_by_cause(unit):
                counts[cause] = counts.get(cause, 0) + 1
    return counts


def _where(unit: BenchUnit) -> str:
    return f"unit {unit.index} (pair {unit.pair}, {unit.role})"


def flagged(units: list[BenchUnit]) -> dict[str, list[str]]:
    """The flagged pair units, by where they ran ("unit 7 (pair 3, candidate)")."""
    found = {}
    for unit in units:
        if unit.phase == "pair" and (flags := unit_flags(unit)):
            found[_where(unit)] = flags
    return found


def findings(units: list[BenchUnit]) -> list[Finding]:
    """One WARN finding naming every flagged unit, or none."""
    found = flagged(units)
    if not found:
        return []
    pairs = sum(1 for u in units if u.phase == "pair")
    # The first few units with what loaded them; the rest counted: every flagged unit is a row
    # of the machine-state table, so a long run under load does not make a screens-long finding.
    shown = [f"{where}: {' and '.join(flags)}" for where, flags in list(found.items())[:LISTED_UNITS]]
    more = len(found) - len(shown)
    listed = "; ".join(shown) + (f"; and {more} more (the machine-state table lists each)" if more else "")
    return [
        Finding(
            Verdict.WARN,
            f"{len(found)} of {pairs} units ran throttled or under other processes' load "
            f"(weigh their pairs): {listed}",
        )
    ]


def _span(record: GpuSeen | None, key: str, index: int | None = None) -> str:
    span: list[float] | None = getattr(record, key) if record is not None else None
    if not span:
        return "—"
    if index is not None:
        return f"{span[index]:g}"
    low, _, high = span
    return f"{low:g}" if low == high else f"{low:g}–{high:g}"


def state_table(units: list[BenchUnit], telemetry: Telemetry | None) -> Table:
    """Per unit, next to its pair: the GPU's clocks, power, temperature and throttle reasons
    during it (the first GPU the telemetry saw; all are in schedule.json), the host's load and
    other processes' CPU, and its flags."""
    rows: list[tuple[Cell, ...]] = []
    for unit in units:
        gpus = unit.gpu.gpus if unit.gpu else {}
        first = gpus[min(gpus)] if gpus else None
        reasons = first.reasons if first else {}
        samples = first.samples if first else "?"
        foreign = unit.host.foreign_cores if unit.host else None
        before = unit.env_before
        load: Cell = before.load if before is not None and "load" in before.model_fields_set else "—"
        if unit.host is not None and "load_1m" in unit.host.model_fields_set:
            load = unit.host.load_1m
        rows.append(
            (
                unit.index,
                unit.pair or unit.phase,
                unit.role,
                _span(first, "sm_mhz"),
                _span(first, "mem_mhz"),
                _span(first, "power_w", 2),
                _span(first, "temp_c", 2),
                ", ".join(f"{r} {n}/{samples}" for r, n in reasons.items()) or "—",
                load,
                f"{foreign:.2f}" if foreign is not None else "—",
                "; ".join(unit_flags(unit)) if unit.phase == "pair" else "",
            )
        )
    if telemetry is not None and telemetry.source:
        title = f"Machine state during each unit (GPU from {telemetry.described or telemetry.source})"
    else:
        reason = (telemetry.reason if telemetry else None) or "not recorded"
        title = f"Machine state during each unit (GPU telemetry {reason})"
    columns = (
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
    )
    # A column nothing was read for (the GPU's, for an engine on the CPU or a GPU without
    # telemetry; the flags, when no unit was flagged) is left out: the title says why.
    kept = [i for i in range(len(columns)) if i < 3 or any(row[i] not in ("—", "") for row in rows)]
    return Table(
        title=title,
        columns=tuple(columns[i] for i in kept),
        rows=tuple(tuple(row[i] for i in kept) for row in rows),
        collapsed=not flagged(units),
    )
