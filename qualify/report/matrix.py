"""The report of a run set: a matrix of stages × members at the top, then a section per member.

Each member is an ordinary run with its own full report (`<label>/report.html`); the set's
report puts their stage outcomes side by side (each cell links to the member's section of that
stage), says whether the controls behaved, and lists what the set's evidence does not prove.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from qualify import __version__
from qualify.core.runstore import SCHEMA_VERSION, RunDir
from qualify.pipeline.ondisk import set_on_disk
from qualify.pipeline.stageorder import with_default_order
from qualify.records import seal
from qualify.records.run import Member, RunRecord, StageEntry
from qualify.report.headline import changed_plans, members_note
from qualify.report.model import ReportModel, VerdictView, build_model, protection_missing
from qualify.report.views import with_shared

#: A stage a member does not run (a negative control runs only what it must fail).
NOT_IN_PLAN = "—"


@dataclass(frozen=True)
class Cell:
    outcome: str
    reason: str
    href: str | None = None
    #: What a control must show at this stage ("must FAIL", "must pass"), None for a candidate.
    expected: str | None = None
    #: The stage decided nothing here (INCONCLUSIVE, or counted as WARN by the plan).
    undecided: bool = False


@dataclass(frozen=True)
class Column:
    key: str  # the member's label (a folder name)
    title: str
    role: str  # candidate, positive control, negative control
    arm: str
    verdict: str
    #: A control's behaviour: True behaved, False did not, None not known; None for candidates.
    behaved: bool | None
    note: str
    href: str


@dataclass(frozen=True)
class MatrixModel(VerdictView):
    schema_version: int
    qualify_version: str
    kind: str
    run_id: str
    status: str
    verdict: str
    verdict_reason: str
    created_at: str
    finished_at: str | None
    profile: str | None
    pinned: dict[str, Any]
    source: dict[str, Any]
    host: dict[str, Any]
    gpus: list[dict[str, Any]]
    stages: list[str]
    columns: list[Column]
    #: cells[stage][column key]
    cells: dict[str, dict[str, Cell]]
    controls_line: str | None
    members: list[ReportModel]
    not_proven: list[str] = field(default_factory=list)
    #: What kept the verdict from a plain one ("bench undecided"), empty when nothing did.
    verdict_note: str = ""
    #: What did not protect the set's records from its commands (as `ReportModel.unprotected`).
    unprotected: list[str] = field(default_factory=list)

    @property
    def candidates(self) -> list[Column]:
        return [c for c in self.columns if c.role == "candidate"]


def build_set_model(run: RunDir) -> MatrixModel:
    saved = RunRecord.load(run)
    # Every verdict and behaviour derived from the members' folders now, never member_results.
    derived = set_on_disk(run, saved)
    members = [f.member for f in derived.members if f.run is not None]
    results = {f.member.label: f.behaviour for f in derived.members}
    # A member's check that read the set's one measurement shows that measurement's time.
    models = {m.label: _member_model(run.path / m.label) for m in members}
    plans = {m.label: RunRecord.load(RunDir(run.path / m.label)).stages for m in members}
    # A stage of the default order the plan leaves out or declares not applicable is a row too:
    # it is what keeps the set INCOMPLETE, or what it qualified without.
    stages = with_default_order([s.name for s in saved.stages])
    columns: list[Column] = []
    cells: dict[str, dict[str, Cell]] = {name: {} for name in stages}
    for m in members:
        model, result = models[m.label], results[m.label]
        behaved = result.behaved if m.is_control else None
        columns.append(
            Column(
                m.label,
                m.label,
                m.title,
                m.arm,
                model.verdict,
                behaved,
                _behaviour_words(m, model, result.why),
                f"{m.label}/report.html",
            )
        )
        # A negative control runs only the stages it must fail: the others are not its plan's.
        own = {s.name: s for s in model.stages if s.configured or m.role != "negative"}
        for name in stages:
            expected = _expected(m, name)
            stage = own.get(name)
            if stage is None:
                cells[name][m.label] = Cell(NOT_IN_PLAN, "not in this control's plan", None, expected)
            else:
                href = f"{m.label}/report.html#stage-{name}"
                if stage.outcome == "NOT APPLICABLE":
                    expected = None  # the engine has no such stage: nothing there to pass or fail
                cells[name][m.label] = Cell(stage.outcome, stage.why, href, expected, stage.undecided)
    controls = [c for c in columns if c.role != "candidate"]
    controls_line = None
    if controls:
        state = derived.controls_behaved
        head = {True: "Controls behaved", False: "Controls did NOT behave", None: "Controls not judged yet"}[
            state
        ]
        controls_line = f"{head}: " + "; ".join(c.note or f"{c.title} {c.arm}: not judged" for c in controls)
    undecided = _undecided(members, models)
    first = next(iter(models.values()), None)
    pinned = first.role("pinned") if first else None
    return MatrixModel(
        schema_version=SCHEMA_VERSION,
        qualify_version=__version__,
        kind="set",
        run_id=run.run_id,
        status=derived.status,
        verdict=derived.verdict.value,
        verdict_reason=_reason_shown(derived.verdict.value, derived.reason, undecided),
        created_at=saved.created_at,
        finished_at=saved.finished_at,
        profile=saved.profile,
        pinned={"arm": pinned.arm, "installable": pinned.installable} if pinned else {},
        source=saved.git.as_json(),
        host=saved.host.as_json(),
        gpus=[g.as_json() for g in saved.gpus],
        stages=stages,
        columns=columns,
        cells=cells,
        controls_line=controls_line,
        members=list(models.values()),
        verdict_note=_verdict_note(derived.verdict.value, undecided, members, models),
        unprotected=protection_missing(saved) + _seal_unverified(run),
        not_proven=_not_proven(members, models, plans, derived.controls_behaved)
        + [f"{f.member.label}: not created ({f.behaviour.why})" for f in derived.members if f.run is None],
    )


def _seal_unverified(run: RunDir) -> list[str]:
    problem, state = seal.run_problem(run.path)
    return [said] if (said := problem or state.words) != "sealed and verified" else []


def _verdict_note(
    verdict: str, undecided: dict[str, list[str]], members: list[Member], models: dict[str, ReportModel]
) -> str:
    """The set's verdict note: the stages left undecided, each member's stages run under a
    changed plan, what kept each candidate that did not qualify from it (when the set did not),
    and the stages declared not applicable."""
    candidates = [(m.label, models[m.label]) for m in members if m.role == "candidate"]
    noted = [(label, model.verdict, model.verdict_note, model.stages) for label, model in candidates]
    # Each stage names whom it left undecided, a control by its role ("bench undecided for the
    # positive control pinned"): unnamed, it reads as the set's own. Where the set did not
    # qualify, each candidate's own note (members_note) already says its undecided stages.
    said = [label for label, verdict_, _, _ in noted if verdict != "QUALIFIED" and verdict_ != "QUALIFIED"]
    stages = []
    for stage, who in undecided.items():
        named = [w for w in who if w not in said]
        if named:
            stages.append(f"{stage} undecided for {_and(named)}")
    changed = [f"{m.label}: {plan}" for m in members if (plan := changed_plans(models[m.label].stages))]
    return "; ".join(p for p in ("; ".join(stages), *changed, members_note(noted, verdict)) if p)


def _and(words: list[str]) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def _member_model(folder: Path) -> ReportModel:
    model = build_model(RunDir(folder))
    return replace(model, stages=with_shared(model.stages, folder))


def _undecided(members: list[Member], models: dict[str, ReportModel]) -> dict[str, list[str]]:
    """stage -> the members for which it decided nothing (INCONCLUSIVE, or counted as WARN by
    the plan): candidates by label, controls by role and label."""
    out: dict[str, list[str]] = {}
    for m in members:
        for stage in models[m.label].stages:
            if stage.undecided and not stage.ungated:
                who = m.label if m.role == "candidate" else f"the {m.title} {m.arm}"
                out.setdefault(stage.name, []).append(who)
    return out


def _reason_shown(verdict: str, reason: str, undecided: dict[str, list[str]]) -> str:
    """The set's reason, saying no more than was decided: with a stage that decided nothing,
    'every candidate qualified and every control behaved' holds for the other stages only."""
    if verdict != "QUALIFIED" or not undecided:
        return reason
    return "every candidate qualified and every control behaved at the stages that decided; " + "; ".join(
        f"{stage} decided nothing for {', '.join(who)}" for stage, who in undecided.items()
    )


def _behaviour_words(member: Member, model: ReportModel, said: str) -> str:
    """A control's behaviour as the report words it: a positive control whose stage decided
    nothing is not said to have passed that stage."""
    if member.role != "positive":
        return said
    undecided = [s.name for s in model.stages if s.configured and s.undecided and not s.ungated]
    if not undecided:
        return said
    passed = [
        s.name
        for s in model.stages
        if s.configured and s.outcome in ("PASS", "WARN") and s.name not in undecided
    ]
    done = f"passed {', '.join(passed)}; its " if passed else "its "
    return (
        f"the positive control {member.arm} {done}{', '.join(undecided)} decided nothing "
        "(INCONCLUSIVE, counted as WARN by the plan): no false alarm there, and no sign the gate can tell"
    )


def _expected(member: Member, stage: str) -> str | None:
    if member.role == "negative":
        return "must FAIL" if stage in member.must_fail else None
    if member.role == "positive":
        return "must pass"
    return None


def _not_proven(
    members: list[Member],
    models: dict[str, ReportModel],
    plans: dict[str, tuple[StageEntry, ...]],
    controls_behaved: bool | None,
) -> list[str]:
    notes: list[str] = []
    if not any(m.is_control for m in members):
        notes.append(
            "No control ran with this set (--no-controls, or none declared): nothing shows the "
            "gates could tell a change from noise on the day."
        )
    if controls_behaved is False:
        notes.append(
            "A control did not behave: the candidates' results prove nothing about the toolchain on this day."
        )
    if any(_shared_alpha(plan) for plan in plans.values()):
        notes.append(
            "Statistical checks split their alpha over the members that ran them, so each candidate "
            "alone was held to a stricter level than a run of one would use."
        )
    for m in members:
        if m.role != "candidate":
            continue
        notes += [f"{m.label}: {note}" for note in models[m.label].not_proven if "A/A run" not in note]
    return notes


def _shared_alpha(stages: Sequence[StageEntry]) -> bool:
    return any(params.get("alpha_shared_by", 1) > 1 for s in stages for params in s.check_params)
