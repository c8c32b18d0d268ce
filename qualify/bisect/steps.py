"""Probing one step of a series: a qualification run of the step's arm as the candidate against
the series' first arm as pinned, through the real engine (`qualify.pipeline.runner.execute`:
builds, containment, records), with the run's plan narrowed to the stages the gate needs
(docs/bisect.md).

Each attempt of a step is a run of its own in `steps/<NN>-<arm>/`, the step's runs directory,
so an attempt stopped half-way is never written over by the next one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from qualify.bisect.gate import Gate, judge_step
from qualify.bisect.outcomes import Measured
from qualify.bisect.state import Step
from qualify.checks.registry import kind_named
from qualify.pipeline.events import Events
from qualify.pipeline.notapplicable import BUILD_STAGE
from qualify.pipeline.plan import Plan
from qualify.pipeline.runner import RunRequest, execute

STEPS = "steps"
_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]")


def step_folder(bisect: Path, step: Step) -> Path:
    """The runs directory of one step's attempts: `steps/<NN>-<arm>/`."""
    return bisect / STEPS / f"{step.index:02d}-{_UNSAFE.sub('_', step.name)}"


def stages_for(plan: Plan, gate: Gate, *, no_gate: bool) -> tuple[str, ...]:
    """The stages a step runs, in the plan's order: those up to and including the gate's, each
    gating the next; with `no_gate`, only the build stage (and any other that builds the arms)
    and the gate's own.
    A step never runs a stage past its gate: the run's plan is narrowed to these
    (`RunRequest.stages`), so the run ends complete, its other stages NOT CONFIGURED."""
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
    """Probes steps of `series` in the bisect folder `folder` (a `drive.Prober`)."""

    project: Path
    folder: Path
    series: Sequence[str]
    gate: Gate
    stages: tuple[str, ...]
    no_gate: bool
    events: Events = field(default_factory=Events)

    def __call__(self, step: Step) -> Measured:
        request = RunRequest(
            project=self.project,
            candidate=step.name,
            pinned=self.series[0],
            no_gate=self.no_gate,
            runs_dir=step_folder(self.folder, step),
            # A step asks one question, of one arm: the project's controls answer another.
            controls=False,
            stages=self.stages,
        )
        outcome = execute(request, self.events)
        if outcome.verdict is None:
            # Stopped from outside (Ctrl-C, SIGTERM): the probe stays saved as started, and a
            # resume probes the step again under its next attempt.
            raise KeyboardInterrupt
        return judge_step(outcome.run.path, self.gate)
