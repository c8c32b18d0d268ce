"""What the distribution stage's checks save and judge by: each kind's measurement (the
candidate's measurement.json) and facts, as types (`qualify.checks.evidence`).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from qualify.checks.evidence import Evidence, Part


def checked(document: Evidence) -> dict[str, Any]:
    """`document` to save, checked whole against its type first: a measurement grows by
    `model_copy` as its steps are taken, which checks nothing on its own."""
    return type(document).load(document.to_json(), type(document).__name__).to_json()


class Step(Part):
    """One nix command of a check: whether it did what it was for, in how long, and nix's words
    when it did not (redacted)."""

    ok: bool
    seconds: float
    error: str | None = None


class MirrorState(Part):
    """An input's source in the plan's mirror."""

    held_before: bool = Field(description="the mirror held it before this check ran")
    archived: bool = Field(description="this check copied it there")
    archive_error: str | None = None
    restored: Step = Field(description="restored from the mirror alone into an empty store")
    nar_hash: str | None = Field(default=None, description="the restored copy's NAR hash (SRI)")


class InputProbe(Part):
    """One locked input of the candidate's flake (`self`: the flake's own source)."""

    name: str = Field(description="its path from the flake (`fork`, `fork/nixpkgs`; `self`)")
    node: str = Field(description="its node in flake.lock (`root` for self)")
    type: str
    source: str = Field(description="where it is fetched from, as locked (URL, owner/repo)")
    rev: str | None
    nar_hash: str | None = Field(description="the lock's NAR hash (SRI); None: not locked")
    store_path: str | None
    origin: Step | None = Field(description="fetched from its origin alone; None: not tried (not locked)")
    mirror: MirrorState | None = Field(description="None: the plan names no mirror")


class InputsMeasurement(Evidence):
    """A `flake-inputs` check's measurement of the candidate's flake."""

    flake: str | None = Field(default=None, description="the flake reference resolved (locked)")
    overrides: list[list[str]] = Field(default_factory=list, description="[input, ref]: the candidate's")
    mirror: str | None = None
    dirty: bool | None = None
    inputs: list[InputProbe] = Field(default_factory=list)
    error: str | None = Field(default=None, description="what stopped the check before any input was judged")


class InputsFacts(Evidence):
    mirror: str | None
    inputs: int
    from_origin: int
    from_mirror_only: int = Field(description="inputs their origin lost that the mirror restored")
    lost: list[str] = Field(description="inputs neither their origin nor a mirror serves")


class BuildTime(Part):
    """What the build stage recorded of the candidate's build, to compare a substitution with."""

    check: str = Field(description="the build check it is read from (stage/check)")
    seconds: float = Field(description="`nix build`'s wall time in that run")
    derivations: int = Field(description="derivations nix built for it in that run")
    derivation_seconds: float = Field(description="their build times summed")
    substituted: int = Field(
        default=0,
        description="paths nix substituted for it from this cache (0 in runs made before it was recorded)",
    )


class CacheMeasurement(Evidence):
    """A `binary-cache` check's measurement of the candidate's closure."""

    cache: str | None = Field(default=None, description="the cache's store URL (no key in it)")
    signed_by: str | None = Field(default=None, description="the signing key's name (never the key)")
    public_key: str | None = Field(default=None, description="the public key the proof trusted")
    closure: str = "runtime"
    compression: str = "zstd"
    paths: int = 0
    nar_bytes: int = Field(default=0, description="the closure's NARs, uncompressed")
    cache_bytes: int = Field(default=0, description="the closure's compressed NARs and narinfos in the cache")
    cache_total_bytes: int = Field(default=0, description="the cache folder as a whole, after the copy")
    held_before: int = Field(
        default=0, description="closure paths the cache held before the copy (not signed again)"
    )
    filled_here: bool = Field(
        default=True,
        description="false: no secret key on this host; the cache, filled where the key is, was proved only",
    )
    copied: Step | None = Field(default=None, description="the copy into the cache")
    substitution: Step | None = None
    substituted_paths: int = 0
    missing: list[str] = Field(default_factory=list, description="closure paths the fresh store lacks")
    verify: Step | None = None
    build: BuildTime | None = None
    error: str | None = Field(default=None, description="what stopped the check before the cache was proved")


class CacheFacts(Evidence):
    cache: str | None
    public_key: str | None
    paths: int
    cache_mib: float
    copy_s: float | None
    substitution_s: float | None
    build_s: float | None = Field(
        description="the build stage's time for the candidate; None: not built there"
    )


class StageSeen(Part):
    """A stage before the pin's move, as the run's files said when it was measured."""

    name: str
    outcome: str
    reason: str = ""


class PinMoveMeasurement(Evidence):
    """A `pin-move` check's measurement: whether the move was due, and the patch written."""

    earlier: list[StageSeen] = Field(default_factory=list)
    earlier_verdict: str = Field(default="", description="what the stages before make of the run")
    allow_unqualified: str | None = None
    skipped: str | None = Field(default=None, description="why no patch was made")
    revision: str | None = None
    dirty: bool | None = None
    how: str | None = Field(default=None, description="the command, or the inputs locked")
    command: Step | None = None
    patch: str | None = Field(default=None, description="the patch file, in the check's candidate folder")
    files: list[str] = Field(default_factory=list, description="the files the patch changes")
    candidate_drv: str | None = None
    default_drv: str | None = Field(default=None, description="the pinned installable's drv after the patch")
    evaluation_error: str | None = None
    error: str | None = Field(default=None, description="what stopped the move")


class PinMoveFacts(Evidence):
    written: bool
    patch: str | None
    files: list[str]
    unqualified: str | None = Field(description="the reason it was written without qualification")
    limits_of_evidence: list[str]
