"""The run's options from the command line (`--allow-dirty`, `--override-input`,
`--nix-option`, `--stage`), as one type: what `qualify run` is asked (`RunRequest.options`, with
the values given), what run.json's `options` and each invocation record (`recorded`,
`invoked`: secrets redacted), and what a run hands its build check (`for_build`: the values
given, `CheckContext.options`), read by the run record and the build alike."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import AfterValidator, Field

from qualify.checks.evidence import Part
from qualify.checks.refusals import checked, refused
from qualify.core.recordredaction import redact_options, redact_overrides


def _a_pair(value: list[str]) -> list[str]:
    if len(value) != 2:
        raise refused(f"is a list of {len(value)}, not a [name, value] pair")
    return value


#: A name and its value: an input and the flake it is replaced by, a nix setting and its value.
Pair = Annotated[list[str], AfterValidator(_a_pair)]


class RunOptions(Part):
    """Whether a dirty tree may be built, the candidate's input overrides and the nix options
    given, as [name, value] pairs (as given, or as run.json saved them: secrets redacted), and
    the stages the run was narrowed to."""

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

    def narrowed(self, stages: list[str] | None, left_out: list[str]) -> RunOptions:
        """These options for a run of only `stages` of its plan (None: every stage), leaving
        `left_out` out."""
        return self.model_copy(update={"stages": stages, "left_out": left_out})

    def _redacted(self) -> dict[str, Any]:
        return {
            "allow_dirty": self.allow_dirty,
            "override_inputs": redact_overrides(self.override_inputs),
            "nix_options": redact_options(self.nix_options),
        }

    def recorded(self) -> dict[str, Any]:
        """As run.json's `options` saves them: secrets redacted, and the narrowing only where
        the run was narrowed (a run of every stage is saved as it was before `--stage`)."""
        narrowing = {} if self.stages is None else {"stages": self.stages, "left_out": self.left_out}
        return {**self._redacted(), **narrowing}

    def invoked(self) -> dict[str, Any]:
        """As an invocation of run.json records them: secrets redacted, the stages asked for."""
        return {**self._redacted(), "stages": self.stages}

    def given_again(self, saved: RunOptions) -> dict[str, Any]:
        """run.json's options on a rerun: the build options given again replace the saved
        ones; the others stay as saved."""
        options = saved.as_json()
        again = self._redacted()
        options.update({k: v for k, v in again.items() if v})
        return options

    def for_build(self) -> dict[str, Any]:
        """The override and nix options given, with their real values, for the build (run.json
        keeps them redacted: a secret nix option or a token in an override's URL)."""
        given = {"nix_options": self.nix_options, "override_inputs": self.override_inputs}
        return {k: [list(pair) for pair in v] for k, v in given.items() if v}
