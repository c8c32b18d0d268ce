"""The `pin-move` kind's measure and judge (`qualify.distribution.kind` says what it proves).

Whether the move is due is decided from the run's files as they are when the check runs (the
stages before it, by the rule the run verdict uses), so that `--no-gate` cannot make a patch of
a run that failed a stage. The move itself is made in a clean clone of the run's revision, never
in the project's tree, and proved by evaluating the pinned arm's installable in the patched clone.
"""

from __future__ import annotations

from pathlib import Path

from qualify.checks.base import CANDIDATE, PINNED, Finding, Judgement, SavedCheck
from qualify.checks.figures import Table
from qualify.checks.findings import headline, worst
from qualify.core import process
from qualify.core.containment import lending
from qualify.core.context import CheckContext
from qualify.core.errors import PlaceholderError, QualifyError
from qualify.core.runstore import write_atomic
from qualify.core.verdicts import LEFT_OUT, RunVerdict, StageState, Verdict, run_verdict
from qualify.distribution import gitmove
from qualify.distribution.built import Built, built, candidate_overrides
from qualify.distribution.nixstore import DEFAULT_TIMEOUT_S, Nix, scratch
from qualify.distribution.params import PinMoveParams
from qualify.records.distribution import PinMoveFacts, PinMoveMeasurement, StageSeen, Step, checked

PATCH = "pin-move.patch"


def measure(ctx: CheckContext) -> None:
    params = PinMoveParams.of(ctx.spec)
    folder = ctx.role_dir(CANDIDATE)
    earlier = [StageSeen(name=s.name, outcome=s.outcome, reason=s.reason) for s in ctx.earlier()]
    verdict = _verdict(earlier)
    seen = PinMoveMeasurement(
        earlier=earlier, earlier_verdict=verdict.value, allow_unqualified=params.allow_unqualified
    )
    try:
        measurement = _measure(ctx, params, seen, verdict, folder)
    except (QualifyError, PlaceholderError) as exc:
        measurement = seen.model_copy(update={"error": str(exc)})
    ctx.save(CANDIDATE, checked(measurement))


def _verdict(earlier: list[StageSeen]) -> RunVerdict:
    """What the stages before make of the run, by the run verdict's own rule."""
    outcomes: dict[str, Verdict | StageState] = {}
    for stage in earlier:
        outcome = stage.outcome
        outcomes[stage.name] = Verdict(outcome) if outcome in set(Verdict) else StageState(outcome)
    return run_verdict(outcomes, list(outcomes))


def _measure(
    ctx: CheckContext, params: PinMoveParams, seen: PinMoveMeasurement, verdict: RunVerdict, folder: Path
) -> PinMoveMeasurement:
    if verdict is not RunVerdict.QUALIFIED and params.allow_unqualified is None:
        open_ = [
            f"{s.name} left out (--stage)" if s.reason == LEFT_OUT else f"{s.name} {s.outcome}"
            for s in seen.earlier
            if s.outcome not in ("PASS", "WARN", "NOT APPLICABLE")
        ]
        said = ", ".join(open_) or "nothing measured the engine"
        why = f"the stages before it did not qualify the candidate ({verdict.value}: {said})"
        return seen.model_copy(update={"skipped": why})
    record = built(ctx)
    pinned = record.role(PINNED)
    if pinned is not None and pinned.arm == record.candidate.arm:
        return seen.model_copy(
            update={"skipped": "the candidate is the pinned arm: an A/A run has no pin to move"}
        )
    if ":" in ctx.config.flake:
        raise QualifyError(
            f"the flake {ctx.config.flake} is not the project's checkout: the move is made in a clone of it"
        )
    flake_dir = (ctx.config.root / ctx.config.flake).resolve()
    top = gitmove.toplevel(flake_dir)
    revision = record.source.revision or gitmove.head(top)
    if revision is None:
        raise QualifyError(f"{top} has no commit to make the move against")
    log = ctx.log(CANDIDATE, "move")
    with scratch("pin-move") as work:
        git = gitmove.clone(top, revision, work / "repo", log, ctx.echo)
        workdir = work / "repo" / flake_dir.relative_to(top)
        how, step = _move(ctx, params, workdir, work / "repo")
        if not step.ok:
            return seen.model_copy(
                update={
                    "revision": revision,
                    "how": how,
                    "command": step,
                    "error": f"the move failed: {step.error}",
                }
            )
        message = _message(ctx, seen, record, revision)
        files = gitmove.commit(git, message, gitmove.identity(top))
        if not files:
            return seen.model_copy(
                update={
                    "revision": revision,
                    "how": how,
                    "command": step,
                    "error": "the move changed no file",
                }
            )
        write_atomic(folder / PATCH, gitmove.format_patch(git).encode("utf-8"))
        default_drv, evaluation_error = _evaluate(ctx, record, workdir)
    return seen.model_copy(
        update={
            "revision": revision,
            "dirty": record.source.dirty,
            "how": how,
            "command": step,
            "patch": f"{CANDIDATE}/{PATCH}",
            "files": files,
            "candidate_drv": record.candidate.drv,
            "default_drv": default_drv,
            "evaluation_error": evaluation_error,
        }
    )


def _move(ctx: CheckContext, params: PinMoveParams, workdir: Path, clone_root: Path) -> tuple[str, Step]:
    """Make the move in the clone: the plan's command, or the candidate's input overrides locked."""
    nix = Nix.of_check(ctx, ctx.env(CANDIDATE))
    if params.run is not None:
        argv = ctx.argv(params.run, CANDIDATE, project=str(workdir))
        # The plan's command runs as the checked commands do: the clone is lent to their user.
        with lending(clone_root):
            done = process.run(
                argv, log=ctx.log(CANDIDATE, "move-command"), env=ctx.env(CANDIDATE), cwd=workdir,
                timeout_s=ctx.spec.timeout_s or DEFAULT_TIMEOUT_S, echo=ctx.echo,
            )  # fmt: skip
        said = " / ".join(line.strip() for line in done.output_tail[-4:] if line.strip())
        return params.run, Step(
            ok=done.ok,
            seconds=round(done.duration_s, 3),
            error=None if done.ok else f"{done.describe()}: {said}",
        )
    overrides = candidate_overrides(ctx)
    if not overrides:
        raise QualifyError(
            "nothing says how to move the pin: the candidate overrides no flake input",
            "give the pin-move check a `run` command that makes the candidate the default in the "
            "project's files (it runs in a clean clone of the run's revision)",
        )
    argv = [
        "nix",
        "flake",
        "lock",
        str(workdir),
        *[a for n, r in overrides for a in ("--override-input", n, r)],
    ]
    step, _ = nix.run(argv, "move-lock")
    return "nix flake lock " + " ".join(f"--override-input {n} {r}" for n, r in overrides), step


def _evaluate(ctx: CheckContext, record: Built, workdir: Path) -> tuple[str | None, str | None]:
    """The derivation the pinned arm's installable is in the patched clone, or why not known."""
    pinned = record.role(PINNED)
    if pinned is None or pinned.arm not in ctx.config.arms:
        return None, "the pinned arm's build is not recorded"
    arm = ctx.config.arms[pinned.arm]
    if not arm.installable.startswith(".#"):
        return None, f"the pinned arm's installable {arm.installable} is not from the project's flake"
    nix = Nix.of_check(ctx, ctx.env(CANDIDATE))
    argv = ["nix", "path-info", "--derivation", f"{workdir}{arm.installable[1:]}", *arm.nix_args]
    step, out = nix.run(argv, "default-after")
    return (out.strip() or None, None) if step.ok else (None, step.error)


def _message(ctx: CheckContext, seen: PinMoveMeasurement, record: Built, revision: str) -> str:
    """The patch's message: what moves, and the qualification that allowed it."""
    candidate = record.candidate
    lines = [
        f"Move the pin to {candidate.arm} ({candidate.installable})",
        "",
        f"qualify run {ctx.run_dir.name} at {revision[:12]}: {seen.earlier_verdict} before this stage.",
        "",
        *[f"- {s.name}: {s.outcome}" + (f" ({s.reason})" if s.reason else "") for s in seen.earlier],
        "",
        f"The candidate's build: {candidate.out}",
    ]
    if seen.earlier_verdict != RunVerdict.QUALIFIED.value:
        lines += ["", f"WRITTEN WITHOUT QUALIFICATION (allow_unqualified): {seen.allow_unqualified}"]
    return "\n".join(lines) + "\n"


def judge(saved: SavedCheck) -> Judgement:
    m = saved.measured(CANDIDATE, PinMoveMeasurement)
    if m is None:
        return Judgement(Verdict.ERROR, "the move was not measured (the run stopped first)")
    if m.skipped is not None:
        return Judgement(Verdict.SKIPPED, f"no patch: {m.skipped}")
    if m.error is not None:
        return Judgement(Verdict.ERROR, m.error, tables=(_table(m),))
    findings: list[Finding] = []
    limits: list[str] = []
    judged = [f"the patch written: {len(m.files)} files changed ({', '.join(m.files[:5])})"]
    unqualified = m.earlier_verdict != RunVerdict.QUALIFIED.value
    if unqualified:
        said = (
            f"WRITTEN WITHOUT QUALIFICATION: the stages before are {m.earlier_verdict}; "
            f"allow_unqualified: {m.allow_unqualified}"
        )
        findings.append(Finding(Verdict.WARN, said, CANDIDATE))
        limits.append(
            f"the pin's patch was written although the stages before it are {m.earlier_verdict} "
            f"({m.allow_unqualified})"
        )
    else:
        judged.insert(0, "every stage before it qualified the candidate")
    if m.dirty:
        findings.append(
            Finding(
                Verdict.WARN,
                f"the run's tree had uncommitted changes: the patch is against {m.revision}, "
                "not what was built",
            )
        )
    if m.default_drv is not None and m.default_drv == m.candidate_drv:
        judged.append("after the patch the pinned installable is the candidate's derivation")
    else:
        what = m.evaluation_error or f"it is {m.default_drv}, not the candidate's {m.candidate_drv}"
        findings.append(
            Finding(
                Verdict.WARN,
                f"after the patch the pinned installable is not shown to be the candidate: {what}",
            )
        )
    facts = PinMoveFacts(
        written=True,
        patch=m.patch,
        files=m.files,
        unqualified=m.allow_unqualified if unqualified else None,
        limits_of_evidence=limits,
    )
    verdict = worst(findings)
    ok = f"{m.patch} written: the candidate becomes the default ({len(m.files)} files)"
    return Judgement(
        verdict, headline(verdict, findings, ok), tuple(findings), (_table(m),), facts, judged=tuple(judged)
    )


def _table(m: PinMoveMeasurement) -> Table:
    rows: list[list[str | int | float | None]] = [[s.name, s.outcome] for s in m.earlier]
    rows += [
        ["(the stages before)", m.earlier_verdict],
        ["move", m.how or ""],
        ["patch", m.patch or "not written"],
    ]
    if m.default_drv or m.candidate_drv:
        rows.append(["pinned installable after it", m.default_drv or m.evaluation_error or ""])
        rows.append(["candidate's derivation", m.candidate_drv or ""])
    title = f"The pin's move (from {(m.revision or '?')[:12]})"
    return Table(title=title, columns=("", ""), rows=tuple(tuple(r) for r in rows))
