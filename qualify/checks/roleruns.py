"""Running one command template per role and judging how the runs themselves went.

Shared by the kinds whose measurement is "run the user's command in each role".
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from qualify.checks.base import Finding, SavedCheck
from qualify.checks.rolerun import RoleRun
from qualify.core.context import CheckContext
from qualify.core.errors import QualifyError, ToolMissing
from qualify.core.verdicts import Verdict

R = TypeVar("R", bound=RoleRun)


def measure_command(
    ctx: CheckContext,
    role: str,
    template: str,
    *,
    cwd: Path | None = None,
    after: Callable[[dict[str, Any]], None] | None = None,
    extra: dict[str, Any] | None = None,
) -> None:
    """Run `template` for `role` and save what happened as the role's measurement."""
    measurement: dict[str, Any] = {"role": role, "arm": ctx.arms[role].arm.name, **(extra or {})}
    try:
        argv = ctx.argv(template, role)
        done = ctx.run(role, argv, cwd=cwd)
    except ToolMissing as exc:
        # The build may have lost the tool (the candidate's failure) or the machine lacks it
        # (nobody's build): run_findings tells which by looking at the other roles.
        measurement["error"] = {"message": exc.message, "hint": exc.hint, "missing_tool": True}
    except QualifyError as exc:
        # A missing tool or placeholder is the harness's or the machine's failure, not the
        # candidate's: the judge turns it into ERROR.
        measurement["error"] = {"message": exc.message, "hint": exc.hint}
    else:
        measurement["command"] = done.as_json()
        measurement["output_tail"] = list(done.output_tail[-20:])
        measurement["outcome"] = done.describe()
        measurement["ok"] = done.ok
    if after is not None:
        after(measurement)
    ctx.save(role, measurement)


def run_findings(
    saved: SavedCheck, *, failed_run_fails: bool = True, whole: type[RoleRun] | None = None
) -> list[Finding]:
    """Findings about the runs themselves, before any data is looked at. With `whole` (the
    kind's measurement type), each role's measurement is read whole as that type; without, only
    the run's part of it (the kind reads the rest).

    No measurement or a harness error is ERROR. A candidate that exits non-zero, is killed or
    times out is FAIL (when `failed_run_fails`); a pinned or reference run that does so is
    ERROR: without a working baseline the candidate cannot be judged.
    """
    findings: list[Finding] = []
    for role in saved.roles:
        run = role_run(saved, role, whole)
        if run is None:
            findings.append(Finding(Verdict.ERROR, "not measured (the run stopped first)", role))
            continue
        if run.error is not None:
            hint = run.error.hint
            text = run.error.message if not hint else f"{run.error.message} ({hint})"
            lost = role == "candidate" and run.error.missing_tool and not _missing_elsewhere(saved)
            findings.append(Finding(Verdict.FAIL if lost else Verdict.ERROR, text, role))
            continue
        if failed_run_fails and not run.ok:
            verdict = Verdict.FAIL if role == "candidate" else Verdict.ERROR
            tail = "\n".join(run.output_tail[-8:])
            findings.append(Finding(verdict, f"command {run.outcome}\n{tail}".rstrip(), role))
    return findings


def role_run(saved: SavedCheck, role: str, whole: type[R] | None = None) -> R | RoleRun | None:
    """How the role's run went, from its measurement (None: not measured): the whole
    measurement as `whole`, or the run's part of it."""
    if whole is not None:
        return saved.measured(role, whole)
    m = saved.measurement(role)
    return None if m is None else RoleRun.of(m, saved.role_dir(role) / "measurement.json")


def _missing_elsewhere(saved: SavedCheck) -> bool:
    """Whether a baseline role lacked a tool too: then the machine or the plan lacks it (ERROR),
    not the candidate's build (FAIL, as when a shell reports the same tool not found)."""
    for role in saved.roles:
        run = role_run(saved, role) if role != "candidate" else None
        if run is not None and run.error is not None and run.error.missing_tool:
            return True
    return False
