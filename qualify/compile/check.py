"""The `kernel-resources` kind's measure and judge.

`qualify.compile.kind` declares the kind (parameters, limits, verdict rules) and documents what it
measures and how it decides; `qualify.kinds` imports this module when such a check first runs
or is judged.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from qualify.checks.base import Finding, Judgement, SavedCheck
from qualify.checks.figures import Table
from qualify.checks.findings import reason_line, worst
from qualify.checks.roleruns import run_findings
from qualify.compile.bysource import by_source, failing_sources, source_table
from qualify.compile.causes import associations, cause_table, lead
from qualify.compile.cudanames import display_name
from qualify.compile.diff import KernelDiff, Limits, diff
from qualify.compile.failurekinds import FAILURE_KINDS, failure_kinds, failure_rank
from qualify.compile.mixsetup import MixTools, mix_reading, mix_tools
from qualify.compile.mixtables import family_table, mix_table
from qualify.compile.params import CompileParams
from qualify.compile.ptxaslog import PtxasLogError
from qualify.compile.scan import FAMILIES, load_tables, save_tables, scan
from qualify.compile.stubs import figures_stub
from qualify.compile.tables import counts_table, diff_frame, kernel_tables
from qualify.core import jsontext
from qualify.core.context import CheckContext
from qualify.core.errors import QualifyError
from qualify.core.runstore import write_parquet
from qualify.core.verdicts import Verdict
from qualify.records.compile import KernelFacts, KernelMeasurement, MixNotRead, MixRead, Severities

_LISTED = 30  # findings listed one by one before the rest are counted
_SEVERITY_VERDICT = {"FAIL": Verdict.FAIL, "ERROR": Verdict.ERROR, "WARN": Verdict.WARN}
#: The severities the facts count kernels by (`KernelFacts.kernels_by_severity`).
_SEVERITIES = ("FAIL", "ERROR", "WARN", "INFO", "same", "stub")


def measure(ctx: CheckContext) -> None:
    tools = MixTools()
    tool_error: QualifyError | None = None
    try:
        tools = mix_tools(ctx)
    except QualifyError as exc:
        tool_error = exc
    params = CompileParams.of(ctx.spec)
    for role in ctx.roles:
        started = time.monotonic()
        measurement: dict[str, Any] = {"role": role, "arm": ctx.arms[role].arm.name}
        reading = None
        try:
            if tool_error is not None:
                raise tool_error
            unknown = set(params.require) - set(FAMILIES)
            if unknown:
                raise QualifyError(
                    f"require: unknown kernel families {sorted(unknown)}", "use " + ", ".join(FAMILIES)
                )
            root = _one_path(ctx, params.root, role, "root")
            su = params.stack_usage
            stack_usage = _one_path(ctx, su, role, "stack_usage") if su else root / "share" / "stack-usage"
            logs = [Path(p) for t in params.ptxas_logs for p in ctx.argv(t, role)]
            for log in logs:
                if not log.is_file():
                    raise QualifyError(f"ptxas_logs: {log} does not exist", "save `ptxas -v` output there")
            ctx.progress(f"{role}: reading kernels under {root}")
            reading = mix_reading(ctx, tools, ctx.role_dir(role))
            found = scan(
                root,
                globs=params.paths,
                host_patterns=params.host_patterns,
                stack_usage=stack_usage,
                ptxas_logs=logs,
                mix=reading,
            )
        except (QualifyError, FileNotFoundError, PtxasLogError) as exc:
            message = exc.message if isinstance(exc, QualifyError) else str(exc)
            if isinstance(exc, QualifyError):
                hint = exc.hint
            elif isinstance(exc, PtxasLogError):
                hint = "ptxas_logs must name the saved `ptxas -v` output of this build (nvcc -Xptxas -v)"
            else:
                hint = "check the check's `root` parameter"
            measurement["error"] = {"message": message, "hint": hint}
            _save(ctx, role, measurement)
            continue
        finally:
            ctx.progress(None)
            if reading is not None:
                reading.close()
        measurement.update(
            root=str(root),
            counts=found.counts(),
            files=found.files,
            unreadable=found.unreadable,
            tables=save_tables(found, ctx.role_dir(role)),
            mix=reading.status() if reading is not None else {},
            seconds=round(time.monotonic() - started, 3),
        )
        ctx.echo(
            f"{role}: "
            + ", ".join(f"{n} {family}" for family, n in found.counts().items())
            + f" kernels in {len(found.files)} files"
        )
        _save(ctx, role, measurement)
    measured = [r for r in ("pinned", "candidate") if (ctx.role_dir(r) / "amdgpu.parquet").is_file()]
    if len(measured) == 2:
        limits = Limits.from_plan(ctx.spec.limits, params.cuda_block_size)
        results = diff(load_tables(ctx.role_dir("pinned")), load_tables(ctx.role_dir("candidate")), limits)
        write_parquet(ctx.folder / "diff.parquet", diff_frame(results))


def _save(ctx: CheckContext, role: str, measurement: dict[str, Any]) -> None:
    """The role's measurement, checked as its type before it is written."""
    path = ctx.role_dir(role) / "measurement.json"
    ctx.save(role, KernelMeasurement.load(measurement, path).to_json())


def _one_path(ctx: CheckContext, template: str, role: str, param: str) -> Path:
    argv = ctx.argv(template, role)
    if len(argv) != 1 or not argv[0]:
        raise QualifyError(f"{param}: {template!r} must name exactly one path, got {argv}")
    return Path(argv[0])


def judge(saved: SavedCheck) -> Judgement:
    tables: dict[str, dict[str, Any]] = {}
    counts: dict[str, dict[str, int]] = {}
    params = CompileParams.of_saved(saved)
    required = params.require
    # No command runs here: a role's only failure is not being scanned (ERROR).
    findings = run_findings(saved, failed_run_fails=False)
    scanned = _scanned(saved)
    for role, m in scanned.items():
        counts[role] = m.counts
        for item in m.unreadable[:_LISTED]:
            findings.append(Finding(Verdict.ERROR, f"{item.file}: {item.message}", role))
        if not sum(m.counts.values()):
            findings.append(Finding(Verdict.FAIL, _nothing_found(saved, m), role))
        for family in required:
            if not m.counts.get(family):
                findings.append(
                    Finding(Verdict.FAIL, f"no {family} kernels found, and the plan requires them", role)
                )
        tables[role] = load_tables(saved.role_dir(role))
    results: list[KernelDiff] = []
    out_tables: list[Table] = []
    causes = []
    sources = []
    if "pinned" in tables and "candidate" in tables:
        limits = Limits.from_plan(saved.spec.limits, params.cuda_block_size)
        results = diff(tables["pinned"], tables["candidate"], limits)
        findings.extend(_findings(results))
        causes = associations(results)
        sources = by_source(results)
        unknown = dict.fromkeys(
            f.no_source_file for m in scanned.values() for f in m.files if f.no_source_file
        )
        # The failures by source file follow what goes with them, before the counts.
        lead_tables = (cause_table(causes), source_table(sources, list(unknown)[:2]))
        out_tables = [*(t for t in lead_tables if t), counts_table(counts, results)]
        out_tables += [
            *(t for t in (family_table(results), mix_table(results)) if t),
            *kernel_tables(results),
        ]
    verdict = worst(findings)
    summary = _summary(counts, results)
    failed = _failures(results)
    # A kernel comparison that failed says why in counts of kinds of failure; anything else
    # (a role not scanned, no kernels found) by its first finding.
    reason = reason_line(
        verdict, findings, summary, failed if verdict in (Verdict.FAIL, Verdict.ERROR) else None
    )
    # Then the change that goes with most of them, the strongest association the rules do not
    # read themselves (`qualify.compile.causes`): the failures' if any, else the warnings'.
    named = lead(causes, "FAIL") or (lead(causes, "WARN") if verdict is Verdict.WARN else None)
    if named is not None:
        reason += f"; {named.sentence()}"
    facts = KernelFacts(
        counts=counts,
        kernels_by_severity=Severities(**{s: sum(r.severity == s for r in results) for s in _SEVERITIES}),
        mix={role: m.mix for role, m in scanned.items()},
        stubs=_stubs(results),
        causes=causes,
        # Written only where a source is known, so that a run scanned before keeps its facts.
        **({"sources": failing} if (failing := failing_sources(sources)) else {}),
    )
    mix = _mix_status(facts)
    if mix:
        reason += f"; {mix}"
    return Judgement(
        verdict,
        reason,
        tuple(findings),
        tuple(out_tables),
        facts=facts,
        judged=(f"{len(results)} kernels compared with pinned",) if results else (),
    )


def _scanned(saved: SavedCheck) -> dict[str, KernelMeasurement]:
    """The measurement of each role that was scanned, checked as its type."""
    found: dict[str, KernelMeasurement] = {}
    for role in saved.roles:
        m = saved.measured(role, KernelMeasurement)
        if m is not None and m.error is None:
            found[role] = m
    return found


def _mix_status(facts: KernelFacts) -> str:
    """'instruction mix not read for AMDGPU: no llvm-objdump-30, ... on PATH' for a family that
    has kernels but no mix, naming the tool otherwise: 'mix decoded by LLVM version 22.1.8'."""
    said: list[str] = []
    for by_family in facts.mix.values():
        for family, status in by_family.items():
            if not any(c.get(family) for c in facts.counts.values()):
                continue
            text = (
                f"instruction mix not read for {_FAMILY_NAMES.get(family, family)}: {status.not_read}"
                if isinstance(status, MixNotRead)
                else f"{_FAMILY_NAMES.get(family, family)} mix decoded by {status.version}" + _unread(status)
            )
            if text not in said:
                said.append(text)
    return "; ".join(said)


def _unread(status: MixRead) -> str:
    """' (it could not read 3 code objects: ...)' when the tool failed on some."""
    failed = status.code_objects_failed
    if not failed:
        return ""
    first = (status.failed or [""])[0]
    return f" (it could not read {failed} code object{'' if failed == 1 else 's'}, e.g. {first[:200]})"


def _nothing_found(saved: SavedCheck, m: KernelMeasurement) -> str:
    """Why a role's scan found no kernel, naming the parameter that names them, its value and
    where it is set: the stage file the run's plan read, as its stage.json saved it."""
    params = CompileParams.of_saved(saved)
    globs = ", ".join(params.paths or ("*",))
    patterns = list(params.host_patterns)
    where = _stage_file(saved)
    head = f"no kernels found under {m.root} (paths {globs}), so nothing was measured: "
    if not m.files:
        return (
            head + f"no file there holds GPU code or ELF: set root and paths in {where} to the build's files"
        )
    n = len(m.files)
    held = f"{n} ELF or device code file{'' if n == 1 else 's'} but no GPU code object"
    matched = (
        f"no host function matches host_patterns ({', '.join(patterns)})"
        if patterns
        else "host_patterns is [] (no host kernels)"
    )
    return head + (
        f"{held}, and {matched}: set host_patterns in {where} to globs naming the engine's kernel "
        f"functions (`qualify kernels {m.root} --host-pattern '*'` lists them)"
    )


def _stage_file(saved: SavedCheck) -> str:
    """The stage file this check was read from (its stage's stage.json, beside the check's
    folder, holds the plan's entry), else a description of where the check is."""
    try:
        stage = jsontext.loads((saved.folder.parent / "stage.json").read_text(encoding="utf-8"))
        return str(stage["spec"]["file"])
    except (OSError, ValueError, KeyError, TypeError):
        named = f" {saved.spec.name!r}" if saved.spec.name != saved.spec.kind else ""
        return f"the compile stage's {saved.spec.kind} check{named}"


def _failures(results: list[KernelDiff]) -> str:
    """'89 CUDA kernels fail: 16 spill more, 48 lose occupancy, 31 are missing from the
    candidate (33 new in it)', per family; then ERROR kernels. Empty when none failed."""
    parts = []
    for family in FAMILIES:
        bad = [r for r in results if r.family == family and r.severity == "FAIL"]
        if bad:
            kinds = {kind: 0 for kind in dict.fromkeys(words for _, words in FAILURE_KINDS)}
            for r in bad:
                for kind in failure_kinds(r):
                    kinds[kind] += 1
            kinds = {kind: n for kind, n in kinds.items() if n}  # the worst kinds first
            counted = ", ".join(
                f"{n} {kind}"
                + (_new_alongside(results, family) if kind.endswith("missing from the candidate") else "")
                for kind, n in kinds.items()
            )
            several = " (a kernel can fail in several ways)" if sum(kinds.values()) > len(bad) else ""
            parts.append(f"{_kernels(len(bad), family)} fail: {counted}{several}")
        errors = sum(r.family == family and r.severity == "ERROR" for r in results)
        if errors:
            parts.append(f"{_kernels(errors, family)} with figures that cannot be trusted (ERROR)")
    return "; ".join(parts)


def _new_alongside(results: list[KernelDiff], family: str) -> str:
    new = sum(r.family == family and r.pinned is None for r in results)
    return f" ({new} new in it)" if new else ""


_FAMILY_NAMES = {"cuda": "CUDA", "amdgpu": "AMDGPU", "host": "host"}


def _kernels(n: int, family: str) -> str:
    return f"{n} {_FAMILY_NAMES.get(family, family)} kernel{'' if n == 1 else 's'}"


def _where(r: KernelDiff) -> str:
    return f"{r.family} {r.target} " if r.target else f"{r.family} "


def _findings(results: list[KernelDiff]) -> list[Finding]:
    """FAIL and ERROR kernels one by one (up to a cap), the worst kinds of failure first, by
    their C++ names; WARNs summarised per family."""
    findings: list[Finding] = []
    for severity in ("FAIL", "ERROR"):
        bad = sorted((r for r in results if r.severity == severity), key=failure_rank)
        for r in bad[:_LISTED]:
            findings.append(
                Finding(
                    _SEVERITY_VERDICT[severity],
                    f"{_where(r)}{display_name(r.key)}: {'; '.join(r.reasons)}",
                    "candidate",
                )
            )
        if len(bad) > _LISTED:
            findings.append(
                Finding(
                    _SEVERITY_VERDICT[severity],
                    f"+{len(bad) - _LISTED} more {severity} kernels (see the table)",
                    "candidate",
                )
            )
    for family in FAMILIES:
        warned = [r for r in results if r.family == family and r.severity == "WARN"]
        if warned:
            # One line per family: how many for each kind of change, and the first example.
            kinds: dict[str, int] = {}
            for r in warned:
                kind = r.reasons[0].split(" → ")[0].split(" (")[0].rstrip("0123456789 ")
                kinds[kind] = kinds.get(kind, 0) + 1
            counted = ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items(), key=lambda k: -k[1]))
            first = f"{display_name(warned[0].key)}: {warned[0].reasons[0]}"
            compared = sum(r.family == family for r in results)
            past = "past the host limits" if family == "host" else "WARN"
            findings.append(
                Finding(
                    Verdict.WARN,
                    f"{len(warned)} of {compared} {family} kernels {past} ({counted}); first: {first}",
                    "candidate",
                )
            )
    return findings


def _stubs(results: list[KernelDiff]) -> dict[str, dict[str, int]]:
    """Per role, its kernels of each GPU family that are stubs (`qualify.compile.stubs`): only
    families that have any."""
    found: dict[str, dict[str, int]] = {}
    for role in ("pinned", "candidate"):
        for family in FAMILIES:
            n = sum(r.family == family and figures_stub(getattr(r, role)) for r in results)
            if n:
                found.setdefault(role, {})[family] = n
    return found


def _summary(counts: dict[str, dict[str, int]], results: list[KernelDiff]) -> str:
    """Per family, in the counts table's words: '6543 CUDA kernels compared (pinned 6991
    copies, candidate 6993): 89 FAIL, 213 WARN, 254 INFO, 5987 unchanged', then the stubs set
    apart, counted per side ('2333 stubs set apart (pinned 2333, candidate 2333)')."""
    if not results:
        parts = []
        for role, by_family in counts.items():
            found = ", ".join(f"{n} {family}" for family, n in by_family.items() if n)
            parts.append(f"{role} {found or 'no'} kernels")
        return "; ".join(parts)
    parts = []
    for family in FAMILIES:
        mine = [r for r in results if r.family == family]
        if not mine:
            continue
        copies = ", ".join(
            f"{role} {counts.get(role, {}).get(family, 0)}" for role in ("pinned", "candidate")
        )
        judged = [
            f"{n} {'unchanged' if s == 'same' else s}"
            for s in ("FAIL", "ERROR", "WARN", "INFO", "same")
            if (n := sum(r.severity == s for r in mine))
        ]
        apart = {role: sum(figures_stub(getattr(r, role)) for r in mine) for role in ("pinned", "candidate")}
        if any(apart.values()):
            judged.append(
                f"{sum(r.severity == 'stub' for r in mine)} stubs set apart "
                f"(pinned {apart['pinned']}, candidate {apart['candidate']})"
            )
        parts.append(f"{_kernels(len(mine), family)} compared ({copies} copies): {', '.join(judged)}")
    return "; ".join(parts)
