"""What a `kernel-resources` check's judge writes beside its verdict (`KernelFacts`): each role's
kernels per family, the kernels compared with pinned by the severity the judge gave them, and
how each role's instruction mix was read. Here, below the stages, because a bisection reads a
step's failing kernels from them (`qualify.bisect.kernelchanges`), and the compile stage is
not below it."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import Field, TypeAdapter, ValidationError

from qualify.checks.evidence import HINT, Evidence, Part
from qualify.core.errors import RunStoreError


class Severities(Part):
    """The kernels compared with pinned, by the severity the judge gave each (all 0 when the two
    roles were not both scanned)."""

    FAIL: int
    ERROR: int = Field(description="kernels whose figures cannot be trusted")
    WARN: int
    INFO: int
    same: int = Field(description="kernels whose figures did not change")


class MixRead(Part):
    """A family's instruction mix, decoded: by which tool, and how much of it."""

    tool: list[str] = Field(description="the disassembler's command, before its options")
    version: str = Field(description="the version line the disassembler reported")
    code_objects: int = Field(description="code objects it decoded")
    code_objects_failed: int = Field(
        0, description="code objects it could not read (absent in runs made before it was recorded)"
    )
    failed: list[str] = Field(
        default_factory=list, description="its first messages for those (absent, as above)"
    )
    kernels: int = Field(description="the family's kernels in the role's scan")
    kernels_read: int = Field(description="the kernels its disassembly showed, given a mix")
    seconds: float = Field(description="from the role's scan starting until this family's mix was read")


class MixNotRead(Part):
    """A family whose mix was not read, and why (no disassembler on PATH, one set empty)."""

    not_read: str


#: A family's mix as a role's measurement saved it: read, or why not.
FamilyMix = MixRead | MixNotRead
_ROLE_MIX: TypeAdapter[dict[str, FamilyMix]] = TypeAdapter(dict[str, FamilyMix])


class KernelFacts(Evidence):
    counts: dict[str, dict[str, int]] = Field(description="per role: its kernels per family")
    kernels_by_severity: Severities = Field(description="the kernels compared with pinned, by severity")
    mix: dict[str, dict[str, FamilyMix]] = Field(
        default_factory=dict,
        description="per scanned role and family: how its instruction mix was read, or why not "
        "(absent in runs made before the mix was read)",
    )


def role_mix(status: Mapping[str, Any], where: Path) -> dict[str, FamilyMix]:
    """A role's `mix` as its measurement.json (`where`) saved it, as the facts hold it; a mix
    that does not hold is refused naming the file and the key."""
    try:
        return _ROLE_MIX.validate_python(status, strict=True)
    except ValidationError as exc:
        first = exc.errors()[0]
        place = ".".join(str(part) for part in ("mix", *first["loc"]))
        said = "missing" if first["type"] == "missing" else first["msg"].lower()
        raise RunStoreError(f"{where}: {place}: {said}", HINT) from None
