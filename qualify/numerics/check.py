"""The `kld` kind's measure and judge.

`qualify.numerics.kind` declares the kind (parameters, limits, verdict rules) and documents what it
measures and how it decides; `qualify.kinds` imports this module when such a check first runs
or is judged.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from qualify.checks.base import REFERENCE, Finding, Judgement, SavedCheck
from qualify.checks.findings import reason_line, worst
from qualify.checks.roleruns import run_findings
from qualify.core.context import CheckContext
from qualify.core.progress import Progress
from qualify.core.runstore import write_json
from qualify.core.verdicts import Verdict
from qualify.numerics.judge import FLOOR_ROLE, Settings, decided, judge_in_looks, judge_stats
from qualify.numerics.looks import look_confidence, planned_looks
from qualify.numerics.measuring import Measuring, one_path, save_measurement
from qualify.numerics.params import NumericsParams
from qualify.numerics.sharedpass import SHARED, member_stats
from qualify.numerics.store import (
    check_free_space,
    disk_plan,
    load_stats,
    merge_stats,
    save_stats,
)
from qualify.numerics.streamed import score_together
from qualify.numerics.tables import stats_charts, stats_tables
from qualify.numerics.tokenstats import TokenStats
from qualify.records.numerics import KldFacts, KldMeasurement, NumericsRecord

RECORD = "numerics.json"


def measure(ctx: CheckContext) -> None:
    roles = ctx.roles
    if "reference" not in roles:
        for role in roles:
            save_measurement(
                ctx,
                role,
                {
                    "role": role,
                    "error": {
                        "message": "the kld check needs the reference role",
                        "hint": 'add "reference" to the check\'s roles',
                    },
                },
            )
        return
    params = NumericsParams.of(ctx.spec)
    state = Measuring(ctx, params, _cache_dir(ctx, params.cache))
    state.record["settings"] = state.settings
    floor = "pinned" in roles and params.floor_rerun
    # One candidate in a run; a run set's members (named by label) when it measures them at once.
    candidates = [r for r in roles if r not in ("pinned", "reference")]
    planned = ["reference", *(["pinned"] if "pinned" in roles else []), *([FLOOR_ROLE] if floor else [])]
    planned += candidates

    def run(role: str) -> None:
        ctx.advance(Progress(role, planned.index(role), len(planned), "scoring runs"))
        state.run(role)

    streamed = params.stream
    disk = disk_plan(
        ctx.folder,
        state.size or state.cached_size(),
        cached=state.cached_size() is not None,
        streamed=streamed,
        others=planned[1:],
        keep=params.keep,
    )
    state.record["disk"] = {"stored": list(disk.stored), "bytes": disk.bytes, "free": disk.free}
    ctx.echo(f"numerics: {disk.describe()}")
    check_free_space(ctx.folder, disk.bytes or None, "the numerics stage (" + ", ".join(disk.stored) + ")")
    stats: TokenStats | None = None
    if streamed:
        run("reference")
        looks = _plan_looks(state)
        stats = score_together(state, planned[1:], looks, _stop_when_decided(ctx, params, looks))
    else:
        stats = _one_after_another(state, planned, candidates, run)
    if stats is not None:
        save_stats(stats, ctx.folder)
    write_json(ctx.folder / RECORD, NumericsRecord.load(state.record, ctx.folder / RECORD).to_json())


def _one_after_another(
    state: Measuring, planned: list[str], candidates: list[str], run: Callable[[str], None]
) -> TokenStats | None:
    """Each role scored to a file in turn: reference, pinned and pinned.2 reduced together, then
    each candidate against the reference and pinned (pinned's file kept until the last)."""
    floor = FLOOR_ROLE in planned
    pinned = "pinned" in planned
    for role in planned[: len(planned) - len(candidates)]:
        run(role)
        if role == "reference":
            _plan_looks(state)
    stats: TokenStats | None = None
    if floor:
        pairs = [("reference", "pinned"), ("reference", FLOOR_ROLE), ("pinned", FLOOR_ROLE)]
        stats = state.reduce(["reference", "pinned", FLOOR_ROLE], pairs)
        state.discard(FLOOR_ROLE)
    for candidate in candidates:
        run(candidate)
        others = ["pinned", candidate] if pinned else [candidate]
        pairs = [("reference", candidate)] + ([("pinned", candidate)] if pinned else [])
        if stats is None and pinned:
            pairs.insert(0, ("reference", "pinned"))
        got = state.reduce(["reference", *others], pairs)
        state.discard(candidate)
        if len(candidates) == 1:
            # A run of one: its candidate's vectors or none at all (nothing half-judged).
            stats = merge_stats(stats, got) if stats is not None and got is not None else got
        elif got is not None:
            stats = merge_stats(stats, got) if stats is not None else got
    state.discard("pinned")
    return stats


def _plan_looks(state: Measuring) -> tuple[int, ...]:
    """The chunk counts at which the judgement looks (`qualify.numerics.looks`), from the
    reference's corpus; recorded for the judge, which replays them."""
    reference = state.streams.get(REFERENCE)
    if reference is None:
        return ()
    settings = Settings.of(state.params)
    looks = planned_looks(settings.min_chunks, settings.looks, reference.n_chunk)
    state.record["looks"] = {"planned": list(looks)}
    return looks


def _stop_when_decided(
    ctx: CheckContext, params: NumericsParams, looks: tuple[int, ...]
) -> Callable[[TokenStats], bool]:
    """At a look: whether every candidate scored in the pass (a run set's members, each as its
    own judge would see it) is decided, so that the rest of the corpus need not be scored."""
    settings = Settings.of(params)
    level = look_confidence(settings.confidence, len(looks))

    def stop(stats: TokenStats) -> bool:
        at = settings.at_look(looks, stats.n_chunks, level)
        members = [r for r in stats.roles if r not in SHARED]
        return bool(members) and all(
            decided(judge_stats(member_stats(stats, m), ctx.spec.limits, at)) for m in members
        )

    return stop


def _cache_dir(ctx: CheckContext, template: str) -> str | None:
    if template == "":
        return None  # caching turned off
    return str(one_path(ctx, template, "reference", {}).resolve())


def judge(saved: SavedCheck) -> Judgement:
    params = NumericsParams.of_saved(saved)
    floor = "pinned" in saved.roles and params.floor_rerun
    roles = (*saved.roles, FLOOR_ROLE) if floor else saved.roles
    findings = run_findings(replace(saved, roles=roles))
    for role in roles:
        m = saved.measured(role, KldMeasurement)
        if m is not None and m.artifact_error:
            verdict = Verdict.FAIL if role == "candidate" else Verdict.ERROR
            findings.append(Finding(verdict, m.artifact_error, role))
    path = saved.folder / RECORD
    record = NumericsRecord.read(path) if path.is_file() else NumericsRecord()
    if record.settings_mismatch:
        findings.append(
            Finding(Verdict.ERROR, f"settings differ between roles: {record.settings_mismatch}", None)
        )
    if record.token_mismatch:
        findings.append(
            Finding(Verdict.FAIL, f"the roles scored different tokens: {record.token_mismatch}", None)
        )
    if record.artifact_error:
        stopped = record.artifact_error.role
        verdict = Verdict.FAIL if stopped == "candidate" else Verdict.ERROR
        findings.append(Finding(verdict, record.artifact_error.message, stopped))
    stats = load_stats(saved.folder)
    judged: list[str] = []
    tables: tuple[Any, ...] = ()
    charts: tuple[Any, ...] = ()
    facts = KldFacts(settings=record.settings)
    if stats is not None:
        settings = Settings.of(params)
        planned = record.looks.planned if record.looks else ()
        stop = judge_in_looks(stats, saved.spec.limits, settings, planned)
        outcome, at = stop.outcome, settings.at_look(stop.planned, stop.chunks, stop.confidence)
        findings.extend(outcome.findings)
        judged = outcome.judged
        facts = KldFacts(settings=record.settings, **outcome.facts, looks=stop.facts())
        tables = stats_tables(stats.prefix(stop.chunks), outcome, saved.spec.limits, at)
        charts = stats_charts(stats.prefix(stop.chunks), outcome, saved.spec.limits)
    elif not findings:
        findings.append(
            Finding(Verdict.FAIL, "no per-token vectors saved: nothing was compared", "candidate")
        )
    verdict = worst(findings)
    summary = _summary(facts)
    reason = reason_line(verdict, findings, summary)
    return Judgement(verdict, reason, tuple(findings), tables, facts, charts, judged=tuple(judged))


def _summary(facts: KldFacts) -> str:
    parts = []
    for role in ("pinned", "candidate"):
        v = facts.summary(role)
        if v:
            parts.append(f"{role} mean KLD {v.kld_mean:.3g}, top-1 {100 * v.same_top_p:.2f} %")
    ni = facts.noninferiority
    if ni:
        # Results judged before the margin went inside the test hold one bound on θ.
        best = ni.best_test
        if best:
            parts.append(f"θ {ni.theta:.3g} vs δ {ni.delta:.3g} (bound on mean {best.what} {best.upper:.3g})")
        elif ni.bound is not None:
            parts.append(f"θ bound {ni.bound:.3g} vs δ {ni.delta:.3g}")
    if facts.n_chunks is not None:
        planned = facts.looks.planned if facts.looks else []
        at = (
            f" (look {facts.looks.look} of {len(planned)}, of {planned[-1]} planned)"
            if facts.looks and len(planned) > 1
            else ""
        )
        parts.append(f"{facts.n_chunks} chunks{at}")
    return "; ".join(parts)
