"""The `openai-suite` check's report: the serving cases (failures first), the greedy divergence
per prompt, the timing gate and the servers. Pure functions of a `ServingJudgement`."""

from __future__ import annotations

from collections.abc import Mapping

from qualify.checks.figures import Table
from qualify.records.serving import GateRow, GreedyFact, ServingMeasurement, ServingTiming
from qualify.serving.compare import CaseRow
from qualify.serving.judgement import ServingJudgement


def serving_tables(judgement: ServingJudgement) -> tuple[Table, ...]:
    tables = [cases_table(judgement.rows)]
    if judgement.greedy:
        tables.append(greedy_table(judgement.greedy))
    if judgement.timing is not None:
        tables.append(timing_table(judgement.timing, judgement.gate, judgement.limits))
    tables.append(servers_table(judgement.measured))
    return tuple(tables)


def cases_table(rows: tuple[CaseRow, ...]) -> Table:
    return Table(
        title="Serving cases (per suite; failures first)",
        columns=("suite", "case", "pinned", "candidate", "across roles", "first difference"),
        rows=tuple(
            (r.suite, r.case, r.pinned, r.candidate, r.across, r.first_difference)
            for r in sorted(rows, key=lambda r: (r.candidate == "pass" and r.across != "differs",))
        ),
    )


def greedy_table(greedy: tuple[GreedyFact, ...]) -> Table:
    return Table(
        title="Greedy faithfulness (first divergence per prompt)",
        columns=("case", "tokens compared", "first divergence", "pinned top-2 margin", "near-tie"),
        rows=tuple(
            (
                g.case,
                g.compared,
                "none" if g.position is None else g.position,
                "" if g.margin is None else round(g.margin, 4),
                "" if g.position is None else ("yes" if g.tie else "no"),
            )
            for g in greedy
        ),
        collapsed=True,
    )


def timing_table(timing: ServingTiming, gate: tuple[GateRow, ...], limits: Mapping[str, float]) -> Table:
    return Table(
        title=f"Timing gate: candidate − pinned ≤ max({limits['max_slowdown_pct']:g} % × pinned, "
        f"{limits['max_slowdown_ms']:g} ms); {timing.pairs} ABBA pairs per type after "
        f"{timing.warmup} warm-up (computed so the one-sided test can reach its Holm level)",
        columns=(
            "request",
            "metric",
            "pairs",
            "pinned median ms",
            "candidate median ms",
            "Δ ms",
            "bound ms",
            "one-sided p",
            "Holm level",
            "result",
        ),
        rows=tuple(
            (
                r.type,
                r.metric,
                r.pairs,
                _ms(r.pinned_median),
                _ms(r.candidate_median),
                _ms(
                    None
                    if r.pinned_median is None or r.candidate_median is None
                    else r.candidate_median - r.pinned_median
                ),
                _ms(r.bound),
                "" if r.p_value is None else f"{r.p_value:.4f}",
                "" if r.level is None else f"{r.level:.4f}",
                r.result,
            )
            for r in gate
        ),
    )


def _ms(value: float | None) -> str:
    return "" if value is None else f"{value:.1f}"


def servers_table(measured: dict[str, ServingMeasurement]) -> Table:
    rows = []
    for role, m in measured.items():
        s = m.server
        said = (None,) * 4 if s is None else (s.build_info, s.total_slots, s.n_ctx, s.ready_after_s)
        status = (
            "died in " + m.died.suite
            if m.died is not None
            else ("not started" if m.start_error is not None else "ok")
        )
        rows.append(
            (
                role,
                m.arm,
                *(value or "" for value in said),
                status,
                ", ".join(m.not_run),
                # Where `measure` wrote the role's server log, relative to the check's folder.
                f"logs/{role}-server.log",
            )
        )
    return Table(
        title="Servers",
        columns=(
            "role",
            "arm",
            "build",
            "slots",
            "slot n_ctx",
            "ready after s",
            "status",
            "suites not run",
            "log",
        ),
        rows=tuple(rows),
        collapsed=True,
    )
