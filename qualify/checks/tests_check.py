"""The `tests` kind's measure and judge; `qualify.checks.tests` declares the kind and
documents what it measures and how it decides."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path
from typing import Any

from qualify.checks.base import CANDIDATE, Finding, Judgement, SavedCheck
from qualify.checks.figures import Table
from qualify.checks.findings import reason_line, worst
from qualify.checks.junit import (
    ERROR,
    FAILED,
    MISSING,
    PASSED,
    SKIPPED,
    JUnitInvalid,
    executed,
    read_junit,
    read_junit_cases,
)
from qualify.checks.rolerun import JUnitRun
from qualify.checks.roleruns import measure_command, role_run, run_findings
from qualify.checks.testsfacts import CaseCounts, CasesFacts
from qualify.checks.testsparams import TestsParams
from qualify.core.context import CheckContext
from qualify.core.errors import QualifyError
from qualify.core.placeholders import expand
from qualify.core.verdicts import Verdict

JUNIT_COPY = "junit.xml"


def measure(ctx: CheckContext) -> None:
    params = TestsParams.of(ctx.spec)
    for role in ctx.roles:
        cwd: Path | None = None
        extra: dict[str, Any] = {}
        try:
            if params.copy:
                source = _single_path(ctx, params.copy, role)
                cwd = _writable_copy(source, ctx.role_dir(role) / "work")
                extra["copied_from"] = str(source)
            junit = _single_path(ctx, params.junit, role)
        except QualifyError as exc:
            ctx.save(role, {"role": role, "error": {"message": exc.message, "hint": exc.hint}})
            continue

        def keep_junit(measurement: dict[str, Any], junit: Path = junit, role: str = role) -> None:
            measurement["junit"] = str(junit)
            if junit.is_file():
                shutil.copyfile(junit, ctx.role_dir(role) / JUNIT_COPY)

        measure_command(ctx, role, params.run, cwd=cwd, after=keep_junit, extra=extra)


def _single_path(ctx: CheckContext, template: str, role: str) -> Path:
    argv = expand([template], ctx.values(role))
    if len(argv) != 1:
        raise QualifyError(f"{template!r} must name exactly one path, got {argv}")
    return Path(argv[0])


def _writable_copy(source: Path, target: Path) -> Path:
    if not source.is_dir():
        raise QualifyError(f"copy: {source} is not a directory", "check the `copy` path")
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(source, target, symlinks=True)
    # Store files are read-only; the test driver must be able to write beside them.
    for root, dirs, files in os.walk(target):
        for name in dirs + files:
            path = Path(root) / name
            if not path.is_symlink():
                path.chmod(path.stat().st_mode | stat.S_IWUSR)
    target.chmod(target.stat().st_mode | stat.S_IWUSR)
    return target


def judge(saved: SavedCheck) -> Judgement:
    # A non-zero exit is how test drivers report failing tests: the JUnit decides, not the code.
    findings = run_findings(saved, failed_run_fails=False, whole=JUnitRun)
    results: dict[str, dict[str, str]] = {}
    for role in saved.roles:
        run = role_run(saved, role, JUnitRun)
        if run is None or run.error is not None:
            continue
        try:
            results[role] = read_junit(saved.role_dir(role) / JUNIT_COPY)
        except JUnitInvalid as exc:
            tail = "\n".join(run.output_tail[-6:])
            message = f"{exc} (command {run.outcome})\n{tail}".rstrip()
            findings.append(Finding(Verdict.FAIL if role == "candidate" else Verdict.ERROR, message, role))
            continue
        if executed(results[role]) == 0:
            findings.append(
                Finding(
                    Verdict.FAIL,
                    f"no tests executed ({len(results[role])} listed, all skipped "
                    "or none): nothing was measured",
                    role,
                )
            )
        if run.command is not None and run.command.timed_out:
            findings.append(
                Finding(
                    Verdict.FAIL if role == "candidate" else Verdict.ERROR,
                    f"the test command {run.outcome}",
                    role,
                )
            )
    table: tuple[Table, ...] = ()
    judged: list[str] = []
    if executed(results.get(CANDIDATE, {})):
        judged.append(f"{executed(results['candidate'])} candidate tests")
        if "pinned" not in saved.roles:
            # Nothing to compare with: each test the candidate fails is a failure of its own.
            failing = [n for n, s in results["candidate"].items() if s in (FAILED, "error")]
            findings += [Finding(Verdict.FAIL, f"failing: {n}", "candidate") for n in failing]
    if "pinned" in results and "candidate" in results:
        findings.extend(_compare(results["pinned"], results["candidate"]))
        judged.append(f"{len(results['pinned'])} tests compared with pinned")
        for role in ("pinned", "candidate"):
            # A role has results only where it ran: its run is there.
            ran = role_run(saved, role, JUnitRun)
            timed_out = ran is not None and ran.command is not None and ran.command.timed_out
            if (
                ran is not None
                and not ran.ok
                and not timed_out
                and not any(s in (FAILED, "error") for s in results[role].values())
            ):
                findings.append(
                    Finding(Verdict.WARN, f"command {ran.outcome} though its JUnit reports no failure", role)
                )
        times = {role: _times(saved.role_dir(role) / JUNIT_COPY) for role in ("pinned", "candidate")}
        table = (_table(results["pinned"], results["candidate"], times),)
    verdict = worst(findings)
    counts = {
        role: f"{sum(s == PASSED for s in r.values())}/{executed(r)} passed" for role, r in results.items()
    }
    summary = "; ".join(f"{role} {text}" for role, text in counts.items())
    reason = reason_line(verdict, findings, summary)
    return Judgement(
        verdict,
        reason,
        tuple(findings),
        table,
        facts=CasesFacts(counts={role: _count(r) for role, r in results.items()}),
        judged=tuple(judged),
    )


def _compare(pinned: dict[str, str], candidate: dict[str, str]) -> list[Finding]:
    findings: list[Finding] = []
    newly_failing = [t for t, s in pinned.items() if s == PASSED and candidate.get(t, MISSING) != PASSED]
    for test in newly_failing:
        findings.append(
            Finding(Verdict.FAIL, f"newly failing: {test} ({candidate.get(test, MISSING)})", "candidate")
        )
    both = [t for t, s in pinned.items() if s in (FAILED, "error") and candidate.get(t) in (FAILED, "error")]
    if both:
        findings.append(
            Finding(
                Verdict.WARN,
                f"failing in both roles: {', '.join(both[:20])}"
                + (f" (+{len(both) - 20})" if len(both) > 20 else ""),
                None,
            )
        )
    only = sorted(set(pinned) ^ set(candidate))
    only = [t for t in only if t not in newly_failing]
    if only:
        findings.append(
            Finding(
                Verdict.WARN,
                f"in one role only: {', '.join(only[:20])}"
                + (f" (+{len(only) - 20})" if len(only) > 20 else ""),
                None,
            )
        )
    return findings


def _times(path: Path) -> dict[str, float | None]:
    return {test: seconds for test, (_, seconds) in read_junit_cases(path).items()}


def _table(
    pinned: dict[str, str], candidate: dict[str, str], times: dict[str, dict[str, float | None]]
) -> Table:
    def change(test: str) -> str:
        before, after = pinned.get(test, MISSING), candidate.get(test, MISSING)
        if before == PASSED and after != PASSED:
            return "newly failing"
        if before != PASSED and after == PASSED and before != MISSING:
            return "newly passing"
        return "" if before == after else f"{before} → {after}"

    order = {"newly failing": 0, "": 3}
    tests = sorted(set(pinned) | set(candidate), key=lambda t: (order.get(change(t), 1), t))

    def seconds(role: str, test: str) -> str:
        value = times[role].get(test)
        return "" if value is None else f"{value:.2f}"

    rows = tuple(
        (
            t,
            pinned.get(t, MISSING),
            candidate.get(t, MISSING),
            change(t),
            seconds("pinned", t),
            seconds("candidate", t),
        )
        for t in tests
    )
    # Durations are single runs, shown for orientation; the bench stage decides speed.
    return Table(
        title="Tests (changes first)",
        columns=("test", "pinned", "candidate", "change", "pinned s", "candidate s"),
        rows=rows,
    )


def _count(results: dict[str, str]) -> CaseCounts:
    statuses = list(results.values())
    return CaseCounts(
        passed=statuses.count(PASSED),
        failed=statuses.count(FAILED),
        error=statuses.count(ERROR),
        skipped=statuses.count(SKIPPED),
    )
