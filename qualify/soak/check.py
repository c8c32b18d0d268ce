"""The `soak` kind's measure and judge.

`qualify.soak.kind` declares the kind (parameters, limits, verdict rules) and documents what it
measures and how it decides; `qualify.kinds` imports this module when such a check first runs
or is judged.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from qualify.checks.base import Finding, Judgement, SavedCheck
from qualify.checks.findings import headline, worst
from qualify.core.context import CheckContext
from qualify.core.errors import QualifyError
from qualify.core.runstore import write_json
from qualify.core.verdicts import Verdict
from qualify.records.soak import (
    CompactionEvent,
    KernelLogMatch,
    RequestSummary,
    SoakFacts,
    SoakMeasurement,
    TrendRecord,
)
from qualify.soak import report
from qualify.soak.kernellog import KERNEL_PATTERNS, SERVER_PATTERNS, attribute, match_lines
from qualify.soak.kind import KIND
from qualify.soak.params import SoakParams
from qualify.soak.role import SoakSettings
from qualify.soak.run import soak_roles
from qualify.soak.trend import (
    GROWS_LIKE_PINNED,
    LEAK,
    NO_LEAK,
    RULES,
    TOO_SHORT,
    SeriesRule,
    SeriesVerdict,
    judge_series,
    request_windows,
    telemetry_windows,
    trend,
)
from qualify.soak.workload import WorkloadSpec, describe, generate
from qualify.stats import abtests


def workload_spec(params: SoakParams) -> WorkloadSpec:
    return WorkloadSpec(
        seed=params.seed,
        duration_s=float(params.duration_s),
        rate=float(params.rate),
        max_requests=params.max_requests,
        turns=params.turns,
        prefix_words=params.prefix_words,
        turn_words=params.turn_words,
        reply_words=params.reply_words,
        max_tokens=params.max_tokens,
    )


def measure(ctx: CheckContext) -> None:
    p = SoakParams.of(ctx.spec)
    if p.block_s < 0:
        raise QualifyError(
            f"soak check {ctx.spec.name!r}: block_s = {p.block_s} is negative",
            "give the seconds of each role's soak per block, or 0 to run the roles one after the other",
        )
    spec = workload_spec(p)
    requests = generate(spec)
    write_json(ctx.folder / "workload.json", describe(spec, requests))
    settings = SoakSettings(
        server=p.server,
        duration_s=float(p.duration_s),
        warmup_s=float(p.warmup_s),
        sample_s=float(p.sample_s),
        concurrency=p.concurrency,
        stall_s=float(p.stall_s),
        compact_every_s=float(p.compact_every_s),
        ready_timeout_s=float(p.ready_timeout_s),
        endpoint=p.endpoint,
        health=p.health,
        body=dict(p.body),
        compact_path=p.compact_path,
        grace_s=float(p.grace_s),
        block_s=float(p.block_s),
        concurrent=p.concurrent,
    )
    soak_roles(ctx, requests, settings)


def _frame(saved: SavedCheck, role: str, name: str) -> pd.DataFrame:
    path = saved.role_dir(role) / name
    return pd.read_parquet(path) if path.is_file() else pd.DataFrame()


def _summary(m: SoakMeasurement, requests: pd.DataFrame) -> RequestSummary:
    ok = requests[requests["status"] == "ok"] if not requests.empty else requests

    def count(status: str) -> int:
        return int((requests["status"] == status).sum()) if not requests.empty else 0

    def q(column: str, level: float) -> float | None:
        if ok.empty or ok[column].dropna().empty:
            return None
        return float(ok[column].dropna().quantile(level))

    return RequestSummary(
        sent=len(requests),
        ok=count("ok"),
        error=count("error"),
        stalled=count("stalled"),
        cut=count("cut"),
        tokens=int(ok["tokens"].sum()) if not ok.empty else 0,
        ttft_p50_s=q("ttft_s", 0.5),
        tpot_p50_s=q("tpot_s", 0.5),
        e2e_p99_s=q("e2e_s", 0.99),
        stop_reason=m.stop_reason,
        load_s=m.load_s,
        concurrency=m.concurrency,
    )


def _tail(path: Path, lines: int = 8) -> str:
    try:
        return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _role_findings(
    saved: SavedCheck,
    role: str,
    m: SoakMeasurement | None,
    requests: pd.DataFrame,
    matches: list[KernelLogMatch],
) -> list[Finding]:
    bad = Verdict.FAIL if role == "candidate" else Verdict.ERROR
    if m is None:
        return [Finding(Verdict.ERROR, "not measured (the run stopped first)", role)]
    if m.error is not None:
        hint = m.error.hint
        return [Finding(Verdict.ERROR, m.error.message + (f" ({hint})" if hint else ""), role)]
    if m.start_failed is not None:
        tail = "\n".join(m.start_failed.tail[-8:])
        return [Finding(bad, f"server never became ready: {m.start_failed.message}\n{tail}".rstrip(), role)]
    findings: list[Finding] = []
    if m.server_died:
        log = saved.folder / "logs" / f"{role}-server.log"
        code = m.server.returncode if m.server else None
        findings.append(Finding(bad, f"server exited during the soak (code {code})\n{_tail(log)}", role))
    if not requests.empty:
        for status in ("stalled", "error"):
            failed = requests[requests["status"] == status]
            if len(failed):
                first = failed.iloc[0]
                findings.append(
                    Finding(
                        bad,
                        f"{len(failed)} request(s) {status}; first: request {int(first['index'])} "
                        f"at {float(first['scheduled_s']):.1f} s: {first['error']}",
                        role,
                    )
                )
    if requests.empty or not (requests["status"] == "ok").any():
        findings.append(Finding(bad, "no request completed: nothing was measured", role))
    for match in matches:
        findings.append(Finding(bad, f"{match.pattern}: {match.line} ({match.source})", role))
    if m.compaction is not None and m.compaction.permitted is False:
        why = m.compaction.reason
        findings.append(Finding(Verdict.WARN, f"memory pressure was not applied: {why}", role))
    if m.kernel_log is None or m.kernel_log.source is None:
        unavailable = m.kernel_log.unavailable if m.kernel_log else None
        findings.append(Finding(Verdict.WARN, f"the kernel log was not watched: {unavailable}", role))
    return findings


def _gpu_memory_unseen(frame: pd.DataFrame) -> str | None:
    """Why the server's own GPU memory went unjudged on a host whose nvidia-smi reported the
    device's (None where it was seen, or where there is no NVIDIA GPU)."""
    if "nvidia_used_bytes" not in frame or frame["nvidia_used_bytes"].dropna().empty:
        return None
    if "nvidia_proc_bytes" in frame and (frame["nvidia_proc_bytes"].dropna() > 0).any():
        return None
    return (
        "the server's own GPU memory was not measured: nvidia-smi listed none of its processes "
        "in any sample, so no GPU memory series was judged (a server that does not use the GPU "
        "has none)"
    )


def _matches(saved: SavedCheck, role: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    sources = (
        ("kernel", saved.role_dir(role) / "kernel.log", KERNEL_PATTERNS),
        ("server", saved.folder / "logs" / f"{role}-server.log", SERVER_PATTERNS),
    )
    for log, path, patterns in sources:
        if path.is_file():
            lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
            found += [{"role": role, "log": log, **m.as_json()} for m in match_lines(lines, patterns)]
    return found


def judge(saved: SavedCheck) -> Judgement:
    p = SoakParams.of_saved(saved)
    limits = {**KIND.limit_defaults(), **saved.spec.limits}
    roles: list[str] = [r for r in ("pinned", "candidate") if r in saved.roles]
    measurements = {role: saved.measured(role, SoakMeasurement) for role in roles}
    requests = {role: _frame(saved, role, "requests.parquet") for role in roles}
    telemetry = {role: _frame(saved, role, "telemetry.parquet") for role in roles}
    findings: list[Finding] = []
    pids = {r: set(m.server.pids if m and m.server else ()) for r, m in measurements.items()}
    matches = [
        KernelLogMatch.model_validate(m)
        for m in attribute([m for role in roles for m in _matches(saved, role)], pids)
    ]
    for role in roles:
        role_matches = [m for m in matches if m.role == role]
        findings += _role_findings(saved, role, measurements[role], requests[role], role_matches)
        if unseen := _gpu_memory_unseen(telemetry[role]):
            findings.append(Finding(Verdict.WARN, unseen, role))

    warmup = float(p.warmup_s)
    width = float(p.window_s)
    alpha = float(p.alpha)
    horizon = float(p.horizon_s or max(float(p.duration_s) - warmup, 0.0))
    windows = {
        role: pd.concat(
            [
                telemetry_windows(telemetry[role], warmup, width),
                request_windows(requests[role], warmup, width),
            ],
            axis=1,
        )
        for role in roles
    }
    verdicts: list[SeriesVerdict] = []
    # Without pinned in the roles the candidate is judged on its own budgets (a leak is growth
    # beyond the budget); with pinned, it must also be steeper than pinned.
    usable = all(measurements.get(r) and not requests[r].empty for r in roles)
    if usable and "candidate" in roles:
        rules = [
            r for r in RULES if r.name in windows["candidate"] and windows["candidate"][r.name].notna().any()
        ]
        levels = _holm_levels(rules, windows["candidate"], limits, alpha)
        for rule in rules:
            candidate = trend(rule.name, "candidate", windows["candidate"], levels.get(rule.name, alpha))
            pinned = trend(rule.name, "pinned", windows["pinned"], alpha) if "pinned" in roles else None
            verdicts.append(judge_series(rule, candidate, pinned, limits, horizon))
    # A series is judged only against a budget; one without is shown, never counted as judged.
    short = [v for v in verdicts if v.finding == TOO_SHORT and v.budget is not None]
    if short:
        findings.append(
            Finding(
                Verdict.INCONCLUSIVE,
                f"the soak is too short to decide drift: {short[0].why} "
                f"({len(short)} series; windows of {width:g} s after a {warmup:g} s warm-up)",
                "candidate",
            )
        )
    if p.bound_budgets:
        findings += _unbounded(verdicts, horizon)
    for v in verdicts:
        if v.finding == LEAK:
            what = "leak" if v.rule.kind == "memory" else "latency drift"
            findings.append(Finding(Verdict.FAIL, f"{what}: {v.why}", "candidate"))
        elif v.finding == GROWS_LIKE_PINNED:
            findings.append(Finding(Verdict.WARN, v.why, "candidate"))

    summaries = {role: _summary(m, requests[role]) for role in roles if (m := measurements[role])}
    verdict = worst(findings)
    judged = [v for v in verdicts if v.budget is not None and v.finding != TOO_SHORT]
    ok_text = (
        f"no failed or stalled request, no driver error in the kernel log, "
        f"{len(judged)} series without a leak or drift"
    )
    reason = headline(verdict, findings, ok_text)
    compaction = _compaction(measurements)
    tables = [report.requests_table(summaries)]
    order = report.blocks_table(measurements)
    if order is not None:
        tables.append(order)
    if verdicts:
        tables.append(report.trend_table(verdicts, horizon))
    if matches:
        tables.append(report.kernel_table(matches))
    return Judgement(
        verdict,
        reason,
        tuple(findings),
        tuple(tables),
        charts=report.charts(telemetry, windows, compaction, warmup),
        facts=SoakFacts(
            limits_of_evidence=report.limits_of_evidence(p, measurements, telemetry, horizon),
            requests=summaries,
            horizon_s=horizon,
            trends=[
                TrendRecord(
                    **t.as_json(horizon),
                    finding=v.finding if t.role == "candidate" else None,
                    budget=v.budget,
                )
                for v in verdicts
                for t in (v.pinned, v.candidate)
                if t is not None
            ],
            kernel_log_matches=matches,
            compaction={r: m.compaction if m else None for r, m in measurements.items()},
            a_a=_same_arm(measurements),
        ),
        judged=tuple(f"{v.rule.name} against its budget" for v in judged),
    )


def _unbounded(verdicts: list[SeriesVerdict], horizon_s: float) -> list[Finding]:
    """One INCONCLUSIVE finding per memory series judged "no leak" whose growth over the horizon
    the soak cannot bound within its budget (the upper end of the interval above it)."""
    out: list[Finding] = []
    for v in verdicts:
        if v.finding != NO_LEAK or v.budget is None or v.rule.kind != "memory":
            continue
        high = v.candidate.growth(horizon_s)[2]
        if not high <= v.budget:  # NaN: no bound at all
            out.append(
                Finding(
                    Verdict.INCONCLUSIVE,
                    f"{v.rule.label}: the soak cannot bound its growth within the budget: up to "
                    f"{high:+.3g} {v.rule.unit} over {horizon_s / 3600:.3g} h > {v.budget:g} {v.rule.unit}",
                    "candidate",
                )
            )
    return out


def _compaction(measurements: dict[str, SoakMeasurement | None]) -> list[CompactionEvent]:
    for role in ("candidate", "pinned"):
        m = measurements.get(role)
        if m and m.compaction and m.compaction.events:
            return list(m.compaction.events)
    return []


def _same_arm(measurements: dict[str, SoakMeasurement | None]) -> bool:
    arms = [m.arm if m else None for m in measurements.values()]
    return len(arms) == 2 and arms[0] is not None and arms[0] == arms[1]


def _holm_levels(
    rules: list[SeriesRule], windows: pd.DataFrame, limits: dict[str, float], alpha: float
) -> dict[str, float]:
    """The level each budgeted candidate series is tested at: Holm over the series judged at
    once (up to 13), so that `alpha` bounds the chance of calling any trendless series a trend."""
    judged = [r for r in rules if r.budget and r.budget in limits]
    first = {r.name: trend(r.name, "candidate", windows, alpha) for r in judged}
    p_values = [t.p_value for t in first.values()]  # both trend tests' (Trend.p_value)
    return {name: step.level for name, step in zip(first, abtests.holm(p_values, alpha), strict=True)}
