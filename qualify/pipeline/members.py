"""The members of a run set: the candidates of one qualification and the controls run with them.

A run with several `--candidate`s, or a project that declares `[controls]`, is a run set: one
folder holding an ordinary run per member, named by the member's label. Pinned and reference
are the same arms in every member; each member's candidate role is its own arm.

- a candidate is qualified against pinned, as in a run of one;
- a positive control (`positive = ["pinned"]`, an A/A) must pass every stage: a gate that fails
  it cannot tell a change from noise;
- a negative control (`negative = { kvq4 = ["numerics"] }`) runs the stages that build arms and
  the stages named, and must FAIL each named one: a gate that passes it cannot see the change it
  is there to catch.

Statistical checks split their family-wise `alpha` evenly over the members that run their
stage (Bonferroni across members; each member's tests keep Holm's steps within its share), so
the chance that any member of the set sees a false alarm stays at the plan's `alpha`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from qualify.checks.base import ROLES
from qualify.checks.registry import kind_named
from qualify.core.config import ProjectConfig
from qualify.core.errors import ConfigError, UsageError
from qualify.core.labels import MAX_LENGTH, RESERVED, duplicate, label_problem
from qualify.core.tomlfile import suggest
from qualify.core.verdicts import RunVerdict, StageState, Verdict
from qualify.pipeline.plan import Plan, StageSpec
from qualify.records.run import Member

_SAFE = re.compile(r"[^A-Za-z0-9._-]")


def members_for(
    config: ProjectConfig, plan: Plan, candidates: Iterable[str], *, controls: bool = True
) -> list[Member]:
    """The candidates given on the command line, then the project's controls (unless
    `controls` is off), each checked against the arms and the plan before anything runs."""
    members: list[Member] = []
    for arm in candidates:
        config.arm(arm, role="candidate")
        if any(m.arm == arm for m in members):
            raise UsageError(f"--candidate {arm} is given twice", "name each candidate once")
        members.append(Member(_candidate_label(arm), arm, "candidate"))
    if controls:
        for arm in config.controls.positive:
            members.append(Member(f"positive-{_safe(arm)}", arm, "positive"))
        names = [s.name for s in plan.stages]
        for arm, stages in config.controls.negative.items():
            for name in stages:
                if name in (declared := {n.name: n.reason for n in plan.not_applicable}):
                    raise ConfigError(
                        f"{config.path}: controls.negative.{arm} names stage {name!r}, which the plan "
                        f"declares not applicable ({declared[name]}): a control cannot fail what never runs",
                        "name a stage the plan runs: " + ", ".join(names),
                    )
                if name not in names:
                    raise ConfigError(
                        f"{config.path}: controls.negative.{arm} names stage {name!r}, which the plan "
                        f"{'(profile ' + plan.profile + ') ' if plan.profile else ''}has not"
                        f"{suggest(name, names)}",
                        "stages in this plan: " + ", ".join(names),
                    )
            members.append(Member(f"negative-{_safe(arm)}", arm, "negative", tuple(stages)))
    for m in members:
        _check_label(config, m)
    twice = duplicate(m.label for m in members)
    if twice is not None:
        arms = [m.arm for m in members if m.label.lower() == twice.lower()]
        raise ConfigError(
            f"{config.path}: arms {' and '.join(repr(a) for a in arms)} would both be the member "
            f"{twice!r} of the run set (one folder)",
            "rename one of the arms in qualify.toml, or leave the control out with --no-controls",
        )
    return members


def _check_label(config: ProjectConfig, member: Member) -> None:
    """A member's label names its folder in the set: refused here, before anything runs, when
    it could not (`..`, a stage's folder, a name the run folder already uses)."""
    problem = label_problem(member.label)
    if problem is not None:
        named = f"as {member.label!r} " if member.label != member.arm else ""
        raise ConfigError(
            f"{config.path}: arm {member.arm!r} cannot be a member of a run set: its folder "
            f"{named}would be a path qualify cannot use: {problem}",
            f"rename the arm in qualify.toml ([arms.NAME]): letters, digits, . _ -, not starting "
            f"with . or -, at most {MAX_LENGTH} characters, not a stage folder like 10-build nor "
            "one of " + ", ".join(sorted(RESERVED)),
        )


def _safe(name: str) -> str:
    """An arm's name as a folder name: every character outside letters, digits, `._-` is `_`
    (what is left is then checked, not changed: `..` stays `..` and is refused)."""
    return _SAFE.sub("_", name)


def _candidate_label(arm: str) -> str:
    """A candidate's folder: its arm's name, unless that is a role's (the set's shared folders
    are named by role: `--candidate pinned` is the member candidate-pinned)."""
    safe = _safe(arm)
    return f"candidate-{safe}" if safe.lower() in (*ROLES, "pinned.2") else safe


def runs_stage(member: Member, stage: StageSpec) -> bool:
    """A negative control runs only the stages that build arms and the stages it must fail."""
    if member.role != "negative":
        return True
    return stage.name in member.must_fail or any(kind_named(c.kind, c.name).builds_arms for c in stage.checks)


def member_plan(plan: Plan, member: Member, members: list[Member]) -> Plan:
    """The plan as `member` runs it: a negative control's stages only, and every statistical
    check's `alpha` split over the members that run its stage."""
    stages = []
    for stage in plan.stages:
        if not runs_stage(member, stage):
            continue
        sharing = sum(runs_stage(m, stage) for m in members)
        stages.append(_split_alpha(stage, sharing))
    return replace(plan, stages=tuple(stages))


def _split_alpha(stage: StageSpec, sharing: int) -> StageSpec:
    if sharing <= 1:
        return stage
    checks = []
    for spec in stage.checks:
        check = spec
        kind = kind_named(check.kind, check.name)
        if any(p.name == "alpha" for p in kind.params) and check.params.get("alpha") is not None:
            alpha = float(check.params["alpha"])
            params = {
                **check.params,
                "alpha": alpha / sharing,
                "alpha_family": alpha,
                "alpha_shared_by": sharing,
            }
            check = replace(check, params=params)
        checks.append(check)
    return replace(stage, checks=tuple(checks))


@dataclass(frozen=True)
class Behaviour:
    """Whether a control did what it is there for, and why not."""

    behaved: bool | None  # None: not known yet (a stage not finished, not measured)
    why: str


def behaviour(
    member: Member, outcomes: Mapping[str, Verdict | StageState], undecided: Iterable[str] = ()
) -> Behaviour:
    """A control's behaviour from its stage outcomes (`outcomes` holds the member's stages;
    `undecided` names those that passed only because the plan counts INCONCLUSIVE as WARN)."""
    if member.role == "positive":
        bad = {n: o for n, o in outcomes.items() if o in (Verdict.FAIL, Verdict.INCONCLUSIVE)}
        if bad:
            what = ", ".join(f"{n} {o.value}" for n, o in bad.items())
            return Behaviour(False, f"the gate could not tell: the positive control {member.arm} got {what}")
        unknown = {n: o for n, o in outcomes.items() if o not in (Verdict.PASS, Verdict.WARN)}
        if unknown:
            what = ", ".join(f"{n} {o.value}" for n, o in unknown.items())
            return Behaviour(None, f"the positive control {member.arm} was not judged throughout ({what})")
        open_ = [n for n in outcomes if n in set(undecided)]
        if open_:
            # It behaved as far as the plan asks, but a stage that decided nothing is not one
            # it passed: the sentence says so.
            passed = [n for n in outcomes if n not in open_]
            return Behaviour(
                True,
                f"the positive control {member.arm} passed {', '.join(passed) or 'no stage'}; "
                f"{', '.join(open_)} decided nothing (INCONCLUSIVE, counted as WARN by the plan)",
            )
        return Behaviour(True, f"the positive control {member.arm} passed every stage")
    if member.role == "negative":
        slipped = {n: outcomes.get(n) for n in member.must_fail if outcomes.get(n) in _SLIPPED}
        if slipped:
            what = ", ".join(f"{n} {o.value if o else '?'}" for n, o in slipped.items())
            return Behaviour(
                False, f"the gate could not tell: the negative control {member.arm} was not caught ({what})"
            )
        pending = [(n, outcomes.get(n)) for n in member.must_fail if outcomes.get(n) is not Verdict.FAIL]
        if pending:
            what = ", ".join(f"{n} {o.value if o else 'NOT RUN'}" for n, o in pending)
            return Behaviour(None, f"the negative control {member.arm} was not judged ({what})")
        return Behaviour(
            True, f"the negative control {member.arm} failed {', '.join(member.must_fail)} as it must"
        )
    return Behaviour(None, "")


#: Outcomes of a stage a negative control must fail that show the gate let it through.
_SLIPPED = (Verdict.PASS, Verdict.WARN, Verdict.INCONCLUSIVE, Verdict.SKIPPED)


def set_verdict(
    verdicts: Mapping[str, RunVerdict | None], behaviours: Mapping[str, Behaviour], members: list[Member]
) -> tuple[RunVerdict, str]:
    """The set's verdict: QUALIFIED only when every candidate is and every control behaved.

    A control that misbehaved makes it NOT QUALIFIED whatever the candidates did (their PASS
    proves nothing on that day); a control not judged leaves it INCOMPLETE at best.
    """
    misbehaved = [b.why for m in members if (b := behaviours.get(m.label)) is not None and b.behaved is False]
    if misbehaved:
        return RunVerdict.NOT_QUALIFIED, "; ".join(misbehaved)
    candidates = [m for m in members if m.role == "candidate"]
    failed = [m.label for m in candidates if verdicts.get(m.label) is RunVerdict.NOT_QUALIFIED]
    if failed:
        return RunVerdict.NOT_QUALIFIED, "not qualified: " + ", ".join(failed)
    unknown = [m.label for m in candidates if verdicts.get(m.label) is not RunVerdict.QUALIFIED]
    unknown += [m.label for m in members if m.is_control and behaviours[m.label].behaved is not True]
    if unknown:
        return RunVerdict.INCOMPLETE, "not decided: " + ", ".join(unknown)
    return RunVerdict.QUALIFIED, "every candidate qualified and every control behaved"
