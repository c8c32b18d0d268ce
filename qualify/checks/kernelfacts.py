"""What a `kernel-resources` check's judge writes beside its verdict (`KernelFacts`): each role's
kernels per family, the kernels compared with pinned by the severity the judge gave them, how
each role's instruction mix was read, its stubs, what goes with the findings
(`qualify.checks.causefacts`), and the source files the failing kernels come from. Here, below
the stages, because a bisection reads a step's failing kernels from them
(`qualify.bisect.kernelchanges`), and the compile stage is not below it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import Discriminator, Field

from qualify.checks.causefacts import Association
from qualify.checks.evidence import Evidence, Part, member


class Severities(Part):
    """The kernels compared with pinned, by the severity the judge gave each (all 0 when the two
    roles were not both scanned)."""

    FAIL: int
    ERROR: int = Field(description="kernels whose figures cannot be trusted")
    WARN: int
    INFO: int
    same: int = Field(description="kernels whose figures did not change")
    stub: int = Field(
        0,
        description="kernels set apart, never judged: their code does no work in both builds "
        "(absent in runs judged before stubs were set apart)",
    )


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


_READ, _NOT_READ = member("read"), member("not_read")


def _which_mix(status: Any) -> str:
    """Which of the two a saved mix is: one that says why it was not read is `MixNotRead`, so
    that a wrong entry of either is refused for its own keys, never for the other's."""
    said = isinstance(status, MixNotRead) or (isinstance(status, Mapping) and "not_read" in status)
    return (_NOT_READ if said else _READ).tag


#: A family's mix as a role's measurement saved it: read, or why not.
FamilyMix = Annotated[
    Annotated[MixRead, _READ] | Annotated[MixNotRead, _NOT_READ],
    Discriminator(_which_mix),
]


#: The columns of the compile check's table of kernels by source file
#: (`qualify.compile.bysource`), by which summary.md finds it, and its row of kernels whose
#: source file is not known.
SOURCE_COLUMNS = ("source file", "kernels", "FAIL", "WARN", "the FAIL kernels")
UNKNOWN_SOURCE = "(not known)"


class SourceFailures(Part):
    """A source file (translation unit) of the candidate's GPU kernels, some of which FAIL."""

    source: str = Field(description="as the compiler named it in the object (clang: its basename)")
    kernels: int = Field(description="its kernels compared with pinned, stubs left out")
    FAIL: int
    WARN: int


class KernelFacts(Evidence):
    counts: dict[str, dict[str, int]] = Field(description="per role: its kernels per family")
    kernels_by_severity: Severities = Field(description="the kernels compared with pinned, by severity")
    mix: dict[str, dict[str, FamilyMix]] = Field(
        default_factory=dict,
        description="per scanned role and family: how its instruction mix was read, or why not "
        "(absent in runs made before the mix was read)",
    )
    stubs: dict[str, dict[str, int]] = Field(
        default_factory=dict,
        description="per role: its kernels of each GPU family compared with the other build whose "
        "code does no work (`qualify.compile.stubs`); absent in runs judged before stubs were set apart",
    )
    causes: list[Association] = Field(
        default_factory=list,
        description="what goes with the FAIL and WARN kernels: per family, outcome and change, the "
        "counts both ways and Fisher's exact test (`qualify.compile.causes`); absent in runs "
        "judged before they were counted",
    )
    sources: list[SourceFailures] = Field(
        default_factory=list,
        description="the source files whose kernels FAIL, most failures first "
        "(`qualify.compile.bysource`); absent where no kernel's source file is known, and in runs "
        "judged before source files were read",
    )
