"""A run set: several candidates and the project's controls qualified in one run.

runs/<id>/run.json              kind "set": the members, each one's verdict, the set's verdict
runs/<id>/<label>/              an ordinary run per member (its run.json names its roles)
runs/<id>/<NN-stage>/<check>/   what the set measured once for all members

The stages run in the plan's order, each for every member before the next stage starts, so
the members are measured close together on the same day; each member's gate is its own (a
candidate failing compile stops its own later stages, the others go on). Pinned and the
reference are the same arms in every member (nix builds each once). A check whose kind can
measure the members together (`CheckKind.member_view`: the bench, numerics, the soak, `command`
and `tests`) is measured once, with the shared roles once and every member's arm beside them,
and each member's check is then filled from that measurement and judged as a run of one.

The engine that runs a set is the one that runs a run of one (`runner.execute`); what is here
is only what a set has beyond it: its members' folders, its joint measurements and its verdict.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from qualify.checks.base import Judgement, Measure
from qualify.checks.registry import kind_named
from qualify.core.config import ProjectConfig
from qualify.core.containment import writing
from qualify.core.context import CheckContext, RoleArm
from qualify.core.errors import QualifyError, UsageError
from qualify.core.progress import Progress
from qualify.core.runstore import RunDir, now_iso
from qualify.core.verdicts import RunVerdict
from qualify.pipeline.events import Events
from qualify.pipeline.judging import harness_error_log
from qualify.pipeline.ondisk import set_on_disk
from qualify.pipeline.plan import Plan, StageSpec
from qualify.pipeline.request import RunRequest
from qualify.pipeline.rundoc import new_run_document
from qualify.pipeline.stageloop import StageLoop
from qualify.records import seal
from qualify.records.run import STATUSES, Member, RunRecord, update_run

SET = "set"


def member_runs(run: RunDir) -> list[tuple[Member, RunDir]]:
    """A set's members, each with its run directory."""
    return [(m, RunDir(run.path / m.label)) for m in RunRecord.load(run).members]


def wants_set(config: ProjectConfig, request: RunRequest) -> bool:
    """A new run is a set when it qualifies several candidates or the project has controls."""
    return len(request.candidates) > 1 or (bool(config.controls) and request.controls)


def summarize_set(run: RunDir) -> RunVerdict:
    """Each member's verdict and behaviour, and the set's verdict, derived from the members'
    folders (`ondisk.set_on_disk`) and saved in the set's run.json for readers of the file."""
    derived = set_on_disk(run)
    rows = {}
    for found in derived.members:
        member_run = found.run
        rows[found.member.label] = {
            **found.member.as_json(),
            "status": member_run.status if member_run else "not created",
            "verdict": member_run.verdict.value if member_run else None,
            "stages": {n: o.value for n, o in member_run.stages.items()} if member_run else {},
            "behaved": found.behaviour.behaved,
            "behaviour": found.behaviour.why,
        }
    # The saved status is what a writer said of the set; "dead" and "not created" are readings
    # of the folders now (a writer gone without ending, a member never made), never written.
    status = {"status": derived.status} if derived.status in STATUSES else {}
    update_run(
        run,
        **status,
        verdict=derived.verdict.value,
        verdict_reason=derived.reason,
        exit_code=int(derived.exit_code),
        controls_behaved=derived.controls_behaved,
        member_results=rows,
        finished_at=now_iso(),
    )
    return derived.verdict


def create_member(
    run: RunDir,
    member: Member,
    config: ProjectConfig,
    plan: Plan,
    arms: dict[str, RoleArm],
    request: RunRequest,
) -> None:
    """A member's folder and run.json, unless an earlier attempt made them (a set stopped while
    it was being made is completed on resume). The member's folder is inside the set's and
    never a link (`RunDir.folder`)."""
    folder = RunDir(run.folder(member.label))
    if folder.run_json.is_file():
        return
    run.folder(member.label, "gcroots")
    doc = new_run_document(folder, config, plan, arms, request)
    RunRecord.parse(folder, {**doc, "set": {"run_id": run.run_id, **member.as_json()}}).save()


def chosen_members(members: list[Member], wanted: Sequence[str], run: RunDir | None) -> list[Member]:
    """The members a rerun of a saved set works on: those `--candidate` names (by arm or label),
    or all."""
    if not wanted:
        return members
    out = []
    for name in wanted:
        found = [m for m in members if name in (m.label, m.arm)]
        if not found:
            raise UsageError(
                f"run {run.run_id if run else ''} has no member {name!r}",
                "its members: " + ", ".join(m.label for m in members),
            )
        out += [m for m in found if m not in out]
    return [m for m in members if m in out]


def step_members(
    run: RunDir,
    config: ProjectConfig,
    plans: dict[str, Plan],
    loops: dict[str, StageLoop],
    chosen: list[Member],
    stage: StageSpec,
    events: Events,
) -> None:
    here = [m for m in chosen if any(s.name == stage.name for s in plans[m.label].stages)]
    own = {m.label: plans[m.label].stage(stage.name) for m in here}
    measuring = [m for m in here if loops[m.label].will_run(own[m.label])]
    measured: dict[str, dict[str, Measure]] = {m.label: {} for m in here}
    joint = [c for c in stage.checks if kind_named(c.kind, c.name).measures_members]
    if len(measuring) > 1 and joint:
        # An earlier attempt's shared measurements move aside once, before any is made again;
        # so do the measuring members' records of it, which would otherwise still give the
        # earlier attempt's verdict while this one measures, or after it was interrupted.
        seal.moved_aside(run.stage_dir(stage.folder), RunDir(run.path).move_to_attempts(stage.folder))
        for m in measuring:
            member = RunDir(run.path / m.label)
            seal.moved_aside(member.stage_dir(stage.folder), member.move_to_attempts(stage.folder))
        for check in joint:
            kind = kind_named(check.kind, check.name)
            crash = _measure_jointly(run, config, loops, own, measuring, stage, check.name, events)
            folder = run.stage_dir(stage.folder) / check.name
            for m in measuring:
                measured[m.label][check.name] = (
                    kind.view_for(folder, m.label) if crash is None else _crashed(crash)
                )
    for m in here:
        loops[m.label].step(own[m.label], measured[m.label])


def _measure_jointly(
    run: RunDir,
    config: ProjectConfig,
    loops: dict[str, StageLoop],
    own: dict[str, StageSpec],
    measuring: list[Member],
    stage: StageSpec,
    check_name: str,
    events: Events,
) -> str | None:
    """One measurement of a check with the shared roles and every measuring member's arm;
    why it failed, or None."""
    first = measuring[0]
    spec = next(c for c in own[first.label].checks if c.name == check_name)
    folder = run.folder(stage.folder, check_name)
    # The roles every member shares (pinned, and the reference where the check scores it), once.
    shared = loops[first.label].runner.arms
    arms: dict[str, RoleArm] = {r: shared[r] for r in spec.roles if r != "candidate"}
    for m in measuring:
        arms[m.label] = replace(loops[m.label].runner.arms["candidate"], role=m.label)
    roles = tuple(arms)
    events.echo(f"{stage.name}/{check_name}: measuring {', '.join(roles)} in one schedule")
    ctx = CheckContext(
        spec=spec,
        folder=folder,
        run_dir=run.path,
        config=config,
        arms=arms,
        echo=events.echo,
        options=loops[first.label].runner.options,
        roles_override=roles,
        progress=events.progress,
        advance=events.advance,
        role_names={m.label: "candidate" for m in measuring},
    )
    kind = kind_named(spec.kind, check_name)
    try:
        seal.measuring(folder)
        with writing(folder, gcroots=run.path / "gcroots"):
            kind.measure(ctx)
    except QualifyError as exc:
        return f"the set's shared measurement failed: {exc}".replace("\n", " — ")
    except Exception:  # a harness bug must not lose the set: each member's check is ERROR
        log = harness_error_log(folder)
        return f"internal error in the set's shared {spec.kind!r} measurement; see {log}"
    finally:
        events.progress(None)
    seal.check()  # the shared measurement's commands have ended: had one changed a record, stop
    seal.note_folder(folder)  # what every member's judge reads of it, sealed now
    return None


def _crashed(message: str) -> Measure:
    """The `measure` of a member whose shared measurement failed: it fails the same way."""

    def fail(_ctx: CheckContext) -> None:
        raise QualifyError(message)

    return fail


class MemberEvents(Events):
    """A member's events, its label on every stage and check the console shows."""

    def __init__(self, inner: Events, member: Member) -> None:
        self.inner, self.member = inner, member

    def _named(self, stage: StageSpec) -> StageSpec:
        return replace(stage, name=f"{stage.name} · {self.member.label}")

    def echo(self, line: str) -> None:
        self.inner.echo(line)

    def stage_start(self, stage: StageSpec, note: str) -> None:
        self.inner.stage_start(self._named(stage), note)

    def stage_end(self, stage: StageSpec, outcome: str, reason: str) -> None:
        self.inner.stage_end(self._named(stage), outcome, reason)

    def check_start(self, stage: str, check: str) -> None:
        self.inner.check_start(f"{stage} · {self.member.label}", check)

    def check_end(self, stage: str, check: str, judgement: Judgement) -> None:
        self.inner.check_end(f"{stage} · {self.member.label}", check, judgement)

    def progress(self, text: str | None) -> None:
        self.inner.progress(text)

    def advance(self, progress: Progress) -> None:
        self.inner.advance(progress)

    def close(self) -> None:
        """The set closes the console once, after every member."""
