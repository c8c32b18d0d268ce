"""What a `nix-build` check's judge writes beside its verdict (`BuildFacts`: the source every arm
was built from and the closures' diffs), and the flake as the build resolved it (`BuildSource`,
its source.json, or `SourceProblem` when it could not be resolved). Here, below the stages,
because the report reads the source too (the revision its headline names), and it imports no
stage."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field

from qualify.checks.evidence import Evidence, Part
from qualify.core.runstore import read_json


class Problem(Part):
    message: str
    hint: str | None


class SourceProblem(Evidence):
    """source.json when the flake could not be resolved (nix missing, a secret saved redacted)."""

    error: Problem


class BuildSource(Evidence):
    """source.json: the flake resolved once, so that every arm builds from one revision."""

    nix_version: str = Field(description="`nix --version` as nix said it")
    flake: str = Field(description="the flake as given (a path made absolute)")
    locked_url: str = Field(description="the locked URL every arm is built from")
    type: str = Field(description="the locked input's type (git, path, github, …)")
    revision: str | None = Field(description="None: a dirty tree or not version-controlled")
    dirty: bool | None = Field(description="None: not version-controlled (a path: flake)")
    allow_dirty: bool
    last_modified: int | None
    locks: dict[str, Any] = Field(description="the flake's lock, as nix gave it")
    override_inputs: list[list[str]] = Field(description="[name, flake ref]: the candidate's only")
    nix_options: dict[str, str] | None = Field(None, description="absent in runs made before it was recorded")
    system: str = Field(description="the system input probes evaluate for")
    refused: bool = Field(description="a dirty tree without --allow-dirty: nothing was built")

    def facts(self) -> SourceFacts:
        """What the judge's facts keep of it."""
        return SourceFacts.model_validate(self.model_dump(include=set(SourceFacts.model_fields)))


def read_source(path: Path) -> BuildSource | SourceProblem:
    """A build's source.json, checked whole as the form it was written in."""
    document = read_json(path)
    return (SourceProblem if "error" in document else BuildSource).load(document, path)


class SourceFacts(Part):
    """The source every arm was built from, as source.json recorded it."""

    nix_version: str
    flake: str
    locked_url: str
    revision: str | None
    dirty: bool | None
    allow_dirty: bool
    override_inputs: list[list[str]]
    nix_options: dict[str, str] | None = Field(None, description="absent in runs made before it was recorded")


class ClosureDiff(Part):
    """Pinned → candidate: packages by how they changed, and the paths in each closure."""

    added: int
    removed: int
    upgraded: int
    downgraded: int
    changed: int
    rebuilt: int
    identical: int
    left_paths: int = Field(description="paths in pinned's closure")
    right_paths: int = Field(description="paths in the candidate's closure")

    def changes(self) -> dict[str, int]:
        """Packages per kind of change, in the order a reader takes them."""
        return self.model_dump(exclude={"left_paths", "right_paths"})


class BuildFacts(Evidence):
    source: SourceFacts
    runtime_diff: ClosureDiff | None = Field(None, description="absent unless pinned and the candidate built")
    build_diff: ClosureDiff | None = Field(None, description="absent unless pinned and the candidate built")
