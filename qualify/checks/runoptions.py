"""The run's options from the command line (`--allow-dirty`, `--override-input`,
`--nix-option`, `--stage`), as one type: run.json's `options`, and what a run hands its build check
(`CheckContext.options`), read by the run record and the build alike."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import AfterValidator, Field

from qualify.checks.evidence import Part
from qualify.checks.refusals import checked, refused


def _a_pair(value: list[str]) -> list[str]:
    if len(value) != 2:
        raise refused(f"is a list of {len(value)}, not a [name, value] pair")
    return value


#: A name and its value: an input and the flake it is replaced by, a nix setting and its value.
Pair = Annotated[list[str], AfterValidator(_a_pair)]


class RunOptions(Part):
    """Whether a dirty tree may be built, the candidate's input overrides and the nix options
    given, as [name, value] pairs (secrets as run.json saved them: redacted), and the stages the
    run was narrowed to."""

    allow_dirty: bool = False
    override_inputs: list[Pair] = Field(default_factory=list)
    nix_options: list[Pair] = Field(default_factory=list)
    #: The only stages of the plan this run runs (`--stage`), kept for its resumes; None (or
    #: absent, in runs saved before): every stage.
    stages: list[str] | None = None
    #: The plan's stages `stages` left out: NOT CONFIGURED in this run, so it never qualifies.
    left_out: list[str] = Field(default_factory=list)

    @classmethod
    def of(cls, options: Mapping[str, Any]) -> RunOptions:
        """The options a run was given, or run.json saved; one of the wrong shape is refused
        naming `options.<key>`."""
        return checked(cls, options, "run.json", under="options")

    def as_json(self) -> dict[str, Any]:
        """The options as they were recorded: the fields they were read with."""
        return self.model_dump(mode="json", exclude_unset=True)
