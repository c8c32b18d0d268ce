"""What the build stage recorded of the candidate, as the distribution stage reads it from the run
(`CheckContext.earlier`): the flake every arm was built from (source.json) and the candidate's
build (its measurement.json), through their types in `qualify.checks`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from qualify.checks.base import CANDIDATE
from qualify.checks.runoptions import RunOptions
from qualify.core.context import CheckContext
from qualify.core.errors import QualifyError
from qualify.records.build import BuildMeasurement, BuildSource, SourceProblem, read_source

#: The kind whose records are read.
BUILD_KIND = "nix-build"


@dataclass(frozen=True)
class Built:
    """The build check's folder, the source it built from and the candidate's build."""

    name: str  # stage/check
    folder: Path
    source: BuildSource
    candidate: BuildMeasurement

    def role(self, role: str) -> BuildMeasurement | None:
        path = self.folder / role / "measurement.json"
        return BuildMeasurement.read(path) if path.is_file() else None

    def builder(self) -> BuildMeasurement:
        """The build that did the candidate's work: its own, or the role's whose identical build
        it shares (an A/A run builds the arm once)."""
        shared = self.candidate.shared_build_with
        return (self.role(shared) if shared else None) or self.candidate


def built(ctx: CheckContext) -> Built:
    """The build stage's record of the candidate in this run, or a QualifyError saying why
    there is none (no build stage, the build not run or failed)."""
    for stage in ctx.earlier():
        for name, kind in stage.checks:
            if kind != BUILD_KIND or stage.folder is None:
                continue
            folder = stage.folder / name
            where = f"{stage.name}/{name}"
            if not (folder / "source.json").is_file():
                raise QualifyError(f"the build check {where} left no source.json (it did not run)")
            source = read_source(folder / "source.json")
            if isinstance(source, SourceProblem):
                raise QualifyError(
                    f"the build check {where} could not resolve the flake: {source.error.message}"
                )
            path = folder / CANDIDATE / "measurement.json"
            if not path.is_file():
                raise QualifyError(f"the build check {where} did not build the candidate")
            candidate = BuildMeasurement.read(path)
            if not candidate.ok or candidate.out is None:
                raise QualifyError(f"the candidate's build failed in {where}: nothing to distribute")
            return Built(where, folder, source, candidate)
    raise QualifyError(
        "no build check (kind nix-build) ran before this stage: the candidate's flake and store path "
        "are not known",
        "the build stage builds the arms every later stage reads; run it (qualify run --from build)",
    )


def candidate_overrides(ctx: CheckContext) -> list[tuple[str, str]]:
    """The flake inputs the candidate's build replaced: this run's `--override-input`s (as this
    invocation was given them: run.json keeps a token in one redacted), then those among the
    candidate arm's own nix arguments."""
    overrides = [(str(name), str(ref)) for name, ref in RunOptions.of(ctx.options).override_inputs]
    args = list(ctx.arms[CANDIDATE].arm.nix_args)
    overrides += [(args[i + 1], args[i + 2]) for i, a in enumerate(args[:-2]) if a == "--override-input"]
    return overrides
