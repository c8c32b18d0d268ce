"""What a reviewer reads first: the verdict line, the reasons that decide it, the toolchain
change and the source, and each stage's one line of why — all derived from the stage and check
views, so they say no more than was decided.

- The verdict line names every gated stage that kept the run from a plain result: failed,
  errored, undecided (INCONCLUSIVE, also when the plan counts it as WARN), or not run; then the
  stages the plan declares not applicable, with the reason. A run QUALIFIED with its bench
  undecided reads "QUALIFIED — bench undecided"; one without a server "QUALIFIED — serving,
  soak not applicable: no server".
- The reasons are the failing (or undecided) checks' own reasons, the decisive ones first; WARNs
  and results past a failed gate follow as things to read, never as reasons.
- A stage rerun under a plan other than the one the run was made with (`--allow-dirty`) is named
  in the verdict line ("QUALIFIED — bench run under a changed plan") and in the source line,
  with the revision it ran at: its result is never shown under the run's revision alone.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from qualify.core.errors import RunStoreError
from qualify.core.runstore import RunDir
from qualify.core.verdicts import LEFT_OUT
from qualify.records.build import BuildSource, read_source

if TYPE_CHECKING:
    from qualify.records.provenance import RecordedGit
    from qualify.report.views import CheckView, StageView

#: Outcomes that decided against the run, as the verdict line words them.
_AGAINST = {"FAIL": "failed", "ERROR": "could not be judged (ERROR)", "INCONCLUSIVE": "undecided"}
#: Outcomes of a stage that did not run to a verdict.
_NOT_RUN = ("BLOCKED", "NOT RUN", "INTERRUPTED", "STALE", "SKIPPED", "NOT CONFIGURED", "RUNNING")
_FAILED_CHECK = ("FAIL", "ERROR", "INCONCLUSIVE")
#: Toolchain components as a reviewer names them.
_COMPONENT_NAMES = {
    "cuda_nvcc": "CUDA",
    "cudatoolkit": "CUDA toolkit",
    "rocm-core": "ROCm",
    "gcc": "GCC",
    "clang-rocm": "ROCm clang",
    "llvm-rocm": "ROCm LLVM",
}


def plural(n: int, word: str, words: str | None = None) -> str:
    """'1 check', '2 checks' (never 'check(s)')."""
    return f"{n} {word if n == 1 else (words or word + 's')}"


def undecided(stage: StageView) -> bool:
    """The stage could not decide: INCONCLUSIVE, or a check of it was and the plan counts that
    as WARN (`inconclusive = "warn"`)."""
    return stage.outcome == "INCONCLUSIVE" or (
        stage.outcome in ("PASS", "WARN") and any(c.verdict == "INCONCLUSIVE" for c in stage.checks)
    )


def stage_qualifier(stage: StageView) -> str | None:
    """How the verdict line names this stage ("bench undecided"), None when it passed plainly."""
    if undecided(stage):
        return f"{stage.name} undecided"
    if stage.outcome in _AGAINST:
        return f"{stage.name} {_AGAINST[stage.outcome]}"
    if stage.reason == LEFT_OUT:
        return f"{stage.name} left out"
    if stage.outcome in _NOT_RUN:
        return f"{stage.name} {stage.outcome.lower()}"
    return None


def verdict_note(stages: Iterable[StageView], verdict: str = "") -> str:
    """What the verdict line adds to the verdict: every gated stage that did not plainly pass,
    then the stages the plan declares not applicable with their reasons ("serving, soak not
    applicable: no server"), so no reader takes a run that skipped them for one that passed
    them. An INCOMPLETE run with nothing else to name measured nothing beyond the build."""
    stages = list(stages)
    named = ", ".join(q for s in stages if not s.ungated and (q := stage_qualifier(s)))
    if not named and verdict == "INCOMPLETE":
        named = "no stage but the build measured the engine"
    return "; ".join(part for part in (named, changed_plans(stages), *not_applicable_groups(stages)) if part)


def changed_plans(stages: Iterable[StageView]) -> str:
    """The stages run under a plan other than the run's ("numerics, bench run under a changed
    plan"), empty when none was."""
    names = [s.name for s in stages if s.changed_plan]
    return f"{', '.join(names)} run under a changed plan" if names else ""


def ran_under(stage: StageView) -> str:
    """The plan and revision a stage ran under, as printed: "plan 1a2b3c4d5e6f at git
    0123456789ab (dirty tree)"; empty when its attempt recorded none."""
    if stage.plan_digest is None:
        return ""
    where = f"git {stage.revision[:12]}" if stage.revision else "no git revision"
    return f"plan {stage.plan_digest[:12]} at {where}" + (" (dirty tree)" if stage.dirty else "")


def members_note(members: Iterable[tuple[str, str, str, list[StageView]]], verdict: str) -> str:
    """A set's or a fleet's verdict note from its members' (key, verdict, note, stages): what
    kept each member that did not qualify from it ("clang19: soak not configured"), when the
    whole did not qualify; then the stages declared not applicable, once each."""
    parts = []
    groups: list[str] = []
    for key, member_verdict, note, stages in members:
        own = not_applicable_groups(stages)
        groups += [g for g in own if g not in groups]
        # A stage run under a changed plan is named for every member, by the set's own note.
        open_ = "; ".join(p for p in note.split("; ") if p not in own and p != changed_plans(stages))
        if verdict != "QUALIFIED" and member_verdict != "QUALIFIED" and open_:
            parts.append(f"{key}: {open_}")
    return "; ".join([*parts, *groups])


def not_applicable_groups(stages: Iterable[StageView]) -> list[str]:
    """The stages declared not applicable, those with one reason together, in stage order."""
    by_reason: dict[str, list[str]] = {}
    for stage in stages:
        if stage.outcome == "NOT APPLICABLE":
            by_reason.setdefault(stage.reason, []).append(stage.name)
    return [f"{', '.join(names)} not applicable: {why}" for why, names in by_reason.items()]


def stage_why(stage: StageView) -> str:
    """The stage's one line: its deciding check's reason, or what its checks did."""
    if not stage.checks or stage.outcome in _NOT_RUN:
        return stage.reason
    if undecided(stage) and stage.outcome != "INCONCLUSIVE":
        open_checks = [c for c in stage.checks if c.verdict == "INCONCLUSIVE"]
        return f"undecided, counted as {stage.outcome} by the plan — {_first(open_checks, stage)}"
    deciding = [c for c in stage.checks if c.verdict == stage.outcome]
    if stage.outcome == "PASS" or not deciding:
        if len(stage.checks) == 1:
            return stage.checks[0].reason or f"{stage.checks[0].name} {stage.checks[0].verdict}"
        verdicts = ", ".join(f"{c.name} {c.verdict}" for c in stage.checks)
        return f"{plural(len(stage.checks), 'check')}: {verdicts}"
    return _first(deciding, stage)


def _first(checks: list[CheckView], stage: StageView) -> str:
    first = checks[0]
    others = len(checks) - 1
    more = f" (and {plural(others, 'other check')} {first.verdict})" if others else ""
    return (f"{first.name}: {first.reason}" if len(stage.checks) > 1 else first.reason) + more


def reasons(stages: Iterable[StageView]) -> tuple[list[str], list[str]]:
    """(what decides the verdict, what else a reviewer should read), one line each."""
    deciding: list[str] = []
    to_read: list[str] = []
    ungated: list[str] = []
    for stage in stages:
        if stage.ungated:
            late = " (undecided)" if undecided(stage) and stage.outcome != "INCONCLUSIVE" else ""
            ungated.append(f"{stage.name} {stage.outcome}{late}")
            continue
        if stage.outcome in _NOT_RUN:
            if stage.configured or stage.outcome == "NOT CONFIGURED":
                deciding.append(f"{stage.name} {stage.outcome.lower()}: {stage.reason}")
            continue
        for check in stage.checks:
            line = f"{stage.name} · {check.name}: {check.reason}"
            if check.verdict in _FAILED_CHECK:
                deciding.append(line + ("" if check.verdict != "INCONCLUSIVE" else " (undecided)"))
            elif check.verdict == "WARN":
                to_read.append(line)
        if stage.outcome in _AGAINST and not any(c.verdict in _FAILED_CHECK for c in stage.checks):
            deciding.append(f"{stage.name}: {stage.reason}")
    if ungated:
        to_read.append("Ran past the failed gate (--no-gate), not counted: " + ", ".join(ungated) + ".")
    return deciding, to_read


#: How the toolchain table shows a component a build's closure does not hold.
_ABSENT = "—"


def toolchain_delta(stages: Iterable[StageView]) -> list[str]:
    """The build stage's toolchain table as 'CUDA 13.0.88 → 13.5.37', changed components only
    ('unchanged: …' when none changed)."""
    for stage in stages:
        for check in stage.checks:
            for table in check.tables:
                if not table.title.startswith("Toolchain"):
                    continue
                columns = list(table.columns)
                if "pinned" not in columns or "candidate" not in columns:
                    continue
                p, c = columns.index("pinned"), columns.index("candidate")
                changed, same, gone, came = [], [], [], []
                for row in table.rows:
                    name = _COMPONENT_NAMES.get(str(row[0]), str(row[0]))
                    if row[p] == row[c]:
                        same.append(f"{name} {row[p]}")
                    elif row[c] == _ABSENT:
                        gone.append(f"{name} {row[p]}")
                    elif row[p] == _ABSENT:
                        came.append(f"{name} {row[c]}")
                    else:
                        changed.append(f"{name} {row[p]} → {row[c]}")
                # A component on one side only is named on that side ("GCC 12.2.0 → clang
                # 19.1.7"), never as a version moving to or from a dash.
                if gone and came:
                    changed.append(f"{', '.join(gone)} → {', '.join(came)}")
                elif gone:
                    changed.append(f"{', '.join(gone)} dropped")
                elif came:
                    changed.append(f"{', '.join(came)} added")
                if changed:
                    return changed
                return [f"toolchain unchanged ({', '.join(same)})"] if same else []
    return []


def source_line(run: RunDir, git: RecordedGit, stages: Iterable[StageView]) -> str:
    """Where the source came from: the git revision, else the flake's revision or content
    hash (narHash) as the build stage locked it, else 'unknown'; then each stage that ran under
    a changed plan, with the plan and the revision it ran under."""
    stages = list(stages)
    changed = "".join(
        f"; {s.name} ran under a changed plan, {ran_under(s)}" for s in stages if s.changed_plan
    )
    if git.rev:
        return f"git {git.rev[:12]}" + (" (dirty tree)" if git.dirty else "") + changed
    return _locked_line(run, stages) + changed


def _locked_line(run: RunDir, stages: Iterable[StageView]) -> str:
    """The source as the build stage locked it, for a project that is not a git checkout."""
    locked = _locked_source(run, stages)
    if locked is not None and locked.revision:
        return f"flake revision {locked.revision[:12]}"
    # narHash is base64 (`+`, `/`): read it as written, not as a form-encoded query.
    query = urlsplit(locked.locked_url if locked is not None else "").query
    nar_hash = next((part[len("narHash=") :] for part in query.split("&") if part.startswith("narHash=")), "")
    if nar_hash:
        return f"flake narHash {unquote(nar_hash)[:19]}… (not a git checkout)"
    return "unknown (not a git checkout)"


def _locked_source(run: RunDir, stages: Iterable[StageView]) -> BuildSource | None:
    """The flake as the build stage resolved it; None when it could not, or did not."""
    for stage in stages:
        if stage.folder is None:
            continue
        for check in stage.checks:
            path = Path(run.stage_dir(stage.folder)) / check.name / "source.json"
            if check.kind == "nix-build" and path.is_file():
                try:
                    source = read_source(path)
                except RunStoreError:
                    return None
                return source if isinstance(source, BuildSource) else None
    return None
