"""What a `kernel-resources` check saves for a role, as a type (`qualify.checks.evidence`): the
scan's summary (`KernelMeasurement`, the role's measurement.json) beside the per-family tables
it names.

A role that was not scanned holds only its `error`. Every other field was written by every
qualify that scanned, except `mix` (absent in runs made before the instruction mix was read:
no family's mix was read).
"""

from __future__ import annotations

from pydantic import Field, model_validator

from qualify.checks.evidence import Evidence, Part
from qualify.checks.kernelfacts import FamilyMix
from qualify.checks.refusals import refused


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
