"""A role's build as a `nix-build` check saved it (`BuildMeasurement`, its measurement.json):
what nix built, in how long, what it substituted instead, and what came out. Here, below the
stages, because a later stage reads it too: the distribution stage compares substituting the
candidate from a binary cache with the time its build took."""

from __future__ import annotations

from pydantic import Field

from qualify.checks.evidence import Evidence, Part


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
