"""What goes with a kernel comparison's findings, as the `kernel-resources` facts keep it: one
`Association` per kernel family, outcome (FAIL, WARN) and change (true16 high-half operands
appearing, VGPR growth, ...), with the counts both ways and Fisher's exact test
(`qualify.compile.causes` computes them). An association, never proof of a cause: a change that
goes with the failures may come with the change that makes them.

Here, below the stages, because the report reads them (`Association.sentence`) and the compile
stage is above it."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from qualify.checks.evidence import Part

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
