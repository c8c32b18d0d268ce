"""What goes with a kernel comparison's findings, as the `kernel-resources` facts keep it: one
`Association` per kernel family, outcome (FAIL, WARN) and change (true16 high-half operands
appearing, VGPR growth, ...), with the counts both ways and Fisher's exact test
(`qualify.compile.causes` computes them). An association, never proof of a cause: a change that
goes with the failures may come with the change that makes them.

Here, below the stages, because the report reads them (`Association.sentence`) and the compile
stage is above it.

What a `kernel-resources` check's judge writes beside its verdict (`KernelFacts`): each role's
kernels per family, the kernels compared with pinned by the severity the judge gave them, how
each role's instruction mix was read, its stubs, what goes with the findings
(`qualify.records.compile`), and the source files the failing kernels come from. Here, below
the stages, because a bisection reads a step's failing kernels from them
(`qualify.bisect.kernelchanges`), and the compile stage is not below it.

What a `kernel-resources` check saves for a role, as a type (`qualify.checks.evidence`): the
scan's summary (`KernelMeasurement`, the role's measurement.json) beside the per-family tables
it names.

A role that was not scanned holds only its `error`. Every other field was written by every
qualify that scanned, except `mix` (absent in runs made before the instruction mix was read:
no family's mix was read).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, model_validator

from qualify.checks.evidence import Evidence, Part, member
from qualify.checks.refusals import refused

#: The severities an association is counted for.
Outcome = Literal["FAIL", "WARN"]
_FAMILY_NAMES = {"amdgpu": "AMDGPU", "cuda": "CUDA"}
_PARTICIPLE = {"FAIL": "failing", "WARN": "warning"}
_VERB = {"FAIL": "fail", "WARN": "WARN"}


class Association(Part):
    """How often kernels with one change end in one outcome, against kernels without it."""

    family: str = Field(description="the kernels' family: amdgpu or cuda")
    outcome: Outcome = Field(description="the severity the kernels are counted for")
    change: str = Field(description="the change's key, e.g. high16_gained")
    words: str = Field(description="the change as a reviewer reads it")
    of: str = Field(
        description="what the change is of: the instruction mix (what the compiler emits) or "
        "resources (registers, scratch, code size: what the code costs)"
    )
    kernels: int = Field(
        description="kernels counted: in both builds, a stub in neither, the change readable; for "
        "WARN, those that did not FAIL or ERROR"
    )
    with_change: int = Field(description="of those, the kernels that show the change")
    in_outcome: int = Field(description="of those counted, the kernels that end in the outcome")
    both: int = Field(description="the kernels that show the change and end in the outcome")
    odds_ratio: float | None = Field(description="the sample odds ratio; None when infinite or undefined")
    p_value: float = Field(description="Fisher's exact test, two-sided")
    judged_by_rules: bool = Field(
        description="the outcome's own rules read this change (by construction, not an explanation)"
    )
    lead: bool = Field(
        description="the association the check's headline names for its outcome (at most one per outcome)"
    )

    @property
    def share_with(self) -> float:
        """Of the kernels with the change, the share that ends in the outcome (0 to 1)."""
        return self.both / self.with_change if self.with_change else 0.0

    @property
    def share_without(self) -> float:
        """Of the kernels without the change, the share that ends in the outcome (0 to 1)."""
        without = self.kernels - self.with_change
        return (self.in_outcome - self.both) / without if without else 0.0

    def sentence(self) -> str:
        """'219 of the 254 failing AMDGPU kernels gained true16 high-half operands (0 → N) (of
        the 1853 kernels with this change, 11.8 % fail; of the 2364 without it, 1.5 %; Fisher
        p ≈ 4e-47)'."""
        family = _FAMILY_NAMES.get(self.family, self.family)
        verb = _VERB[self.outcome]
        return (
            f"{self.both} of the {self.in_outcome} {_PARTICIPLE[self.outcome]} {family} kernels "
            f"{self.words} (of the {self.with_change} kernels with this change, "
            f"{percent(self.share_with)} {verb}; of the {self.kernels - self.with_change} without it, "
            f"{percent(self.share_without)}; Fisher p ≈ {p_text(self.p_value)})"
        )


def percent(share: float) -> str:
    """A share as the tables print it: '11.8 %'."""
    return f"{100 * share:.1f} %"


def p_text(p: float) -> str:
    """A p-value as a reviewer reads it: '4e-47', '0.036', '< 1e-300' (below what a float holds)."""
    if p <= 0:
        return "< 1e-300"
    return f"{p:.2g}" if p >= 0.001 else f"{p:.0e}".replace("e-0", "e-")


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


class ScanError(Part):
    """Why the role's kernels were not read (no such root, an unknown family required, …)."""

    message: str
    hint: str | None


class ScannedFile(Part):
    """A file that holds ELF or device code, and the kernels of each family found in it."""

    file: str = Field(description="relative to the role's root")
    bytes: int
    amdgpu: int
    cuda: int
    host: int
    no_source_file: str | None = Field(
        default=None,
        description="why some of its GPU kernels have no source file (translation unit); absent "
        "when every one has, and in runs made before source files were read",
    )


class Unreadable(Part):
    """A file (or code object) that looked like a container and could not be read."""

    file: str
    reader: str = Field(description="the family whose reader failed, or its instruction mix")
    message: str


class KernelMeasurement(Evidence):
    """One role's scan: what was found where, or why nothing was."""

    role: str
    arm: str
    error: ScanError | None = None
    root: str | None = Field(default=None, description="the directory or file scanned")
    counts: dict[str, int] = Field(default_factory=dict, description="kernels per family")
    files: list[ScannedFile] = Field(default_factory=list)
    unreadable: list[Unreadable] = Field(default_factory=list)
    tables: dict[str, str] = Field(
        default_factory=dict, description="per family: its table's file in the role's folder"
    )
    mix: dict[str, FamilyMix] = Field(
        default_factory=dict,
        description="per family: how its instruction mix was read, or why not "
        "(absent in runs made before the mix was read)",
    )
    seconds: float | None = Field(default=None, description="the scan's duration")

    @model_validator(mode="after")
    def _scanned_or_why_not(self) -> KernelMeasurement:
        """A role without an error was scanned: its scan's fields are there (all but `mix`)."""
        if self.error is None:
            missing = [k for k in _SCANNED if k not in self.model_fields_set]
            if missing:
                raise refused(f"lacks {', '.join(missing)}, and no error says why the role was not scanned")
        return self


#: What a scanned role's measurement holds, besides its `mix`.
_SCANNED = ("root", "counts", "files", "unreadable", "tables", "seconds")
