"""Probing one step of a series: a qualification run through the real engine
(`qualify.pipeline.runner.execute`: builds, containment, records), with the run's plan narrowed
to the stages the gate needs (docs/bisect.md). What the step builds comes from its walk: in a
series of arms, the step's arm as the candidate against the series' first arm as pinned (`ArmWalk`);
in a series of an input's revisions, the candidate arm with the input overridden at the step's
revision (`qualify.bisect.inputseries`).

Each attempt of a step is a run of its own in `steps/<NN>-<name>/`, the step's runs directory,
so an attempt stopped half-way is never written over by the next one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from qualify.bisect.gate import Gate, judge_step
from qualify.bisect.outcomes import Measured
from qualify.bisect.state import Step
from qualify.checks.registry import kind_named
from qualify.checks.runoptions import RunOptions
from qualify.pipeline.events import Events
from qualify.pipeline.notapplicable import BUILD_STAGE
from qualify.pipeline.plan import Plan
from qualify.pipeline.runner import RunRequest, execute
from qualify.records.bisect import StepEvidence

STEPS = "steps"
_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]")


@dataclass(frozen=True)
class StepBuild:
    """What one step's run builds: its candidate and pinned arms, the flake inputs overridden
    for the candidate's build alone, and what the probe's evidence records of the step."""

    candidate: str
    pinned: str
    override_inputs: tuple[tuple[str, str], ...] = ()
    #: Fields of the probe's evidence (`StepEvidence`) the walk knows: an input's revision.
    recorded: Mapping[str, str] = field(default_factory=dict)


class Walk(Protocol):
    """A series as a bisect walks it: its steps' names, good end first, what a resume must
    find unchanged, and what each step builds."""

    @property
    def names(self) -> tuple[str, ...]: ...

    def context(self) -> dict[str, Any]: ...

    def __call__(self, step: Step) -> StepBuild: ...


@dataclass(frozen=True)
class ArmWalk:
    """A series of arms: each step's arm against the first."""

    arms: tuple[str, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return self.arms

    def context(self) -> dict[str, Any]:
        return {"pinned": self.arms[0]}

    def __call__(self, step: Step) -> StepBuild:
        return StepBuild(step.name, self.arms[0])


def step_folder(bisect: Path, step: Step) -> Path:
    """The runs directory of one step's attempts: `steps/<NN>-<arm>/`."""
    return bisect / STEPS / f"{step.index:02d}-{_UNSAFE.sub('_', step.name)}"


def stages_for(plan: Plan, gate: Gate, *, no_gate: bool) -> tuple[str, ...]:
    """The stages a step runs, in the plan's order: those up to and including the gate's, each
    gating the next; with `no_gate`, only the build stage (and any other that builds the arms)
    and the gate's own.
    A step never runs a stage past its gate: the run's plan is narrowed to these
    (`RunOptions.stages`), so the run ends complete, its other stages NOT CONFIGURED."""
    names = [s.name for s in plan.stages]
    upto = plan.stages[: names.index(gate.stage) + 1]
    if not no_gate:
        return tuple(s.name for s in upto)
    builds = [
        s.name
        for s in upto
        if s.name == BUILD_STAGE or any(kind_named(c.kind, c.name).builds_arms for c in s.checks)
    ]
    return tuple(dict.fromkeys([*builds, gate.stage]))


@dataclass
class StepProber:
    """Probes the steps of `walk` in the bisect folder `folder` (a `drive.Prober`)."""

    project: Path
    folder: Path
    walk: Walk
    gate: Gate
    stages: tuple[str, ...]
    no_gate: bool
    events: Events = field(default_factory=Events)
    #: The profile every step's run resolves its plan with (None: the project's own).
    profile: str | None = None
    #: Build each step from a working tree with uncommitted changes (each run reports it).
    allow_dirty: bool = False

    def __call__(self, step: Step) -> Measured:
        build = self.walk(step)
        request = RunRequest(
            project=self.project,
            candidates=(build.candidate,),
            pinned=build.pinned,
            no_gate=self.no_gate,
            runs_dir=step_folder(self.folder, step),
            # A step asks one question, of one arm: the project's controls answer another.
            controls=False,
            profile=self.profile,
            options=RunOptions(
                allow_dirty=self.allow_dirty,
                override_inputs=[list(pair) for pair in build.override_inputs],
                stages=list(self.stages),
            ),
        )
        outcome = execute(request, self.events)
        if outcome.verdict is None:
            # Stopped from outside (Ctrl-C, SIGTERM): the probe stays saved as started, and a
            # resume probes the step again under its next attempt.
            raise KeyboardInterrupt
        measured = judge_step(outcome.run.path, self.gate)
        if not build.recorded or measured.evidence is None:
            return measured
        evidence = StepEvidence.model_validate({**measured.evidence.saved(), **build.recorded})
        return Measured(measured.outcome, evidence)
