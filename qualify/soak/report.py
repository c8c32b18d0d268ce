"""The soak's report section: time-series charts per role with compaction events marked, the
trend table, the requests table and any kernel-log lines — all from saved data."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from qualify.checks.figures import Chart, Line, LinesChart, Mark, Table
from qualify.records.soak import CompactionEvent, KernelLogMatch, RequestSummary, SoakMeasurement
from qualify.soak.params import SoakParams
from qualify.soak.trend import HOUR, MIB, SeriesVerdict, Trend

#: Points per role kept in a saved chart; the renderer keeps peaks when it thins further.
CHART_POINTS = 600


def downsample(
    x: Sequence[float], y: Sequence[float], points: int = CHART_POINTS
) -> tuple[list[float], list[float]]:
    """At most `points` points: per bucket the largest value (memory peaks survive)."""
    if len(x) <= points:
        return [round(float(v), 3) for v in x], [round(float(v), 3) for v in y]
    size = math.ceil(len(x) / points)
    xs: list[float] = []
    ys: list[float] = []
    for start in range(0, len(x), size):
        bucket = list(y[start : start + size])
        best = max(range(len(bucket)), key=lambda i: bucket[i])
        xs.append(round(float(x[start + best]), 3))
        ys.append(round(float(bucket[best]), 3))
    return xs, ys


def _marks(compaction: Sequence[CompactionEvent]) -> tuple[Mark, ...]:
    return tuple(
        Mark(x=round(e.t_s / 60, 3), label="compact" if i == 0 else "") for i, e in enumerate(compaction)
    )


def charts(
    telemetry: Mapping[str, pd.DataFrame],
    windows: Mapping[str, pd.DataFrame],
    compaction: Sequence[CompactionEvent],
    warmup_s: float,
) -> tuple[Chart, ...]:
    """Memory (every sample), TTFT, TPOT and throughput (per window), both roles on each."""
    marks = (*_marks(compaction), Mark(x=round(warmup_s / 60, 3), label="warm-up ends"))
    out: list[Chart] = []
    memory: dict[str, Line] = {}
    for role, frame in telemetry.items():
        if not frame.empty and "rss_bytes" in frame:
            xs, ys = downsample(list(frame["t_s"] / 60), list(frame["rss_bytes"] / MIB))
            memory[role] = Line(x=tuple(xs), y=tuple(ys))
    if memory:
        peaks = ", ".join(f"{role} peak {max(line.y):.0f} MiB" for role, line in memory.items())
        out.append(
            LinesChart(
                title="Server RSS during the soak",
                alt=f"RSS over time: {peaks}",
                data=memory,
                x_label="minutes",
                y_label="MiB",
                marks=marks,
            )
        )
    for column, title, unit in (
        ("ttft_p50_ms", "TTFT p50 per window", "ms"),
        ("tpot_p50_ms", "TPOT p50 per window", "ms"),
        ("tokens_per_s", "Throughput per window", "tokens/s"),
    ):
        data: dict[str, Line] = {}
        for role, table in windows.items():
            if column in table:
                series = table[column].dropna()
                xs, ys = downsample(list(series.index / 60), list(series))
                data[role] = Line(x=tuple(xs), y=tuple(ys))
        if data:
            medians = ", ".join(
                f"{role} median {pd.Series(line.y).median():.1f} {unit}" for role, line in data.items()
            )
            out.append(
                LinesChart(
                    title=title,
                    alt=f"{title}: {medians}",
                    data=data,
                    x_label="minutes",
                    y_label=unit,
                    marks=marks,
                )
            )
    return tuple(out)


def _num(value: float | None, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return f"{value:+.{digits}g}"


def trend_table(verdicts: Sequence[SeriesVerdict], horizon_s: float) -> Table:
    rows: list[tuple[Any, ...]] = []
    for verdict in verdicts:
        for trend in (verdict.pinned, verdict.candidate):
            if trend is None:
                continue
            rows.append(_trend_row(verdict, trend, horizon_s))
    hours = horizon_s / HOUR
    return Table(
        title=f"Trends after the warm-up (growth over {hours:.3g} h)",
        columns=("series", "role", "windows", "τ", "p levels (AR(1) corrected)", "n/n*", "p increments",
         "slope per h", "95 % interval", "growth (lower bound)", "budget", "finding"),
        rows=tuple(rows),
    )  # fmt: skip


def _trend_row(verdict: SeriesVerdict, trend: Trend, horizon_s: float) -> tuple[Any, ...]:
    rule = verdict.rule
    test, sen, inc = trend.test, trend.sen, trend.increments
    low, _, _ = trend.growth(horizon_s)
    slope_low, slope_high = trend.slope_bounds()
    return (
        f"{rule.label} ({rule.unit})",
        trend.role,
        trend.points,
        f"{test.tau:.2f}" if test else "—",
        f"{test.p_value:.3g}" if test else "—",
        f"{test.variance_factor:.2f}" if test else "—",
        f"{inc.p_value:.3g}" if inc else "—",
        _num(sen.slope if sen else None),
        f"[{_num(slope_low)}, {_num(slope_high)}]" if sen else "—",
        _num(low),
        f"{verdict.budget:g}" if verdict.budget is not None else "—",
        verdict.finding if trend.role == "candidate" else "",
    )


def requests_table(summaries: Mapping[str, RequestSummary]) -> Table:
    rows = tuple(
        (
            role,
            s.sent,
            s.ok,
            s.error,
            s.stalled,
            s.cut,
            s.tokens,
            _ms(s.ttft_p50_s),
            _ms(s.tpot_p50_s),
            _ms(s.e2e_p99_s),
            s.stop_reason,
        )
        for role, s in summaries.items()
    )
    return Table(
        title="Requests",
        columns=("role", "sent", "ok", "error", "stalled", "cut at the end", "tokens", "TTFT p50", "TPOT p50",
         "end to end p99", "load stopped"),
        rows=rows,
    )  # fmt: skip


def blocks_table(measurements: Mapping[str, SoakMeasurement | None]) -> Table | None:
    """The order the roles' blocks ran in, when the soak was interleaved (None otherwise)."""
    rows = sorted(
        ((b.wall_start_s, b.wall_end_s, role, b) for role, m in measurements.items()
         if m and m.schedule == "interleaved" for b in m.blocks),
        key=lambda row: row[:3],
    )  # fmt: skip
    if not rows:
        return None
    return Table(
        title="Order of the soak (ABBA blocks)",
        columns=("#", "role", "block", "role's time", "since the soak began", "requests", "load stopped"),
        rows=tuple(
            (i + 1, role, b.block + 1, f"{b.start_s:g}–{b.end_s:g} s",
             f"{start:.1f}–{end:.1f} s", b.requests, b.stop_reason)
            for i, (start, end, role, b) in enumerate(rows)
        ),
    )  # fmt: skip


def _ms(seconds: float | None) -> str:
    return "—" if seconds is None or math.isnan(seconds) else f"{seconds * 1000:.1f} ms"


def kernel_table(matches: Sequence[KernelLogMatch]) -> Table:
    return Table(
        title="Kernel-log and server-log matches",
        columns=("role", "pattern", "line", "source"),
        rows=tuple((_owner(m), m.pattern, m.line, m.source) for m in matches),
    )


def _owner(match: KernelLogMatch) -> str:
    if match.moved_from:
        return f"{match.role} (names its process; written during {match.moved_from}'s block)"
    return match.role


def limits_of_evidence(
    p: SoakParams,
    measurements: dict[str, SoakMeasurement | None],
    telemetry: dict[str, pd.DataFrame],
    horizon: float,
) -> list[str]:
    duration = float(p.duration_s)
    block = float(p.block_s)
    schedules = {m.schedule for m in measurements.values() if m}
    if "concurrent" in schedules:
        order = (
            f"one soak of {duration / 60:.3g} min with every role loaded at once: drift too slow to show "
            f"in that time and faults that take hours are not covered; the roles contended for the "
            f"machine, so latencies include the others' load, device-wide figures (GPU VRAM/GTT, "
            f"PSI) include all servers; a driver line that names no process counts for every role"
        )
    elif "interleaved" in schedules:
        order = (
            f"one soak of {duration / 60:.3g} min per role in ABBA blocks of {block / 60:.3g} min: drift "
            f"too slow to show in that time and faults that take hours are not covered; both servers were "
            f"up for the whole soak, so device-wide figures (GPU VRAM/GTT, PSI) include the idle one"
        )
    else:
        order = (
            f"one soak of {duration / 60:.3g} min per role, pinned then candidate: drift too slow to show "
            f"in that time, faults that take hours, and a change of the machine between the roles are not "
            f"told apart"
        )
    notes = [
        order,
        "the workload is synthetic (generated multi-turn history, one seed, one model): other traffic "
        "may behave differently",
    ]
    if horizon > duration:
        notes.append(
            f"growth budgets are judged over {horizon / 3600:.3g} h by extrapolating the slope measured "
            f"over {max(duration - float(p.warmup_s), 0) / 60:.3g} min"
        )
    if float(p.compact_every_s) <= 0:
        notes.append("no memory pressure was applied (compact_every_s = 0)")
    elif any(m and m.compaction and m.compaction.permitted is False for m in measurements.values()):
        notes.append("memory pressure was not applied: /proc/sys/vm/compact_memory was not writable")
    if any(m.kernel_log is None or m.kernel_log.source is None for m in measurements.values() if m):
        notes.append("the kernel log was not watched: GPU driver faults would not be seen")
    gpu = any(
        any(c.startswith(("gpu_", "proc_vram", "proc_gtt", "nvidia_")) for c in frame.columns)
        for frame in telemetry.values()
    )
    if not gpu:
        notes.append(
            "no GPU memory telemetry here (no amdgpu sysfs, DRM fdinfo or nvidia-smi): host memory only"
        )
    return notes
