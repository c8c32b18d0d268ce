"""What a `nix-build` check's judge writes beside its verdict (`BuildFacts`: the source every arm
was built from and the closures' diffs), and the flake as the build resolved it (`BuildSource`,
its source.json, or `SourceProblem` when it could not be resolved). Here, below the stages,
because the report reads the source too (the revision its headline names), and it imports no
stage.

A role's build as a `nix-build` check saved it (`BuildMeasurement`, its measurement.json):
what nix built, in how long, what it substituted instead, and what came out. Here, below the
stages, because a later stage reads it too: the distribution stage compares substituting the
candidate from a binary cache with the time its build took.

What a `nix-build` check saves besides its source (`qualify.records.build`) and each
role's build (`qualify.records.build`): the dry run of every role before anything was built
(`BuildPlan`, plan.json), the plan's binary caches the build substituted from (`PlanCaches`,
caches.json) and the flake inputs each role's arm uses (`InputsUsed`, its inputs.json): the
types every reader of them goes through.
"""

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


class DerivationBuilt(Part):
    """A derivation whose build started, as nix's internal-json log told it."""

    drv: str
    seconds: float | None = Field(description="None: its build never stopped")
    failed: str | None = Field(description="nix's error when its builder failed")
    machine: str = Field(
        default="", description="the remote builder's store URI; empty: this machine (absent in older runs)"
    )


class FailedDerivation(Part):
    drv: str
    tail: list[str] = Field(description="the last lines of its build log")


class Substitution(Part):
    """What a role's build took from substituters instead of building it, by substituter URI
    (as nix names it: `file:///…` for a cache folder)."""

    paths: dict[str, int] = Field(description="store paths substituted from each substituter")
    failed: dict[str, int] = Field(
        description="paths whose substitution began there but gave none (built instead, or the build failed)"
    )
    untrusted: dict[str, int] = Field(
        description="paths a substituter holds that nix did not use: not signed by a key it trusts"
    )
    ignored: list[str] = Field(
        description="nix's words where it ignored a substituter or a key the build gave it (a daemon "
        "that does not trust this user)"
    )

    def total(self) -> int:
        return sum(self.paths.values())


class BuildMeasurement(Evidence):
    """One role's `nix build` of its arm from the locked flake."""

    role: str
    arm: str
    installable: str = Field(description="the arm's installable as the plan gives it")
    ref: str = Field(description="the installable as built from the locked flake")
    extra_args: list[str] = Field(description="nix's arguments after the installable (secrets redacted)")
    from_project_flake: bool
    ok: bool
    returncode: int
    seconds: float = Field(description="the build's wall time")
    drv: str | None = Field(description="None when the build failed")
    outputs: dict[str, str] = Field(description="output name -> store path")
    out: str | None = Field(description="the `out` output, else the first one")
    gcroot: str = Field(description="the out-link that keeps the build from the garbage collector")
    shared_build_with: str | None = Field(description="the role whose identical build this one is")
    built: list[DerivationBuilt]
    progress: list[int] | None = Field(description="nix's last count: done, expected, running, failed")
    messages: list[str] = Field(description="nix's last messages (20 at most)")
    log: str
    failed: list[FailedDerivation] | None = Field(
        None, description="only when the build failed: the derivations whose outputs are missing"
    )
    substitution: Substitution | None = Field(
        None, description="what came from substituters (absent in runs made before it was recorded)"
    )


class RolePlan(Part):
    """One role's dry run: what nix would build and fetch, or why it could not evaluate."""

    drv: str | None = None
    will_build: list[str] = Field(default_factory=list)
    will_fetch: list[str] = Field(default_factory=list)
    fetch_summary: str | None = None
    error: str | None = Field(None, description="why the dry run failed; then it lists nothing")
    hint: str | None = None
    shared: list[str] = Field(description="derivations another role builds too")
    exclusive: list[str] = Field(description="derivations only this role builds")


class BuildPlan(Evidence):
    roles: dict[str, RolePlan]


class PlanCache(Part):
    """A binary cache the plan names (a `binary-cache` check's), as the build found it here."""

    check: str = Field(description="the check that names it: stage/check")
    cache: str = Field(description="its store URL (file://…), or the plan's value where it is none")
    present: bool = Field(description="this host has the cache (its nix-cache-info)")
    public_key: str | None = Field(description="the key the build trusts it by; None: none known here")
    key_from: str | None = Field(description="public_key (the plan's), or secret_key_file (its half)")
    used: bool = Field(description="every arm's nix build substituted from it")
    why: str | None = Field(description="why it was not used")


class PlanCaches(Evidence):
    """caches.json: the plan's binary caches, and whether the build substituted from each."""

    caches: list[PlanCache]


class InputUsed(Part):
    """A flake input an arm uses, with its locked facts (named as flake.lock names them), or,
    for an input the candidate overrides, its original reference."""

    original: str | None = None
    type: str | None = None
    rev: str | None = None
    narHash: str | None = None
    lastModified: str | None = Field(default=None, description="ISO 8601, UTC")
    revCount: int | None = None
    override: bool = Field(default=False, description="--override-input replaced it for the candidate")


class InputsUsed(Evidence):
    """inputs.json: the flake inputs a role's arm uses, and how they were attributed."""

    method: str = Field(description="declared by the flake, a probe package found, or unknown")
    inputs: dict[str, InputUsed]
    flake_inputs: list[str] = Field(description="every input of the flake")
