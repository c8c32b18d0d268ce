"""What a `nix-build` check saves besides its source (`qualify.checks.buildfacts`) and each
role's build (`qualify.checks.buildrecord`): the dry run of every role before anything was built
(`BuildPlan`, plan.json), the plan's binary caches the build substituted from (`PlanCaches`,
caches.json) and the flake inputs each role's arm uses (`InputsUsed`, its inputs.json): the
types every reader of them goes through."""

from __future__ import annotations

from pydantic import Field

from qualify.checks.evidence import Evidence, Part


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
