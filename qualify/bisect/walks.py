"""The series a bisect is asked for, by name, as the walk that probes it: `[series.NAME]` of
arms or of a flake input's revisions (docs/bisect.md)."""

from __future__ import annotations

from qualify.bisect.inputseries import input_walk
from qualify.bisect.steps import ArmWalk, Walk
from qualify.core.config import ProjectConfig
from qualify.core.errors import UsageError
from qualify.core.series import load_input_series
from qualify.core.tomlfile import Table, suggest


def series_walk(config: ProjectConfig, name: str) -> Walk:
    """The walk of `[series.NAME]`; an unknown name is refused with the closest one."""
    if name in config.series:
        return ArmWalk(config.series[name])
    # qualify.toml was checked whole as it was read (`load_series`): the series of inputs are
    # read again from it here, not kept in the configuration of every command.
    inputs = (
        load_input_series(Table(config.doc, config.doc.data).table("series"), config.arms)
        if config.doc is not None
        else {}
    )
    if name in inputs:
        return input_walk(config, name, inputs[name])
    known = sorted([*config.series, *inputs])
    raise UsageError(
        f"{config.path}: no [series.{name}]{suggest(name, known)}",
        ("series defined: " + ", ".join(known))
        if known
        else 'add one: [series.NAME] arms = ["pinned", "step1", "candidate"], or input = "NAME" '
        'with revisions = ["<rev>", ...]',
    )
